#pragma once
// Times a scenario's model units on this device, the way the plan executor runs them: one
// forward and one backward of the embedding, of a transformer block and of the head at the
// scenario's micro-batch, sequence length and precision (gradients accumulated into the flat
// buffers as the executor does), and the optimizer's update per parameter. `stratagem
// calibrate --scenario S` stores the result in the profile (scenario::MeasuredUnits), and the
// simulator uses it for compute ops of scenarios with the same scenario::unit_shape_key.
#include <functional>

#include <c10/core/Device.h>

#include "engine/scenario/cluster.hpp"
#include "engine/scenario/scenario.hpp"

namespace stratagem::comm {
class Communicator;
}  // namespace stratagem::comm

namespace stratagem::measure {

/// One transformer block's forward and backward at the scenario's shape, as a callable that
/// returns when the work is done: the compute a training step runs, for measuring how much
/// communication slows while it runs.
std::function<void()> block_workload(const scenario::Scenario& scenario, const c10::Device& device);

/// Median over `repetitions` timed rounds after one warm-up round. Throws SpecError for models
/// the runtime cannot build (encoders, the quick form). With tensor parallelism (tp > 1) the
/// units are TP rank 0's shard, each timed over its whole chain (engine/measure/tp_chain_timing.hpp).
scenario::MeasuredUnits measure_units(const scenario::Scenario& scenario, const c10::Device& device,
                                      int repetitions);

/// measure_units on every rank of `comm` at once (as training runs them: every process busy),
/// averaged over the ranks; `jitter_cv` pools the ranks' own spreads, `rank_cv` is the spread
/// of their means. Every rank must call it; every rank gets the same result.
scenario::MeasuredUnits measure_units_on_all_ranks(const scenario::Scenario& scenario,
                                                   comm::Communicator& comm,
                                                   const c10::Device& device, int repetitions);

}  // namespace stratagem::measure
