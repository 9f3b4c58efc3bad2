#include "apps/host_profile.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <vector>

#include "engine/scenario/error.hpp"
#include "engine/scenario/host.hpp"

extern char** environ;

namespace stratagem::cli {
namespace {

/// stratagem-runtime next to this executable (either binary: they are built side by side).
std::string runtime_next_to_this() {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) throw RuntimeError("cannot find this executable (/proc/self/exe)");
  const std::string path(self, static_cast<std::size_t>(n));
  return path.substr(0, path.rfind('/') + 1) + "stratagem-runtime";
}

/// Runs `exe args...` with this process's stdout, stderr and environment; its exit code.
int run_and_wait(const std::string& exe, const std::vector<std::string>& args) {
  std::vector<std::string> full = {exe};
  full.insert(full.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : full) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int err = ::posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv.data(), environ);
  if (err != 0) throw RuntimeError("cannot run " + exe + ": " + std::strerror(err));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw RuntimeError("waiting for " + exe + ": " + std::strerror(errno));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/// An exclusive lock on `file` (created) for the object's life: measurements of one host run
/// one at a time, so two commands started together neither measure each other's load nor
/// both measure.
class FileLock {
 public:
  explicit FileLock(const std::filesystem::path& file) {
    std::error_code ec;
    std::filesystem::create_directories(file.parent_path(), ec);
    fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw RuntimeError("cannot open " + file.string() + ": " + std::strerror(errno));
    while (::flock(fd_, LOCK_EX) != 0) {
      if (errno != EINTR) {
        ::close(fd_);
        throw RuntimeError("cannot lock " + file.string() + ": " + std::strerror(errno));
      }
    }
  }
  ~FileLock() { ::close(fd_); }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace

std::string host_profile(int processes, bool recalibrate) {
  const std::filesystem::path path = scenario::host_profile_path(processes);
  if (!recalibrate && std::filesystem::exists(path)) return path.string();
  const FileLock lock(path.string() + ".lock");
  // Another command may have measured it while this one waited for the lock.
  if (!recalibrate && std::filesystem::exists(path)) return path.string();
  const std::string exe = runtime_next_to_this();
  if (::access(exe.c_str(), X_OK) != 0) {
    throw RuntimeError("--profile host: this host has no measured profile (" + path.string() +
                       ") and this build has no LibTorch runtime to measure it with; give "
                       "--profile FILE from `stratagem calibrate` on a build with LibTorch");
  }
  std::cerr << (recalibrate ? "measuring this host's CPU again (--recalibrate)"
                            : "measuring this host's CPU (first use; cached for later runs)")
            << std::endl;
  const int rc = run_and_wait(
      exe, {"calibrate", "--host", "--backend", "gloo", "--num_processes",
            std::to_string(processes)});
  if (rc != 0 || !std::filesystem::exists(path)) {
    throw RuntimeError("measuring this host's CPU failed (stratagem calibrate --host exited " +
                       std::to_string(rc) + ")");
  }
  return path.string();
}

std::string resolve_profile(const std::string& arg, int processes) {
  return arg == "host" ? host_profile(processes, false) : arg;
}

}  // namespace stratagem::cli
