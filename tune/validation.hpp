#pragma once
// Predictions against measured training runs (`stratagem validate --measured runs.jsonl`):
// one JSON object per line, {"id", "scenario": {a full scenario}, "measured":
// {"tokens_per_s_per_gpu" | "step_time_s", optional "peak_memory_GiB"}, optional "notes"},
// each simulated as written; the error statistics the issue tracker and the docs report:
// median and p90 of |error|, the signed median (bias), the share within 10 % and 20 %, and
// predicted-OOM-though-it-ran, overall and grouped by GPU and by strategy family.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/plan/plan.hpp"
#include "engine/scenario/scenario.hpp"
#include "sim/cost_models.hpp"

namespace stratagem::tune {

struct MeasuredRun {
  std::string id;
  scenario::Scenario scenario;
  double tokens_per_s_per_gpu = 0;  ///< 0 when the step time was given instead
  double step_time_s = 0;           ///< 0 when tokens/s per GPU was given instead
  std::optional<double> peak_memory_GiB;
  /// The table the run came from: its file's name without directory and extension
  /// ("llm-foundry"); leave-one-source-out cross-validation holds out one source at a time.
  std::string source;
};

/// Reads a .jsonl file; a malformed line is a SpecError "<file>:<line>: <path>: why".
std::vector<MeasuredRun> load_measured_runs(const std::string& file);

struct RunComparison {
  std::string id, gpu, family;
  std::string stack;                   ///< the run's training stack (scenario::to_string(Stack))
  double measured = 0, predicted = 0;  ///< tokens/s per GPU (or step time, as measured)
  bool measured_is_step_time = false;
  double predicted_peak_GiB = 0;
  std::optional<double> measured_peak_GiB;
  bool predicted_oom = false;  ///< the simulator says it does not fit (it ran: a false OOM)
  /// Signed relative error of the throughput: predicted / measured − 1 (for a step time the
  /// throughput's error, measured / predicted − 1), positive when too optimistic.
  double error() const;
};

struct ErrorSummary {
  int runs = 0;
  double median_abs = 0, p90_abs = 0, signed_median = 0;
  double within_10 = 0, within_20 = 0;  ///< shares of the runs
  int false_oom = 0;
};
ErrorSummary summarize(const std::vector<RunComparison>& rows);

/// "FULL_SHARD", "zero1 + pipeline", "tp × pp", …: the strategy's family for grouping.
std::string strategy_family(const scenario::StrategySpec& st);

/// Simulates one run as `s` (its scenario, or a variant with the same plan) describes it.
RunComparison predict_measured(const MeasuredRun& run, const scenario::Scenario& s,
                               const plan::StepPlan& plan, const sim::CostOptions& options = {});

/// Simulates each run (the given cost options) and compares; `progress(done, total)` per run.
std::vector<RunComparison> compare_with_measured(
    const std::vector<MeasuredRun>& runs, const sim::CostOptions& options = {},
    const std::function<void(int, int)>& progress = {});

}  // namespace stratagem::tune
