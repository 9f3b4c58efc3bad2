#pragma once
// Schedule pass: a rank's compute steps in the order its stage's schedule runs them
// (schedule_order: GPipe, 1F1B, interleaved 1F1B, the zero-bubble ones), each with one compute op,
// its FLOPs and memory-bound bytes, and its activation memory effects:
//  * a forward step covers the chunk, or one unit when units are gathered one at a time
//    (workload::Granularity::per_unit_forward); it allocates its units' saved activations at its
//    end;
//  * a backward step covers the chunk, or one unit (in reverse) when units are gathered,
//    recomputed or their gradients synced in several buckets; it frees the activations at
//    its end (with recomputation, also what the recompute step rebuilt);
//  * with recomputation a recompute step precedes each unit's backward and allocates, at its
//    start, the bytes that recomputation dropped.
//  * zero-bubble schedules split each backward into a B step (Phase::backward_input, cut as a
//    backward, after its recompute steps; it frees nothing) and a later W step
//    (Phase::backward_weight: the weight-gradient GEMMs; per unit only where gradients are
//    synced unit by unit) that frees what the backward would have.
// Each step depends on the previous step's end, except the first per-unit forward of an item,
// which waits only for its inputs (the p2p recv, the gather) and follows on its stream.
// Later passes add the communication: they anchor ops before/after steps and add deps and
// memory effects to them (draft.hpp).
#include "engine/plan/draft.hpp"
#include "engine/workload/granularity.hpp"

namespace stratagem::plan {

void build_steps(const BuildContext& ctx, RankDraft& draft,
                 const workload::Granularity& granularity);

/// The compute op of phase `phase` over units [u0, u1) of one (chunk, micro-batch): GEMM
/// FLOPs, memory-bound bytes (the forward writes about the tensors the units save for
/// backward, the backward reads them and writes their gradients: twice that), launches.
Compute compute_op(const BuildContext& ctx, Phase phase, int stage, int chunk, int mb, int u0,
                   int u1);

}  // namespace stratagem::plan
