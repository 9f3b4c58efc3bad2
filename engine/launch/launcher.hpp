#pragma once
// Spawns this machine's worker processes with torchrun's environment and supervises them:
// every output line is prefixed with "[rank N] ", the first worker to fail ends the others
// (SIGTERM, then SIGKILL after a grace period) and is reported with its exit code or signal
// and last lines, SIGINT/SIGTERM to the launcher end all workers, and no worker outlives the
// launcher (own process group each, PR_SET_PDEATHSIG; a reaper process ends their groups,
// with whatever they started, should the launcher be killed: group_reaper.hpp). The argv is generic: `stratagem run`
// starts `stratagem worker ...`, tests start `sh -c ...`. No LibTorch here.
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace stratagem::launch {

struct LaunchOptions {
  int num_processes = 1;  ///< workers on this machine
  int num_machines = 1;
  int machine_rank = 0;
  std::string main_process_ip = "127.0.0.1";
  /// Rendezvous port; 0 picks a free one (single machine only). On machine 0 the launcher
  /// checks that the port can be bound before starting anyone.
  int main_process_port = 29500;
  /// Wall-clock limit for the whole job; 0 = none. When it passes, the workers are ended and
  /// the result says so.
  std::chrono::seconds timeout{0};
  /// Liveness bound (heartbeat.hpp): a worker silent this long, or no worker progressing this
  /// long, ends the job naming the rank and its op. 0 disables. Workers that never beat (a
  /// program without the Accelerator) are not watched.
  std::chrono::seconds liveness{60};
  /// Between SIGTERM and SIGKILL when workers are ended.
  std::chrono::milliseconds kill_grace{std::chrono::seconds(3)};
  /// Extra environment for every worker (added to the launcher's own, after torchrun's).
  std::vector<std::pair<std::string, std::string>> env;
  /// Lines of output kept per worker for the failure report.
  int tail_lines = 20;
  /// Receives every output line (without the newline). Default: "[rank N] line" to the
  /// launcher's stdout (or stderr for the worker's stderr), flushed per line.
  std::function<void(int rank, bool is_stderr, const std::string& line)> on_line;
};

struct WorkerExit {
  int rank = -1;
  int local_rank = -1;
  pid_t pid = -1;
  bool exited = false;    ///< exited normally with `code`
  bool signaled = false;  ///< ended by signal `code`
  int code = 0;
  bool ended_by_launcher = false;       ///< stopped because another worker failed / on interrupt
  std::vector<std::string> last_lines;  ///< stdout and stderr interleaved as read
};

struct LaunchResult {
  /// 0 when every worker exited with 0; otherwise the first failure's exit code, 128 + signal
  /// for a signal, 124 when `timeout` or the liveness bound passed, 130/143 when the launcher
  /// was interrupted.
  int exit_code = 0;
  std::optional<WorkerExit> first_failure;
  std::vector<WorkerExit> workers;  ///< by local rank
  bool timed_out = false;
  bool stalled = false;  ///< the liveness bound passed (exit code 124)
  int interrupted_by = 0;     ///< SIGINT or SIGTERM received by the launcher, else 0
  int main_process_port = 0;  ///< the port used (the chosen one when 0 was asked for)
  /// One paragraph for the user: who failed and how, with their last lines; empty on success.
  std::string message;
};

/// Runs the workers to completion. Throws SpecError for invalid options, RuntimeError when the
/// port is in use or a worker cannot be started (after ending those already started).
LaunchResult launch(const LaunchOptions& options, const std::vector<std::string>& argv);

/// "exit code 3", "signal 9 (SIGKILL)"
std::string describe_exit(const WorkerExit& w);

}  // namespace stratagem::launch
