#pragma once
// DeepSeek's multi-head latent attention (`model.mla`; DeepSeek-V2 report §2.1, the
// DeepseekV3Attention module of HF deepseek-ai/DeepSeek-V3 modeling_deepseek.py): queries and
// keys/values pass through low-rank latents, and each head's query/key splits into a part
// without position (qk_nope_head_dim) and a rotary part (qk_rope_head_dim) whose key is shared
// by all heads. Key names as the HF configs: q_lora_rank, kv_lora_rank, qk_nope_head_dim,
// qk_rope_head_dim, v_head_dim.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace stratagem::scenario {

struct MlaSpec {
  std::int64_t q_lora_rank = 0;  ///< 0: queries projected directly (DeepSeek-V2-Lite)
  std::int64_t kv_lora_rank = 0;
  std::int64_t qk_nope_head_dim = 0;
  std::int64_t qk_rope_head_dim = 0;
  std::int64_t v_head_dim = 0;
};

/// Parses `model.mla`; `path` prefixes errors.
MlaSpec parse_mla(const nlohmann::json& object, const std::string& path);
nlohmann::json to_json(const MlaSpec& mla);

/// The weight matrices of one MLA layer with `heads` heads on a model of width `hidden`:
///   q:  h·r_q + r_q·a·(d_nope + d_rope)      (q_a_proj, q_b_proj; h·a·(d_nope + d_rope) without
///   r_q) kv: h·(r_kv + d_rope) + r_kv·a·(d_nope + d_v)   (kv_a_proj_with_mqa, kv_b_proj) o:
///   a·d_v·h
double mla_matmul_params(const MlaSpec& mla, std::int64_t hidden, std::int64_t heads);
/// The matrices plus the latents' RMSNorms (q_a_layernorm r_q, kv_a_layernorm r_kv).
double mla_params(const MlaSpec& mla, std::int64_t hidden, std::int64_t heads);

}  // namespace stratagem::scenario
