#pragma once
// Starting one supervised child process for the launcher: its own process group (so the whole
// group can be signalled), PR_SET_PDEATHSIG (so it dies with the launcher), stdin from
// /dev/null, stdout and stderr on pipes, and exec failures reported back rather than lost.
// No LibTorch here.
#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace stratagem::launch {

struct ChildProcess {
  pid_t pid = -1;
  int out_fd = -1;  ///< read end of the child's stdout, non-blocking
  int err_fd = -1;  ///< read end of the child's stderr, non-blocking
  int beat_fd = -1;  ///< read end of its heartbeat pipe (kChildHeartbeatFd there), non-blocking
};

/// The descriptor a child writes heartbeats to (heartbeat.hpp); its environment says so.
inline constexpr int kChildHeartbeatFd = 3;

/// Forks and execs `path` with `argv` and `env` ("KEY=value"), its stdout, stderr and
/// heartbeat (descriptor kChildHeartbeatFd) piped back. Throws RuntimeError when the
/// program cannot be executed (the child is reaped first).
ChildProcess spawn_child(const std::string& path, const std::vector<std::string>& argv,
                         const std::vector<std::string>& env);

/// `name` itself when it contains a slash (checked executable), else its first match in PATH.
/// Throws RuntimeError naming it.
std::string resolve_executable(const std::string& name);

/// This process's environment with `overrides` replacing or adding variables.
std::vector<std::string> environment_with(
    const std::vector<std::pair<std::string, std::string>>& overrides);

/// "SIGKILL" for 9; "signal 42" when unnamed.
std::string signal_name(int sig);

}  // namespace stratagem::launch
