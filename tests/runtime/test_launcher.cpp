// The launcher with `sh -c` workers: torchrun's environment, prefixed output, the first failure
// ends the others and is reported, signals to the launcher end everyone, and no process is
// left behind in any of these cases.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "engine/launch/launcher.hpp"
#include "engine/scenario/error.hpp"

namespace stratagem::test {
namespace {

using launch::LaunchOptions;
using launch::LaunchResult;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct Line {
  int rank;
  bool is_stderr;
  std::string text;
};

launch::LaunchOptions capture(std::vector<Line>& lines, int n) {
  launch::LaunchOptions o;
  o.num_processes = n;
  o.main_process_port = 0;
  o.kill_grace = milliseconds(1000);
  o.on_line = [&lines](int rank, bool is_stderr, const std::string& text) {
    lines.push_back({rank, is_stderr, text});
  };
  return o;
}

std::vector<std::string> sh(const std::string& script) {
  return {"sh", "-c", script};
}

// A pid is gone once it has exited: no /proc entry, or a zombie waiting for its reaper.
bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return false;
  std::string text((std::istreambuf_iterator<char>(stat)), {});
  const auto close = text.rfind(')');
  if (close == std::string::npos || close + 2 >= text.size()) return false;
  const char state = text[close + 2];
  return state != 'Z' && state != 'X';
}

bool all_gone_within(const std::vector<pid_t>& pids, milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    bool any = false;
    for (pid_t p : pids) any = any || alive(p);
    if (!any) return true;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return false;
}

// Pids printed by workers as "<word> <pid>".
std::vector<pid_t> pids_after(const std::vector<Line>& lines, const std::string& word) {
  std::vector<pid_t> pids;
  for (const auto& l : lines) {
    if (l.text.rfind(word + " ", 0) == 0) pids.push_back(std::stoi(l.text.substr(word.size() + 1)));
  }
  return pids;
}

TEST(Launcher, GivesWorkersTorchrunsEnvironmentAndPrefixesTheirOutput) {
  std::vector<Line> lines;
  auto o = capture(lines, 2);
  o.env = {{"EXTRA", "hello"}};
  const auto r = launch::launch(
      o, sh("echo \"R=$RANK W=$WORLD_SIZE L=$LOCAL_RANK LW=$LOCAL_WORLD_SIZE G=$GROUP_RANK "
            "M=$MASTER_ADDR:$MASTER_PORT X=$EXTRA S=$STRATAGEM_LAUNCHER\"; echo err >&2; "
            "printf 'no newline'"));
  EXPECT_EQ(r.exit_code, 0) << r.message;
  EXPECT_TRUE(r.message.empty()) << r.message;
  EXPECT_FALSE(r.first_failure);
  ASSERT_NE(r.main_process_port, 0);
  std::map<int, std::vector<std::string>> out, err;
  for (const auto& l : lines) (l.is_stderr ? err : out)[l.rank].push_back(l.text);
  for (int rank : {0, 1}) {
    const std::string port = std::to_string(r.main_process_port);
    EXPECT_EQ(out[rank], (std::vector<std::string>{
                             "R=" + std::to_string(rank) + " W=2 L=" + std::to_string(rank) +
                                 " LW=2 G=0 M=127.0.0.1:" + port + " X=hello S=stratagem",
                             "no newline"}));
    EXPECT_EQ(err[rank], std::vector<std::string>{"err"});
  }
  ASSERT_EQ(r.workers.size(), 2u);
  for (const auto& w : r.workers) {
    EXPECT_TRUE(w.exited);
    EXPECT_EQ(w.code, 0);
    EXPECT_FALSE(alive(w.pid));
  }
}

TEST(Launcher, SecondMachineGetsItsRanks) {
  std::vector<Line> lines;
  auto o = capture(lines, 2);
  o.num_machines = 2;
  o.machine_rank = 1;
  o.main_process_port = 29999;  // not checked here: machine 0 hosts the store
  o.main_process_ip = "10.1.2.3";
  const auto r =
      launch::launch(o, sh("echo $RANK/$WORLD_SIZE $LOCAL_RANK $GROUP_RANK $MASTER_ADDR"));
  EXPECT_EQ(r.exit_code, 0) << r.message;
  std::vector<std::string> texts;
  for (const auto& l : lines) texts.push_back("[" + std::to_string(l.rank) + "] " + l.text);
  std::sort(texts.begin(), texts.end());
  EXPECT_EQ(texts, (std::vector<std::string>{"[2] 2/4 0 1 10.1.2.3", "[3] 3/4 1 1 10.1.2.3"}));
}

TEST(Launcher, AFailingWorkerEndsTheOthersAndIsReported) {
  std::vector<Line> lines;
  auto o = capture(lines, 3);
  const auto start = Clock::now();
  const auto r = launch::launch(
      o, sh("if [ \"$RANK\" = 1 ]; then echo boom; echo oops >&2; sleep 1; exit 3; fi; "
            "sleep 1000 & echo \"child $!\"; wait"));
  const auto elapsed = Clock::now() - start;
  EXPECT_LT(elapsed, std::chrono::seconds(10));
  EXPECT_EQ(r.exit_code, 3);
  ASSERT_TRUE(r.first_failure);
  EXPECT_EQ(r.first_failure->rank, 1);
  EXPECT_TRUE(r.first_failure->exited);
  EXPECT_EQ(r.first_failure->code, 3);
  EXPECT_EQ(r.first_failure->last_lines, (std::vector<std::string>{"boom", "oops"}));
  EXPECT_NE(r.message.find("worker rank 1 (pid " + std::to_string(r.first_failure->pid) +
                           ") failed: exit code 3\nlast output of rank 1:\n  boom\n  oops"),
            std::string::npos)
      << r.message;
  EXPECT_NE(r.message.find("ended the other workers (ranks 0, 2)"), std::string::npos) << r.message;
  std::vector<pid_t> pids = pids_after(lines, "child");
  EXPECT_EQ(pids.size(), 2u) << "grandchildren seen";
  for (const auto& w : r.workers) {
    pids.push_back(w.pid);
    if (w.rank != 1) {
      EXPECT_TRUE(w.ended_by_launcher);
      EXPECT_TRUE(w.signaled);
      EXPECT_EQ(w.code, SIGTERM);
    }
  }
  EXPECT_TRUE(all_gone_within(pids, milliseconds(2000))) << "a worker or its child survived";
}

TEST(Launcher, AWorkerKilledBySigkillIsReportedBySignalName) {
  std::vector<Line> lines;
  auto o = capture(lines, 2);
  const auto start = Clock::now();
  const auto r = launch::launch(
      o, sh("if [ \"$RANK\" = 0 ]; then echo bye; sleep 0.3; kill -9 $$; fi; exec sleep 1000"));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
  ASSERT_TRUE(r.first_failure);
  EXPECT_EQ(r.first_failure->rank, 0);
  EXPECT_TRUE(r.first_failure->signaled);
  EXPECT_EQ(r.first_failure->code, SIGKILL);
  EXPECT_EQ(r.exit_code, 128 + SIGKILL);
  EXPECT_NE(r.message.find("failed: signal 9 (SIGKILL)\nlast output of rank 0:\n  bye"),
            std::string::npos)
      << r.message;
  for (const auto& w : r.workers) EXPECT_FALSE(alive(w.pid));
}

TEST(Launcher, AWorkerIgnoringSigtermIsKilledAfterTheGracePeriod) {
  std::vector<Line> lines;
  auto o = capture(lines, 2);
  o.kill_grace = milliseconds(500);
  const auto start = Clock::now();
  const auto r = launch::launch(
      o, sh("if [ \"$RANK\" = 0 ]; then sleep 0.3; exit 5; fi; trap '' TERM; sleep 1000"));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(r.exit_code, 5);
  ASSERT_EQ(r.workers.size(), 2u);
  EXPECT_TRUE(r.workers[1].signaled);
  EXPECT_EQ(r.workers[1].code, SIGKILL);
  EXPECT_TRUE(r.workers[1].ended_by_launcher);
}

TEST(Launcher, JobTimeoutEndsEveryone) {
  std::vector<Line> lines;
  auto o = capture(lines, 2);
  o.timeout = std::chrono::seconds(1);
  o.kill_grace = milliseconds(300);
  const auto r = launch::launch(o, {"sleep", "1000"});
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.exit_code, 124);
  EXPECT_EQ(r.message, "the job did not finish within 1 s\nended the workers (ranks 0, 1)");
  for (const auto& w : r.workers) EXPECT_FALSE(alive(w.pid));
}

