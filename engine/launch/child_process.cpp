#include "engine/launch/child_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <sstream>

#include "engine/scenario/error.hpp"

extern char** environ;

namespace stratagem::launch {
namespace {

std::vector<char*> c_strings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

std::string signal_name(int sig) {
  static const std::pair<int, const char*> kNames[] = {
      {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
      {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
      {SIGKILL, "SIGKILL"}, {SIGSEGV, "SIGSEGV"}, {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"},
      {SIGTERM, "SIGTERM"}, {SIGUSR1, "SIGUSR1"}, {SIGUSR2, "SIGUSR2"}, {SIGXCPU, "SIGXCPU"}};
  for (const auto& [n, name] : kNames) {
    if (n == sig) return name;
  }
  return "signal " + std::to_string(sig);
}

std::string resolve_executable(const std::string& name) {
  if (name.find('/') != std::string::npos) {
    if (::access(name.c_str(), X_OK) != 0) {
      throw RuntimeError("cannot execute '" + name + "': " + std::strerror(errno));
    }
    return name;
  }
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  throw RuntimeError("cannot find '" + name + "' in PATH");
}

std::vector<std::string> environment_with(
    const std::vector<std::pair<std::string, std::string>>& overrides) {
  std::map<std::string, std::string> vars;
  std::vector<std::string> order;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    const auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    if (vars.emplace(kv.substr(0, eq), kv.substr(eq + 1)).second) order.push_back(kv.substr(0, eq));
  }
  for (const auto& [k, v] : overrides) {
    if (vars.insert_or_assign(k, v).second) order.push_back(k);
  }
  std::vector<std::string> out;
  out.reserve(order.size());
  for (const auto& k : order) out.push_back(k + "=" + vars[k]);
  return out;
}

ChildProcess spawn_child(const std::string& path, const std::vector<std::string>& argv_in,
                         const std::vector<std::string>& env_in) {
  int out[2], err[2], beat[2], exec_err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0 ||
      ::pipe2(beat, O_CLOEXEC) != 0 || ::pipe2(exec_err, O_CLOEXEC) != 0) {
    throw RuntimeError(std::string("launcher: pipe: ") + std::strerror(errno));
  }
  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  std::vector<std::string> argv = argv_in;
  std::vector<std::string> env = env_in;
  auto c_argv = c_strings(argv);
  auto c_env = c_strings(env);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    for (int fd : {out[0], out[1], err[0], err[1], beat[0], beat[1], exec_err[0], exec_err[1]})
      ::close(fd);
    throw RuntimeError(std::string("launcher: fork: ") + std::strerror(e));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the launcher died before prctl took effect
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ::sigaction(SIGPIPE, &dfl, nullptr);  // ignored dispositions would survive exec
    ::sigaction(SIGINT, &dfl, nullptr);
    ::sigaction(SIGTERM, &dfl, nullptr);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    const int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    // dup2 onto another descriptor clears close-on-exec; onto itself it does not.
    if (beat[1] == kChildHeartbeatFd) {
      ::fcntl(beat[1], F_SETFD, 0);
    } else {
      ::dup2(beat[1], kChildHeartbeatFd);
    }
    ::execve(path.c_str(), c_argv.data(), c_env.data());
    const int e = errno;
    [[maybe_unused]] const auto n = ::write(exec_err[1], &e, sizeof(e));
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here, so the group exists before the launcher may signal it
  ::close(out[1]);
  ::close(err[1]);
  ::close(beat[1]);
  ::close(exec_err[1]);
  // The exec-error pipe closes on a successful exec (O_CLOEXEC) or carries errno.
  int exec_errno = 0;
  ssize_t n;
  do {
    n = ::read(exec_err[0], &exec_errno, sizeof(exec_errno));
  } while (n < 0 && errno == EINTR);
  ::close(exec_err[0]);
  if (n == static_cast<ssize_t>(sizeof(exec_errno))) {
    ::waitpid(pid, nullptr, 0);
    ::close(out[0]);
    ::close(err[0]);
    ::close(beat[0]);
    throw RuntimeError("cannot start '" + path + "': " + std::strerror(exec_errno));
  }
  ::fcntl(out[0], F_SETFL, O_NONBLOCK);
  ::fcntl(err[0], F_SETFL, O_NONBLOCK);
  ::fcntl(beat[0], F_SETFL, O_NONBLOCK);
  return {pid, out[0], err[0], beat[0]};
}

}  // namespace stratagem::launch
