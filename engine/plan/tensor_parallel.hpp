#pragma once
// Tensor-, context- and expert-parallel pass (tp > 1, cp > 1, or an MoE model with ep · etp > 1;
// runs right after the schedule pass): splits each compute step into its chain
// (engine/workload/tp_chain.hpp: Megatron-LM's tensor and sequence parallelism, context
// parallelism's ring, an MoE block's token dispatch and combine) and puts the chain's
// collectives, on the `tp`, `cp` and `ep` streams, on the critical path. Memory effects of a step
// stay at its first (start) and last (end) op, deps on it at its first, so later passes see a step
// as before.
#include "engine/plan/draft.hpp"

namespace stratagem::plan {

void split_tensor_parallel(BuildContext& ctx, RankDraft& draft);
void add_sequence_parallel_norm_sync(BuildContext& ctx, RankDraft& draft);

}  // namespace stratagem::plan
