#include "engine/launch/group_reaper.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "engine/scenario/error.hpp"

namespace stratagem::launch {

namespace {

constexpr int kMaxGroups = 65536;  // workers one launcher starts (far more than any machine)
constexpr pid_t kDone = -1;

// The reaper's life, after fork: only async-signal-safe calls, no allocation.
[[noreturn]] void reap_when_orphaned(int fd) {
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGQUIT}) ::sigaction(sig, &ignore, nullptr);
  const int null = ::open("/dev/null", O_RDWR);
  if (null >= 0) {
    for (int k = 0; k < 3; ++k) ::dup2(null, k);
  }
  for (int other = 3; other < 1024; ++other) {
    if (other != fd) ::close(other);
  }
  static pid_t groups[kMaxGroups];
  int count = 0;
  pid_t value = 0;
  std::size_t have = 0;
  for (;;) {
    const ssize_t got =
        ::read(fd, reinterpret_cast<char*>(&value) + have, sizeof(value) - have);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;  // the launcher is gone without saying it was done
    have += static_cast<std::size_t>(got);
    if (have < sizeof(value)) continue;
    have = 0;
    if (value == kDone) ::_exit(0);
    if (count < kMaxGroups) groups[count++] = value;
  }
  for (int k = 0; k < count; ++k) ::kill(-groups[k], SIGKILL);
  ::_exit(0);
}

}  // namespace

GroupReaper::GroupReaper() {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) {
    throw RuntimeError(std::string("launcher: pipe: ") + std::strerror(errno));
  }
  pid_ = ::fork();
  if (pid_ < 0) {
    const int e = errno;
    ::close(p[0]);
    ::close(p[1]);
    throw RuntimeError(std::string("launcher: fork: ") + std::strerror(e));
  }
  if (pid_ == 0) {
    ::close(p[1]);
    reap_when_orphaned(p[0]);
  }
  ::close(p[0]);
  fd_ = p[1];
}

GroupReaper::~GroupReaper() {
  const pid_t done = kDone;
  if (fd_ >= 0) {
    [[maybe_unused]] const ssize_t w = ::write(fd_, &done, sizeof(done));
    ::close(fd_);
  }
  if (pid_ > 0) {
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
}

void GroupReaper::watch(pid_t pgid) {
  if (fd_ < 0) return;
  // A pipe write of this size is atomic; the reaper reads every one before the pipe closes.
  while (::write(fd_, &pgid, sizeof(pgid)) < 0 && errno == EINTR) {
  }
}

}  // namespace stratagem::launch
