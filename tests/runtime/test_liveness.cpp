// Liveness (engine/launch/heartbeat.hpp): the watch's verdicts, and the launcher ending a job
// whose worker stopped (SIGSTOP) or stopped progressing, naming the rank, leaving nothing
// behind; then a real two-process run whose rank 0 — the store's host — or rank 1 is stopped.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "engine/launch/heartbeat.hpp"
#include "engine/launch/launcher.hpp"

extern char** environ;

namespace stratagem::test {
namespace {

using launch::LivenessWatch;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = launch::LivenessWatch::Clock;

TEST(LivenessWatch, NamesASilentRankAndTheOneFurthestBehind) {
  launch::LivenessWatch w(seconds(10));
  const auto t0 = Clock::now();
  EXPECT_FALSE(w.stalled(t0 + seconds(100)));  // nobody watched yet
  w.beat(0, "5 op 5: all_reduce", t0);
  w.beat(1, "3 op 3: forward block 2", t0);
  EXPECT_FALSE(w.stalled(t0 + seconds(5)));
  // Both keep beating, only rank 0 progresses: alive.
  w.beat(0, "6 op 6", t0 + seconds(9));
  w.beat(1, "3 op 3: forward block 2", t0 + seconds(9));
  EXPECT_FALSE(w.stalled(t0 + seconds(12)));
  // Neither progresses for longer than the limit: rank 1 is behind (3 < 6), in its op.
  w.beat(0, "6 op 6", t0 + seconds(19));
  w.beat(1, "3 op 3: forward block 2", t0 + seconds(19));
  const auto why = w.stalled(t0 + seconds(20));
  ASSERT_TRUE(why);
  EXPECT_EQ(why->rank, 1);
  EXPECT_NE(why->why.find("rank 1 is furthest behind (last at: op 3: forward block 2)"),
            std::string::npos)
      << why->why;
  // A rank that stops beating is named first, whatever the others do.
  launch::LivenessWatch v(seconds(10));
  v.beat(0, "1 rendezvous", t0);
  v.beat(1, "1 rendezvous", t0);
  for (int s = 1; s <= 12; ++s) v.beat(1, std::to_string(s) + " op", t0 + seconds(s));
  const auto silent = v.stalled(t0 + seconds(12));
  ASSERT_TRUE(silent);
  EXPECT_EQ(silent->rank, 0);
  EXPECT_NE(silent->why.find("rank 0 stopped responding: no heartbeat for 12 s"),
            std::string::npos)
      << silent->why;
  v.forget(0);
  EXPECT_FALSE(v.stalled(t0 + seconds(12)));
  // Garbage is ignored; a limit of 0 disables the watch.
  launch::LivenessWatch off(seconds(0));
  off.beat(0, "not a number", t0);
  off.beat(1, "1 x", t0);
  EXPECT_FALSE(off.stalled(t0 + seconds(1000)));
}

launch::LaunchOptions quiet(int n, seconds liveness) {
  launch::LaunchOptions o;
  o.num_processes = n;
  o.main_process_port = 0;
  o.kill_grace = milliseconds(500);
  o.liveness = liveness;
  o.on_line = [](int, bool, const std::string&) {};
  return o;
}

bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return false;
  std::string text((std::istreambuf_iterator<char>(stat)), {});
  const auto close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] != 'Z' &&
         text[close + 2] != 'X';
}

// Workers beat through the descriptor the launcher names; rank 1 stops itself after a moment.
TEST(Liveness, AStoppedWorkerEndsTheJobNamingItsRank) {
  const std::string beat =
      "i=0; while true; do i=$((i+1)); echo \"$i looping\" >&$STRATAGEM_HEARTBEAT_FD; "
      "if [ \"$RANK\" = 1 ] && [ $i = 3 ]; then kill -STOP $$; fi; sleep 0.2; done";
  const auto start = Clock::now();
  const auto r = launch::launch(quiet(2, seconds(2)), {"sh", "-c", beat});
  const auto took = Clock::now() - start;
  EXPECT_TRUE(r.stalled);
  EXPECT_EQ(r.exit_code, 124);
  EXPECT_NE(r.message.find("rank 1 stopped responding"), std::string::npos) << r.message;
  EXPECT_LT(took, seconds(8));
  for (const auto& w : r.workers) EXPECT_FALSE(alive(w.pid)) << "rank " << w.rank;
}

