#pragma once
// Running scenarios for real from a command (validate, compare --real): each run is a job of
// N local `stratagem worker` processes, as `stratagem run` starts them, whose RunResult is
// read back. Workers' output is kept quiet unless the job fails, when its report is thrown.
#include <string>

#include "engine/result/result.hpp"
#include "engine/scenario/scenario.hpp"

namespace stratagem::cli {

struct RealRunOptions {
  int num_processes = 2;
  int steps = 6;           ///< step time is the median of the steps after the first
  bool cpu = false;        ///< CPU and Gloo even when a GPU is present
  double timeout_s = 300;  ///< no progress for this long ends the job
  std::string work_dir;    ///< scenario and result files go here
  bool measure_units =
      false;  ///< the workers time the model's units first (--measure::measure_units)
};

/// Writes `scenario` to work_dir/<label>.scenario.json, trains it for real and returns the
/// RunResult (also left in work_dir/<label>.real.json). Throws RuntimeError naming the label
/// and the failing rank when the job fails.
result::RunResult run_for_real(const scenario::Scenario& scenario, const std::string& label,
                               const RealRunOptions& options);

/// A fresh directory for a command's runs: <temp>/stratagem-<what>-<pid>.
std::string default_work_dir(const std::string& what);

/// A scenario reshaped to `processes` local processes: one node of that many devices, and the
/// strategy's dp set to processes / pp (pp kept when it divides, else 1). Unchanged if it
/// already has that world size.
scenario::Scenario on_local_processes(const scenario::Scenario& scenario, int processes);

}  // namespace stratagem::cli
