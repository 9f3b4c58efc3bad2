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
StepPlan build_plan(const scenario::Scenario& scenario, const BuildOptions& options = {});

}  // namespace stratagem::plan
