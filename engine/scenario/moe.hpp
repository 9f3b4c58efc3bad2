#pragma once
// Mixture-of-experts blocks (`model.moe`): which blocks route their tokens to experts, how many
// experts, how many each token reaches, and the parameters and FLOPs that follow. The names
// follow the model cards' configs (HF DeepSeek-V3 `n_routed_experts`, `num_experts_per_tok`,
// `moe_intermediate_size`, `n_shared_experts`, `first_k_dense_replace`, `moe_layer_freq`;
// Mixtral `num_local_experts`; Qwen3-MoE `num_experts`) and Megatron-Core's MoE options
// (`--num-experts`, `--moe-router-topk`, `--moe-ffn-hidden-size`, `--moe-shared-expert-
// intermediate-size`, `--moe-layer-freq`, `--moe-expert-capacity-factor`,
// `--moe-router-enable-expert-bias`).
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace stratagem::scenario {

/// How the router picks a token's experts. topk_softmax: softmax over the gate's logits, the
/// top k (Mixtral, Qwen3-MoE, GPT-OSS); sigmoid_bias: sigmoid affinities, the top k after adding
/// a per-expert bias that balances the load without an auxiliary loss (DeepSeek-V3 §2.1.2),
/// one more parameter per expert.
enum class RouterKind { topk_softmax, sigmoid_bias };

struct MoeSpec {
  std::int64_t experts = 0;            ///< routed experts per MoE block
  std::int64_t top_k = 0;              ///< routed experts each token reaches
  std::int64_t expert_ffn_hidden = 0;  ///< one routed expert's MLP width
  std::int64_t shared_experts = 0;     ///< experts every token reaches (DeepSeek: 1)
  /// One shared expert's MLP width (default expert_ffn_hidden).
  std::int64_t shared_expert_ffn_hidden = 0;
  /// Leading blocks that stay dense (DeepSeek-V3: 3, `first_k_dense_replace`).
  std::int64_t dense_layers = 0;
  /// After the leading dense blocks, every layer_freq-th block is an MoE block, the others dense:
  /// block i is MoE when i >= dense_layers and (i − dense_layers + 1) is a multiple of
  /// layer_freq (1: all of them; 2: every other, the second of each pair, as Llama 4
  /// Maverick's `interleave_moe_layer_step`).
  std::int64_t layer_freq = 1;
  RouterKind router = RouterKind::topk_softmax;
  /// Tokens an expert takes at most, as a multiple of its balanced share; 0: dropless (no
  /// capacity, every routed token is computed), Megatron-Core's default.
  double capacity_factor = 0;
};

const char* to_string(RouterKind r);

/// Parses `model.moe`; `path` prefixes errors. `layers` bounds dense_layers.
MoeSpec parse_moe(const nlohmann::json& object, const std::string& path, std::int64_t layers);
nlohmann::json to_json(const MoeSpec& moe);

/// Whether block `i` (0-based) of a model with this MoE spec routes to experts.
bool is_moe_block(const MoeSpec& moe, std::int64_t i);
/// MoE blocks among `layers`.
std::int64_t moe_block_count(const MoeSpec& moe, std::int64_t layers);

}  // namespace stratagem::scenario
