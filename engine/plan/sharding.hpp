#pragma once
// Sharding pass (ZeRO/FSDP): what each rank holds for the whole step, and the parameter
// gathers of ZeRO-3 / FSDP.
//  * Resident bytes (RankInfo::initial) per the memory contract (docs/architecture.md): the
//    stage's parameters on one tensor-parallel rank (Ψ_stage/tp plus replicated norms),
//    gradients, optimizer states and master weights, each divided by the shard group when the
//    sharding shards it; the optimizer's moments and master copy on the host with offload.
//  * Gathers: every per-unit forward, and every per-unit backward when the forward resharded,
//    needs its unit's parameters all-gathered over the shard group (gather stream). Gather k
//    may start once the step that consumed gather k − 1 − prefetch has ended, and is anchored
//    right after that step, so a backend that issues a rank's collectives in op order really
//    prefetches; the first prefetch + 1 start the step (prologue). A gather allocates the
//    unit's full parameters at its start; the forward frees them at its end when resharding
//    after forward (ZeRO-3, FULL_SHARD, HYBRID_SHARD), else (SHARD_GRAD_OP) the same
//    micro-batch's backward does.
#include "engine/plan/draft.hpp"

namespace stratagem::plan {

void set_resident(BuildContext& ctx, int rank);
void add_parameter_gathers(BuildContext& ctx, RankDraft& draft);

}  // namespace stratagem::plan
