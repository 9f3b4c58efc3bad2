#pragma once
// The attention core as a fused kernel keeps it (`strategy.attention: flash`): forward returns
// softmax(mask(Q·Kᵀ·scale))·V and saves only Q, K, V, the output and the log-sum-exp of each
// score row (fp32); backward recomputes the probabilities from them and applies
// FlashAttention-2's gradient (Dao 2023, algorithm 2, in one block):
//   P = exp(S − lse),  dV = Pᵀ·dO,  dP = dO·Vᵀ,  D = rowsum(dO ∘ O),  dS = P ∘ (dP − D),
//   dQ = dS·K·scale,   dK = dSᵀ·Q·scale.
// No s×s tensor outlives the call, so a real run's activation memory is the flash formula's
// (engine/scenario/model.hpp). The s×s scores still exist transiently inside forward and
// backward (the CPU has no tiled kernel); a GPU build could route this to
// scaled_dot_product_attention.
#include <ATen/Tensor.h>

namespace stratagem::runtime {

/// `masked`: bool [s, s], true where a query may not see a key (the causal mask).
at::Tensor fused_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           const at::Tensor& masked, double scale);

}  // namespace stratagem::runtime
