#pragma once
// Commands that are their own launcher (`commbench`, `calibrate`): run without launcher
// variables and they start N copies of this executable with torchrun's environment; each copy
// finds RANK etc. set and runs one rank. Under torchrun, Slurm or mpirun they run one rank
// directly.
#include <unistd.h>

#include <climits>
#include <iostream>
#include <string>
#include <vector>

#include "engine/launch/dist_env.hpp"
#include "engine/launch/launcher.hpp"
#include "engine/scenario/error.hpp"

namespace stratagem::cli {

inline std::string this_executable() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw RuntimeError("cannot find this executable (/proc/self/exe)");
  return std::string(buf, static_cast<std::size_t>(n));
}

/// True when a launcher (ours, torchrun, Slurm, mpirun) started this process as one rank.
inline bool started_as_rank() {
  return launch::read_dist_env().launcher != "none";
}

/// Runs `this_executable() args...` as `l.num_processes` ranks; rank 0's stdout goes through
/// unprefixed (it prints the tables), everything else as "[rank N] line". Returns the exit code.
inline int launch_self(launch::LaunchOptions l, const std::vector<std::string>& args) {
  if (l.num_processes < 1) throw SpecError("--num_processes", "must be >= 1");
  std::vector<std::string> argv = {this_executable()};
  argv.insert(argv.end(), args.begin(), args.end());
  l.on_line = [](int rank, bool is_stderr, const std::string& line) {
    std::ostream& os = is_stderr ? std::cerr : std::cout;
    if (rank == 0 && !is_stderr) {
      os << line << std::endl;
    } else {
      os << "[rank " << rank << "] " << line << std::endl;
    }
  };
  const launch::LaunchResult r = launch::launch(l, argv);
  if (r.exit_code != 0 && !r.message.empty()) std::cerr << "error: " << r.message << std::endl;
  return r.exit_code;
}

}  // namespace stratagem::cli