TEST(Launcher, APortInUseStopsTheLaunchBeforeAnyWorker) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  std::vector<Line> lines;
  auto o = capture(lines, 2);
  o.main_process_port = port;
  try {
    launch::launch(o, sh("echo started"));
    ADD_FAILURE() << "launched on a port in use";
  } catch (const RuntimeError& e) {
    EXPECT_EQ(std::string(e.what()),
              "port " + std::to_string(port) +
                  " is already in use on this machine (another job?); choose another with "
                  "--main_process_port, or 0 for a free one");
  }
  EXPECT_TRUE(lines.empty());
  ::close(fd);
}

TEST(Launcher, RejectsBadOptionsAndMissingPrograms) {
  std::vector<Line> lines;
  auto o = capture(lines, 0);
  EXPECT_THROW(launch::launch(o, {"true"}), SpecError);
  o = capture(lines, 1);
  o.num_machines = 2;
  o.machine_rank = 2;
  EXPECT_THROW(launch::launch(o, {"true"}), SpecError);
  o = capture(lines, 1);
  EXPECT_THROW(launch::launch(o, {}), SpecError);
  try {
    launch::launch(o, {"no-such-program-for-stratagem"});
    ADD_FAILURE() << "launched a program that does not exist";
  } catch (const RuntimeError& e) {
    EXPECT_EQ(std::string(e.what()), "cannot find 'no-such-program-for-stratagem' in PATH");
  }
}

