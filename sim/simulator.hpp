#pragma once
// The discrete-event simulator: executes a StepPlan per the contract in plan.hpp with
// durations from cost models, and returns the same RunResult the real runtime writes.
//  * Ops on the compute, collective and gather streams run in order; p2p ops are posted when
//    their deps finish and transfer once send and recv are both posted.
//  * A collective starts when every built member has reached it; its cost comes from the
//    full group (folded replicas included), as phases of flows on the members' links.
//  * Memory effects apply at op start or end on top of each rank's resident bytes.
// Deterministic: the same plan and models give a byte-identical result. No wall clock.
#include <cstdint>

#include "engine/plan/plan.hpp"
#include "engine/result/result.hpp"
#include "sim/cost_models.hpp"

namespace stratagem::sim {

class Simulator {
 public:
  /// Throws RuntimeError when the plan breaks the contract (a dep cycle, a transfer without
  /// both ends, a collective instance that does not match its ops).
  result::RunResult run(const plan::StepPlan& plan, const CostModels& models);
};

}  // namespace stratagem::sim
