#pragma once
// A launcher killed with SIGKILL cannot end what its workers started: PR_SET_PDEATHSIG takes
// each worker down with it, but not the processes a worker started (a fork does not inherit
// the setting). GroupReaper forks, before any worker, a small process that is told each
// worker's process group over a pipe and, when the pipe closes without the launcher having
// said it is done — the launcher died, however — kills those groups with SIGKILL. It ignores
// SIGINT, SIGTERM and SIGHUP (the launcher handles those itself and ends its workers).
// No LibTorch here.
#include <sys/types.h>

namespace stratagem::launch {

class GroupReaper {
 public:
  /// Forks the reaper. Throws RuntimeError when it cannot.
  GroupReaper();
  /// Says the launcher is done (its workers are gone) and reaps the reaper.
  ~GroupReaper();
  GroupReaper(const GroupReaper&) = delete;
  GroupReaper& operator=(const GroupReaper&) = delete;

  /// The reaper kills process group `pgid` should the launcher die.
  void watch(pid_t pgid);

 private:
  pid_t pid_ = -1;
  int fd_ = -1;  ///< write end, close-on-exec (workers must not hold it open)
};

}  // namespace stratagem::launch
