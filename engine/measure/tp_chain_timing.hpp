#pragma once
// Times one tensor-parallel rank's units the way the executor runs them (tp > 1): each unit's
// chain of compute pieces and collectives (engine/workload/tp_chain.hpp) driven through
// TpUnitRun, the collectives stood in for by local tensors of the shapes the group would
// return (an all-reduce's input itself, a reduce-scatter's first block, an all-gather's input
// repeated tp times), so a unit's time is the compute of its whole chain — the norms and
// residual adds between its collectives included — and none of the communication, which the
// profile's network section costs. Used by measure_units (unit_timing.hpp).
#include <vector>

#include <ATen/Tensor.h>

#include "engine/runtime/executor_state.hpp"
#include "engine/runtime/model_units.hpp"
#include "engine/scenario/scenario.hpp"

namespace stratagem::measure {

/// Seconds per repetition (after one warm-up) of, in this order: the embedding's forward, the
/// block's, the head's, the head's backward, the block's, the embedding's, and the optimizer
/// step over the three units. `s` is the one-block scenario `units` and `state` were built
/// for (tp > 1), `input` / `targets` tokens [b, s].
std::vector<std::vector<double>> time_tp_chains(const scenario::Scenario& s,
                                                const runtime::GptUnits& units,
                                                runtime::ModelState& state, const at::Tensor& input,
                                                const at::Tensor& targets, int repetitions);

}  // namespace stratagem::measure
