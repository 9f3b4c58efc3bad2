#pragma once
// The error a user can expect from the simulator for a GPU and training stack (issue #40 item
// 4): scenarios/presets/accuracy.json, written by bench/fit_defaults.py from the
// leave-one-source-out cross-validation over validation/*.jsonl (runs on a GPU with a fitted
// default predicted by the fit to the other tables, the others as shipped). `search` prints it
// beside its configurations, so two strategies closer than it are seen as a tie.
#include <optional>
#include <string>
#include <vector>

namespace stratagem::tune {

struct ExpectedError {
  std::string gpu, stack;
  int runs = 0;
  std::vector<std::string> tables;  ///< the validation tables the runs came from
  double median_abs = 0, p90_abs = 0, bias = 0;
};

/// The measured runs' error for this GPU preset name and stack (scenario::to_string(Stack));
/// nullopt when validation/ has no such runs.
std::optional<ExpectedError> expected_error(const std::string& gpu, const std::string& stack);

}  // namespace stratagem::tune
