// Real processes end to end: the launcher starts this test binary as its workers (selected by
// STRATAGEM_TEST_WORKER), which read torchrun's environment, meet through the TCPStore and run
// Gloo collectives; a hanging collective and a crashing worker end the job with the culprit
// named.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "engine/comm/communicator.hpp"
#include "engine/launch/dist_env.hpp"
#include "engine/launch/launcher.hpp"
#include "engine/comm/store.hpp"
#include "tests/runtime/test_comm_util.hpp"

namespace stratagem::test {
namespace {

using std::chrono::milliseconds;

// The body of one worker process; its return value is the process's exit code.
int worker_main(const std::string& mode) {
  try {
    const auto env = launch::read_dist_env();
    // Starting this binary takes seconds on a loaded machine: a long rendezvous, then the
    // short op timeout that the "hang" mode runs into.
    auto store = comm::rendezvous(env, milliseconds(60000));
    const milliseconds timeout(mode == "ok" ? 20000 : 1500);
    auto comm = comm::make_communicator(env, store, "gloo", timeout);
    auto b = at::ones({2});
    comm->broadcast(b, 0, {})->wait();
    if (mode == "ok") {
      check_collectives(*comm, at::kFloat);
      comm->barrier({});
      if (::testing::Test::HasFailure()) return 1;
      std::printf("rank %d of %d: all checks passed\n", env.rank, env.world_size);
      return 0;
    }
    if (mode == "crash" && env.rank == 1) {
      std::fprintf(stderr, "rank 1 aborts now\n");
      std::fflush(stderr);
      std::abort();
    }
    if (mode == "hang" && env.rank == env.world_size - 1) {
      std::this_thread::sleep_for(std::chrono::seconds(60));  // ended by the launcher
      return 0;
    }
    auto t = at::ones({4});
    comm->all_reduce(t, {}, comm::ReduceOp::sum)->wait();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

TEST(LauncherGloo, WorkerProcess) {
  const char* mode = std::getenv("STRATAGEM_TEST_WORKER");
  if (!mode) GTEST_SKIP() << "runs only inside workers started by the LauncherGloo tests";
  const int code = worker_main(mode);
  std::fflush(stdout);
  std::fflush(stderr);
  std::exit(code);
}

std::string self_exe() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

launch::LaunchResult launch_workers(const std::string& mode, int n,
                                    std::vector<std::string>& lines) {
  launch::LaunchOptions o;
  o.num_processes = n;
  o.main_process_port = 0;
  o.env = {{"STRATAGEM_TEST_WORKER", mode}};
  o.timeout = std::chrono::seconds(120);
  o.on_line = [&lines](int rank, bool, const std::string& line) {
    lines.push_back("[rank " + std::to_string(rank) + "] " + line);
  };
  return launch::launch(o, {self_exe(), "--gtest_filter=LauncherGloo.WorkerProcess"});
}

bool contains(const std::vector<std::string>& lines, const std::string& text) {
  for (const auto& l : lines) {
    if (l.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(LauncherGloo, ThreeProcessesRunTheClosedFormChecks) {
  std::vector<std::string> lines;
  const auto r = launch_workers("ok", 3, lines);
  EXPECT_EQ(r.exit_code, 0) << r.message << "\n" << joined(lines);
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_TRUE(contains(lines, "[rank " + std::to_string(rank) + "] rank " + std::to_string(rank) +
                                    " of 3: all checks passed"))
        << joined(lines);
  }
}

TEST(LauncherGloo, AHangingCollectiveEndsTheJobNamingTheMissingRank) {
  std::vector<std::string> lines;
  const auto start = std::chrono::steady_clock::now();
  const auto r = launch_workers("hang", 3, lines);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
  EXPECT_EQ(r.exit_code, 1) << r.message;
  ASSERT_TRUE(r.first_failure) << joined(lines);
  EXPECT_LT(r.first_failure->rank, 2);
  EXPECT_NE(r.message.find("gloo all_reduce #1 on [0,1,2] (16 B, Float)"), std::string::npos)
      << r.message;
  EXPECT_NE(r.message.find("rank 2 has not reached it (last issued: broadcast #0 on [0,1,2])"),
            std::string::npos)
      << r.message;
  EXPECT_TRUE(r.workers[2].ended_by_launcher);
}

TEST(LauncherGloo, ACrashingWorkerIsReportedFirst) {
  std::vector<std::string> lines;
  const auto r = launch_workers("crash", 3, lines);
  ASSERT_TRUE(r.first_failure) << joined(lines);
  EXPECT_EQ(r.first_failure->rank, 1);
  EXPECT_TRUE(r.first_failure->signaled);
  EXPECT_NE(r.message.find("failed: signal 6 (SIGABRT)"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("rank 1 aborts now"), std::string::npos) << r.message;
}

}  // namespace
}  // namespace stratagem::test