TEST(Liveness, WorkersThatBeatWithoutProgressAreWedged) {
  const std::string beat =
      "while true; do echo \"7 all_reduce grad_sync rank $RANK\" >&$STRATAGEM_HEARTBEAT_FD; "
      "sleep 0.2; done";
  const auto r = launch::launch(quiet(2, seconds(2)), {"sh", "-c", beat});
  EXPECT_TRUE(r.stalled);
  EXPECT_NE(r.message.find("no rank made progress"), std::string::npos) << r.message;
  // Programs that never beat are not watched: they run to their end.
  const auto quiet_ok = launch::launch(quiet(2, seconds(1)), {"sh", "-c", "sleep 2"});
  EXPECT_EQ(quiet_ok.exit_code, 0) << quiet_ok.message;
}

// The children of `parent` (from /proc/*/stat).
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(e.path() / "stat");
    std::string text((std::istreambuf_iterator<char>(stat)), {});
    const auto close = text.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(text.substr(close + 2));
    char state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == parent) out.push_back(std::stoi(name));
  }
  return out;
}

// The real runtime: `stratagem run` of two CPU workers; rank `stopped` is sent SIGSTOP once it
// trains. The launcher must end the job within the bound, naming that rank, with no process
// left. Rank 0 hosts the rendezvous store: no diagnosis may wait on it.
void stop_rank_during_a_run(int stopped) {
  int out_pipe[2];
  ASSERT_EQ(::pipe(out_pipe), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 2);
  posix_spawn_file_actions_addclose(&actions, out_pipe[0]);
  std::vector<std::string> args = {STRATAGEM_BINARY, "run", "validate-cpu-ddp",
                                   "--num_processes", "2", "--steps", "100000",
                                   "--liveness_timeout", "4", "--log_every", "1",
                                   "--main_process_port", "0"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t launcher = -1;
  const auto start = Clock::now();
  ASSERT_EQ(::posix_spawn(&launcher, argv[0], &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out_pipe[1]);
  FILE* p = ::fdopen(out_pipe[0], "r");
  std::string out;
  char buf[4096];
  std::vector<pid_t> workers;
  bool sent = false;
  while (std::fgets(buf, sizeof buf, p)) {
    out += buf;
    if (sent || out.find("【train】") == std::string::npos) continue;
    workers = children_of(launcher);
    for (pid_t pid : workers) {
      std::ifstream env("/proc/" + std::to_string(pid) + "/environ");
      const std::string e((std::istreambuf_iterator<char>(env)), {});
      if (e.find("LOCAL_RANK=" + std::to_string(stopped) + '\0') != std::string::npos) {
        ::kill(pid, SIGSTOP);
        sent = true;
      }
    }
    if (!sent) break;
  }
  std::fclose(p);
  int status = 0;
  ::waitpid(launcher, &status, 0);
  const auto took = Clock::now() - start;
  ASSERT_TRUE(sent) << out;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 124) << out;
  EXPECT_NE(out.find("rank " + std::to_string(stopped) + " stopped responding"),
            std::string::npos)
      << out;
  EXPECT_LT(took, seconds(60)) << out;
  for (pid_t pid : workers) EXPECT_FALSE(alive(pid)) << "worker " << pid << " outlived the job";
}

TEST(Liveness, AStoppedStoreHostEndsARealRun) {
  stop_rank_during_a_run(0);
}

TEST(Liveness, AStoppedSecondRankEndsARealRun) {
  stop_rank_during_a_run(1);
}

}  // namespace
}  // namespace stratagem::test
