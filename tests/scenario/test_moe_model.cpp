// Mixture-of-experts and latent-attention models (model.moe, model.mla): parameters and FLOPs
// counted by hand from each model's config, held to the figures its card publishes; the keys'
// errors; and the planner's refusal by name while `info` describes them.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/scenario/error.hpp"
#include "engine/scenario/model.hpp"
#include "engine/scenario/presets.hpp"
#include "engine/scenario/scenario.hpp"

namespace stratagem::scenario {
namespace {

using nlohmann::json;

ModelSpec preset_model(const std::string& name) {
  return parse_model(resolve_preset(PresetKind::model, name, "model"), "model");
}

// A card's figure, "46.7B", as the card rounds it.
double rounded(double x, double unit) {
  return std::round(x / unit) * unit;
}

TEST(MoeModel, MixtralCountsByHandMatchItsCard) {
  const ModelSpec m = preset_model("mixtral-8x7b");
  const double h = 4096, f = 14336, kv = 1024, V = 32000;
  const double attention = 2 * h * h + 2 * h * kv;
  const double expert = 3 * h * f;
  const double router = 8 * h, norms = 2 * h;
  const BlockParamsBreakdown b = block_params_breakdown(m, BlockKind::moe);
  EXPECT_EQ(b.attention, attention);
  EXPECT_EQ(b.mlp, 8 * expert);
  EXPECT_EQ(b.mlp_active, 2 * expert);
  EXPECT_EQ(b.router, router);
  EXPECT_EQ(b.norms, norms);
  EXPECT_EQ(block_count(m, BlockKind::moe), 32);
  EXPECT_EQ(block_count(m, BlockKind::dense), 0);
  const double total = 32 * (attention + 8 * expert + router + norms) + 2 * V * h + h;
  const double active = 32 * (attention + 2 * expert + router + norms) + 2 * V * h + h;
  EXPECT_EQ(total_params(m), total);
  EXPECT_EQ(total, 46'702'792'704.0);
  EXPECT_EQ(active_params(m), active);
  EXPECT_EQ(active, 12'879'925'248.0);
  // Mistral AI: "46.7B total parameters but only uses 12.9B parameters per token".
  EXPECT_EQ(rounded(total, 1e8), 46.7e9);
  EXPECT_EQ(rounded(active, 1e8), 12.9e9);
  // Training FLOPs: 6 × (active matrices + LM head) + 12·l·h·s.
  const double s = 4096;
  const double matmul = 32 * (attention + 2 * expert + router) + V * h;
  EXPECT_EQ(matmul_params(m), matmul);
  EXPECT_DOUBLE_EQ(training_flops_per_token(m, 4096), 6 * matmul + 12 * 32 * h * s);
}

TEST(MoeModel, Mixtral8x22bMatchesItsCard) {
  const ModelSpec m = preset_model("mixtral-8x22b");
  EXPECT_EQ(rounded(total_params(m), 1e9), 141e9);  // 140.62B
  EXPECT_EQ(rounded(active_params(m), 1e9), 39e9);  // 39.15B
}

TEST(MoeModel, Qwen3HeadDimAndQkNormCountedByHand) {
  const ModelSpec m = preset_model("qwen3-30b-a3b");
  const double h = 2048, d = 128, a = 32, kvh = 4, fe = 768, V = 151936;
  EXPECT_EQ(attention_head_dim(m), 128);
  EXPECT_EQ(kv_dim(m), kvh * d);
  const double attention = 2 * h * a * d + 2 * h * kvh * d;  // q, o: h·a·d; k, v: h·kv·d
  const double norms = 2 * h + 2 * d;                        // + q_norm, k_norm
  const double expert = 3 * h * fe, router = 128 * h;
  const BlockParamsBreakdown b = block_params_breakdown(m, BlockKind::moe);
  EXPECT_EQ(b.attention, attention);
  EXPECT_EQ(b.norms, norms);
  const double total = 48 * (attention + norms + 128 * expert + router) + 2 * V * h + h;
  const double active = 48 * (attention + norms + 8 * expert + router) + 2 * V * h + h;
  EXPECT_EQ(total_params(m), total);
  EXPECT_EQ(active_params(m), active);
  // Model card: 30.5B total, 3.3B activated (embeddings included: 3.353B, the card truncates).
  EXPECT_EQ(rounded(total, 1e8), 30.5e9);
  EXPECT_EQ(std::floor(active / 1e8) * 1e8, 3.3e9);
  // Attention core per token with a·d = 4096 ≠ h: 2·s·a·(d + d).
  EXPECT_EQ(attention_core_flops_per_token(m, 4096), 2.0 * 4096 * a * (d + d));
  const ModelSpec big = preset_model("qwen3-235b-a22b");
  EXPECT_EQ(rounded(total_params(big), 1e9), 235e9);
  EXPECT_EQ(rounded(active_params(big), 1e9), 22e9);
}

TEST(MoeModel, DeepSeekV3LatentAttentionDenseLeadAndMtpByHand) {
  const ModelSpec m = preset_model("deepseek-v3");
  const double h = 7168, a = 128, rq = 1536, rkv = 512, nope = 128, rope = 64, dv = 128;
  // MLA: q_a_proj, q_a_layernorm, q_b_proj, kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj.
  const double mla = h * rq + rq + rq * a * (nope + rope) + h * (rkv + rope) + rkv +
                     rkv * a * (nope + dv) + a * dv * h;
  EXPECT_EQ(mla, 187'107'328.0);
  const double expert = 3 * h * 2048, dense_mlp = 3 * h * 18432, norms = 2 * h;
  const double router = 256 * h + 256;  // gate + the balancing bias (e_score_correction_bias)
  EXPECT_EQ(block_count(m, BlockKind::dense), 3);
  EXPECT_EQ(block_count(m, BlockKind::moe), 58);
  const BlockParamsBreakdown moe = block_params_breakdown(m, BlockKind::moe);
  EXPECT_EQ(moe.attention, mla);
  EXPECT_EQ(moe.mlp, 256 * expert + expert);  // routed + one shared
  EXPECT_EQ(moe.mlp_active, 8 * expert + expert);
  EXPECT_EQ(moe.router, router);
  const double V = 129280;
  const double total =
      3 * (mla + dense_mlp + norms) + 58 * (mla + 257 * expert + router + norms) + 2 * V * h + h;
  const double active =
      3 * (mla + dense_mlp + norms) + 58 * (mla + 9 * expert + router + norms) + 2 * V * h + h;
  EXPECT_EQ(total_params(m), total);
  EXPECT_EQ(active_params(m), active);
  // Report and card: 671B total; 37B activated (DeepSeek counts without the input embedding).
  EXPECT_EQ(rounded(total, 1e9), 671e9);
  EXPECT_EQ(rounded(active - V * h, 1e9), 37e9);
  // The MTP module: enorm, hnorm, its final norm, eh_proj (2h -> h) and one MoE block.
  const double mtp = 3 * h + 2 * h * h + mla + 257 * expert + router + norms;
  EXPECT_EQ(mtp_params(m), mtp);
  // The card says "685B = 671B of the main model + 14B of MTP weights" as stored; the module's
  // own 11.61B plus its stored copies of the embedding and head (1.85B) make 13.46B of those.
  EXPECT_EQ(rounded(mtp, 1e7), 11.61e9);
  // Training FLOPs: the blocks' active matrices, the attention core 2·s·a·(192 + 128) per block,
  // the head; and the MTP module's projection, block and the head again.
  const double s = 4096;
  const double core = 2 * s * a * (nope + rope + dv);
  EXPECT_EQ(attention_core_flops_per_token(m, 4096), core);
  const double mla_matmul = mla - rq - rkv;
  const double dense_fwd = 2 * (mla_matmul + dense_mlp) + core;
  const double moe_fwd = 2 * (mla_matmul + 256 * h + 9 * expert) + core;
  const double head_fwd = 2 * V * h;
  const double forward = 3 * dense_fwd + 58 * moe_fwd + head_fwd + (4 * h * h + moe_fwd + head_fwd);
  EXPECT_DOUBLE_EQ(training_flops_per_token(m, 4096), 3 * forward);
}

TEST(MoeModel, DeepSeekV2LiteHasNoQueryLatent) {
  const ModelSpec m = preset_model("deepseek-v2-lite");
  ASSERT_TRUE(m.mla.has_value());
  EXPECT_EQ(m.mla->q_lora_rank, 0);
  const double h = 2048, a = 16;
  EXPECT_EQ(block_params_breakdown(m).attention,
            h * a * 192 + h * (512 + 64) + 512 + 512 * a * 256 + a * 128 * h);
  // Card: 15.7B total, 2.4B activated (without the input embedding: 2.45B).
  EXPECT_EQ(rounded(total_params(m), 1e8), 15.7e9);
  EXPECT_NEAR(active_params(m) - embedding_params(m), 2.4e9, 0.03 * 2.4e9);
}

TEST(MoeModel, GptOssBiasesSinksAndSlidingWindowsByHand) {
  const ModelSpec m = preset_model("gpt-oss-120b");
  const double h = 2880, a = 64, d = 64, kvh = 8, f = 2880, V = 201088, E = 128;
  // q, k, v, o with biases, and one sink logit per head.
  const double attention = h * a * d + 2 * h * kvh * d + a * d * h + (a * d + 2 * kvh * d + h) + a;
  // An expert: gate and up fused (2f outputs) and down, each with its bias.
  const double expert = 3 * h * f + 2 * f + h;
  const double router = E * h + E, norms = 2 * h;
  const BlockParamsBreakdown b = block_params_breakdown(m, BlockKind::moe);
  EXPECT_EQ(b.attention, attention);
  EXPECT_EQ(b.mlp, E * expert);
  EXPECT_EQ(b.router, router);
  const double total = 36 * (attention + E * expert + router + norms) + 2 * V * h + h;
  const double active = 36 * (attention + 4 * expert + router + norms) + 2 * V * h + h;
  EXPECT_EQ(total_params(m), total);
  EXPECT_EQ(active_params(m), active);
  // OpenAI's card: 116.83B total, 5.13B active (the input embedding left out).
  EXPECT_EQ(rounded(total, 1e7), 116.83e9);
  EXPECT_EQ(rounded(active - V * h, 1e7), 5.13e9);
  const ModelSpec small = preset_model("gpt-oss-20b");
  EXPECT_EQ(rounded(total_params(small), 1e7), 20.91e9);
  EXPECT_EQ(rounded(active_params(small) - embedding_params(small), 1e7), 3.61e9);
  // Blocks 0, 2, 4, ... slide over 128 tokens, 1, 3, 5, ... attend to the whole sequence.
  EXPECT_TRUE(sliding_window_block(m, 0));
  EXPECT_FALSE(sliding_window_block(m, 1));
  const double s = 4096;
  const double full = 2 * s * a * (d + d), window = 2 * 128 * a * (d + d);
  EXPECT_EQ(blocks_attention_core_flops_per_token(m, 4096), 18 * full + 18 * window);
  const double matmul = 36 * (attention - (a * d + 2 * kvh * d + h) - a + E * h + 4 * 3 * h * f);
  EXPECT_DOUBLE_EQ(training_flops_per_token(m, 4096),
                   3 * (2 * matmul + 18 * full + 18 * window + 2 * V * h));
  // Shorter than the window: every block sees the whole sequence.
  EXPECT_EQ(blocks_attention_core_flops_per_token(m, 64), 36 * 2 * 64 * a * (d + d));
}

TEST(MoeModel, LayerFrequencyInterleavesDenseAndMoeBlocks) {
  MoeSpec moe;
  moe.dense_layers = 1;
  moe.layer_freq = 2;
  // Blocks 0 (dense lead), then pairs: 1 dense, 2 MoE, 3 dense, 4 MoE, ...
  EXPECT_FALSE(is_moe_block(moe, 0));
  EXPECT_FALSE(is_moe_block(moe, 1));
  EXPECT_TRUE(is_moe_block(moe, 2));
  EXPECT_FALSE(is_moe_block(moe, 3));
  EXPECT_TRUE(is_moe_block(moe, 4));
  EXPECT_EQ(moe_block_count(moe, 6), 2);
  EXPECT_EQ(moe_block_count(moe, 7), 3);
  int counted = 0;
  for (int i = 0; i < 7; ++i) counted += is_moe_block(moe, i);
  EXPECT_EQ(counted, 3);
}

std::string error_path(const json& model) {
  try {
    parse_model(model, "model");
  } catch (const SpecError& e) {
    return e.path();
  }
  return "";
}

TEST(MoeModel, BadKeysNameTheirField) {
  const json base = {{"layers", 4},   {"hidden", 256},   {"heads", 4},
                     {"vocab", 1000}, {"mlp", "swiglu"}, {"ffn_hidden", 512}};
  auto with = [&](const char* key, json value) {
    json m = base;
    m[key] = std::move(value);
    return m;
  };
  const json moe = {{"experts", 8}, {"top_k", 2}, {"expert_ffn_hidden", 128}, {"dense_layers", 1}};
  EXPECT_EQ(error_path(with("moe", moe)), "");
  json bad = moe;
  bad["top_k"] = 9;
  EXPECT_EQ(error_path(with("moe", bad)), "model.moe.top_k");
  bad = moe;
  bad["dense_layers"] = 4;
  EXPECT_EQ(error_path(with("moe", bad)), "model.moe.dense_layers");
  bad = moe;
  bad["capacity_factor"] = 0.5;
  EXPECT_EQ(error_path(with("moe", bad)), "model.moe.capacity_factor");
  bad = moe;
  bad["shared_expert_ffn_hidden"] = 64;
  EXPECT_EQ(error_path(with("moe", bad)), "model.moe.shared_expert_ffn_hidden");
  bad = moe;
  bad["routr"] = "sigmoid_bias";
  EXPECT_EQ(error_path(with("moe", bad)), "model.moe.routr");  // unknown key, closest suggested
  // Every block an MoE block: a dense MLP width is a contradiction.
  json all_moe = moe;
  all_moe.erase("dense_layers");
  EXPECT_EQ(error_path(with("moe", all_moe)), "model.ffn_hidden");
  const json mla = {
      {"kv_lora_rank", 64}, {"qk_nope_head_dim", 32}, {"qk_rope_head_dim", 16}, {"v_head_dim", 32}};
  EXPECT_EQ(error_path(with("mla", mla)), "");
  json gqa = with("mla", mla);
  gqa["kv_heads"] = 2;
  EXPECT_EQ(error_path(gqa), "model.kv_heads");
  json head_dim = with("mla", mla);
  head_dim["head_dim"] = 64;
  EXPECT_EQ(error_path(head_dim), "model.head_dim");
  json no_rank = mla;
  no_rank.erase("kv_lora_rank");
  EXPECT_EQ(error_path(with("mla", no_rank)), "model.mla.kv_lora_rank");
}

TEST(MoeModel, RoundTripsThroughJson) {
  for (const char* name :
       {"deepseek-v3", "qwen3-30b-a3b", "mixtral-8x7b", "deepseek-v2-lite", "gpt-oss-120b"}) {
    const ModelSpec m = preset_model(name);
    const ModelSpec again = parse_model(to_json(m), "model");
    EXPECT_EQ(total_params(again), total_params(m)) << name;
    EXPECT_EQ(active_params(again), active_params(m)) << name;
    EXPECT_EQ(mtp_params(again), mtp_params(m)) << name;
    EXPECT_EQ(training_flops_per_token(again, 2048), training_flops_per_token(m, 2048)) << name;
  }
}

TEST(MoeModel, PlanningRefusesByNameWhileInfoDescribes) {
  const json scenario = {{"model", "deepseek-v3"},
                         {"cluster", {{"preset", "dgx-h100"}, {"nodes", 32}}},
                         {"strategy", {{"dp", 32}, {"pp", 8}}},
                         {"training", {{"seq_len", 4096}}}};
  try {
    parse_scenario(scenario, "test");
    FAIL() << "latent attention was accepted for planning";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.path(), "model.mla");  // MoE is planned, DeepSeek's attention not yet
    EXPECT_NE(std::string(e.what()).find("info"), std::string::npos) << e.what();
  }
  json mixtral = scenario;
  mixtral["model"] = "mixtral-8x7b";
  mixtral["strategy"] = {{"dp", 256}, {"ep", 8}};
  EXPECT_NO_THROW(parse_scenario(mixtral, "test"));
  // A dense model with a feature the planner lacks: named by its own key.
  json qk = scenario;
  qk["model"] = {{"preset", "llama3-8b"}, {"sliding_window", {{"tokens", 128}}}};
  qk["cluster"] = "dgx-h100";
  qk["strategy"] = {{"dp", 8}};
  try {
    parse_scenario(qk, "test");
    FAIL() << "sliding_window was accepted for planning";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.path(), "model.sliding_window");
  }
  // Per-head q/k norms and a head width apart from h / heads are planned (Qwen3).
  json qwen = qk;
  qwen["model"] = {{"preset", "llama3-8b"}, {"qk_norm", true}, {"head_dim", 256}};
  EXPECT_NO_THROW(parse_scenario(qwen, "test"));
  // head_dim equal to hidden / heads changes nothing: planned as before.
  json same = qk;
  same["model"] = {{"preset", "llama3-8b"}, {"head_dim", 128}};
  EXPECT_NO_THROW(parse_scenario(same, "test"));
  EXPECT_EQ(total_params(parse_scenario(same, "test").model),
            total_params(preset_model("llama3-8b")));
}

}  // namespace
}  // namespace stratagem::scenario
