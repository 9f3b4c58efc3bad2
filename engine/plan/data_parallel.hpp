#pragma once
// Data-parallel pass: gradient buckets and their sync over the data-parallel group of each
// (stage, tp index), and the tied-embedding sum across the pipeline.
//  * Buckets, in backward (reverse unit) order: one per unit when parameters are sharded
//    (ZeRO-3/FSDP reduce-scatter per unit); otherwise units fill a bucket up to bucket_mb like
//    PyTorch DDP (a bucket closes once it reaches the cap; a unit is never split).
//  * A sync round is every micro-batch for ZeRO-2/3 and FSDP, the last micro-batch for DDP and
//    ZeRO-1. A bucket launches after the backward step that finishes its last unit in the
//    round: an all-reduce (DDP), a reduce-scatter (ZeRO-1 once; ZeRO-2/3 and FSDP every
//    micro-batch, freeing the staged unsharded gradients, which the backward stages at its
//    end), then for HYBRID_SHARD an all-reduce of the shard across the node replicas.
//  * Tied embeddings with pp > 1: the first and last stage all-reduce their copies of the word
//    table's gradient after their last backward; under ZeRO-1 the bucket holding the table
//    waits for that sum (its reduce-scatter leaves each rank only a shard).
// Every collective it adds is one the optimizer step waits for (RankDraft::before_step).
// MoE models: each bucket's routed-expert gradients go over the expert-data-parallel group,
// the rest over the data-parallel group, as two collectives of the same kind.
#include "engine/plan/draft.hpp"

namespace stratagem::plan {

struct BucketPlan {
  std::vector<int> units;  ///< in backward order
  double params = 0;
  /// Of `params`, the routed experts' (MoE blocks): synced over the expert-data-parallel
  /// group, the rest over the data-parallel one (Megatron-Core's expert and dense gradient
  /// buffers); each collective is issued only where its group has more than one rank.
  double expert_params = 0;
};

std::vector<BucketPlan> make_buckets(const BuildContext& ctx, int stage, bool per_unit);

/// What of a bucket `rank` syncs (and, under ZeRO-1/2, gathers after the step), group by group:
/// all its parameters over the data-parallel (shard) group, or for a bucket with routed experts
/// the dense part over that group and the experts' over the expert-data-parallel group, each
/// only where its group has more than one rank.
struct BucketPart {
  double params = 0;
  bool experts = false;  ///< over the expert-data-parallel group
};
std::vector<BucketPart> bucket_parts(const BuildContext& ctx, int rank, const BucketPlan& bucket);

void add_gradient_sync(BuildContext& ctx, RankDraft& draft, const std::vector<BucketPlan>& buckets);

}  // namespace stratagem::plan