// Runs launch() in a forked child whose stdout is a pipe; returns the child's pid and the read
// end. The workers print "pid <their pid>".
std::pair<pid_t, int> launch_in_child(int n,
                                      const std::string& script = "echo \"pid $$\"; exec sleep 1000") {
  int p[2];
  if (::pipe(p) != 0) return {-1, -1};
  const pid_t child = ::fork();
  if (child == 0) {
    ::dup2(p[1], 1);
    ::close(p[0]);
    launch::LaunchOptions o;
    o.num_processes = n;
    o.main_process_port = 0;
    o.kill_grace = milliseconds(1000);
    int code = 99;
    try {
      code = launch::launch(o, sh(script)).exit_code;
    } catch (...) {
    }
    std::fflush(stdout);
    ::_exit(code);
  }
  ::close(p[1]);
  return {child, p[0]};
}

// Reads "[rank N] pid P" lines (the launcher's default prefix) until n pids arrived.
std::vector<pid_t> read_worker_pids(int fd, int n) {
  std::vector<pid_t> pids;
  std::string buf;
  char chunk[256];
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (static_cast<int>(pids.size()) < n && Clock::now() < deadline) {
    const ssize_t got = ::read(fd, chunk, sizeof(chunk));
    if (got <= 0) break;
    buf.append(chunk, static_cast<std::size_t>(got));
    for (std::size_t nl; (nl = buf.find('\n')) != std::string::npos; buf.erase(0, nl + 1)) {
      const std::string line = buf.substr(0, nl);
      const auto at = line.find("] pid ");
      EXPECT_EQ(line.rfind("[rank ", 0), 0u) << line;
      if (at != std::string::npos) pids.push_back(std::stoi(line.substr(at + 6)));
    }
  }
  return pids;
}

int wait_exit(pid_t child, milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  int status = 0;
  while (Clock::now() < deadline) {
    if (::waitpid(child, &status, WNOHANG) == child) return status;
    std::this_thread::sleep_for(milliseconds(20));
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, &status, 0);
  return -1;
}

TEST(Launcher, SigtermToTheLauncherEndsAllWorkers) {
  auto [child, fd] = launch_in_child(3);
  ASSERT_GT(child, 0);
  const auto pids = read_worker_pids(fd, 3);
  ASSERT_EQ(pids.size(), 3u);
  ::kill(child, SIGTERM);
  const int status = wait_exit(child, milliseconds(8000));
  ::close(fd);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);
  EXPECT_TRUE(all_gone_within(pids, milliseconds(2000)));
}

TEST(Launcher, WorkersDieWithAKilledLauncher) {
  auto [child, fd] = launch_in_child(2);
  ASSERT_GT(child, 0);
  const auto pids = read_worker_pids(fd, 2);
  ASSERT_EQ(pids.size(), 2u);
  ::kill(child, SIGKILL);  // no chance to clean up: PR_SET_PDEATHSIG does it
  wait_exit(child, milliseconds(5000));
  ::close(fd);
  EXPECT_TRUE(all_gone_within(pids, milliseconds(3000)));
}

TEST(Launcher, WhatWorkersStartedDiesWithAKilledLauncher) {
  // Each worker starts a grandchild in its process group and reports its pid; PR_SET_PDEATHSIG
  // ends the worker but not the grandchild, so the launcher's reaper ends the groups.
  auto [child, fd] = launch_in_child(2, "sleep 1000 & echo \"pid $!\"; exec sleep 1000");
  ASSERT_GT(child, 0);
  const auto grandchildren = read_worker_pids(fd, 2);
  ASSERT_EQ(grandchildren.size(), 2u);
  ::kill(child, SIGKILL);
  wait_exit(child, milliseconds(5000));
  ::close(fd);
  EXPECT_TRUE(all_gone_within(grandchildren, milliseconds(3000)));
}

}  // namespace
}  // namespace stratagem::test
