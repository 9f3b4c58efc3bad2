#pragma once
// Builds the StepPlan of a scenario: layout → schedule → data-parallel sync → parameter
// gathering → precision → accumulation → optimizer. See plan.hpp for the contract.
#include "engine/plan/plan.hpp"

namespace stratagem::plan {

struct BuildOptions {
  /// Build only data-parallel index 0 of each stage; the other replicas are identical in
  /// ops and timing (their collectives still span the full groups). Exact for every
  /// strategy this builder emits, since replicas of one stage run the same ops.
  bool fold = true;
};

/// The most ops a plan may hold (about 4 GiB with the simulator's per-op state).
inline constexpr double kMaxPlanOps = 20e6;

/// Throws SpecError (path "strategy.…") for combinations the builders cannot express, and for
/// plans estimated beyond kMaxPlanOps ops.
StepPlan build_plan(const spec::Scenario& scenario, const BuildOptions& options = {});

/// The per-stage order of (forward/backward, chunk, micro-batch) work for a schedule, as
/// Megatron-LM runs it. Exposed for the memory model and tests.
struct ScheduleItem {
  bool forward = true;
  int chunk = 0;
  int microbatch = 0;
};
std::vector<ScheduleItem> schedule_order(spec::Schedule schedule, int pp, int stage, int chunks,
                                         int microbatches);

/// The model's units with parameters, FLOPs and activation bytes per micro-batch.
std::vector<Unit> make_units(const spec::Scenario& scenario);
/// Splits units 0..L+1 over pp·chunks virtual stages (embedding with the first, head with
/// the last; blocks as even as possible, earlier stages take the remainder).
std::vector<std::vector<std::pair<int, int>>> split_stages(int layers, int pp, int chunks);

}  // namespace stratagem::plan
