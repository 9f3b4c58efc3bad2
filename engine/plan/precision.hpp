#pragma once
// Precision pass: fp16 dynamic loss scaling. After the gradients are final (the collectives
// the optimizer waits for and the last compute), one kernel unscales the local gradients and
// looks for inf/nan; the ranks agree on the result (a one-float max all-reduce over the
// world); the optimizer step waits for both and is skipped on overflow. bf16 and fp32 add
// nothing. The dtype of every tensor class is the scenario's (compute dtype for parameters,
// gradients and activations; fp32 master weights and optimizer states).
#include "engine/plan/draft.hpp"

namespace stratagem::plan {

void add_loss_scale_check(BuildContext& ctx, RankDraft& draft);

}  // namespace stratagem::plan
