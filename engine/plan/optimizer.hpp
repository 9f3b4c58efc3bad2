#pragma once
// Optimizer pass (the last): the optimizer step of the rank's parameter shard, after
// everything in RankDraft::before_step, and for ZeRO-1/2 (optimizer sharded, parameters not)
// the all-gather of the updated parameters, bucket by bucket, over the shard group.
// Adam's update reads the gradient, the master weights and both moments, writes all three
// back and writes the compute copy (~10 FLOPs per parameter; SGD with momentum ~4); with
// `offload_optimizer: cpu` it runs on the host.
#include "engine/plan/data_parallel.hpp"

namespace stratagem::plan {

void add_optimizer_step(BuildContext& ctx, RankDraft& draft,
                        const std::vector<BucketPlan>& buckets);

}  // namespace stratagem::plan
