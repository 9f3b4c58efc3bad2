// Flash vs eager attention, context parallelism and fp8 in the scenario format and the
// activation formula (engine/scenario/model.hpp): exact bytes, and each contradiction refused
// with its JSON path.
#include <gtest/gtest.h>

#include <string>

#include "engine/scenario/error.hpp"
#include "engine/scenario/model.hpp"
#include "engine/scenario/scenario.hpp"

namespace stratagem::scenario {
namespace {

using nlohmann::json;

// h = 4096, a = 32 (GPT-3 6.7B's block), s = 2048, b = 1, 16-bit activations.
ModelSpec block_model() {
  return parse_model(json::parse(R"({"layers": 32, "hidden": 4096, "heads": 32,
                                     "ffn_hidden": 16384, "vocab": 50257,
                                     "max_positions": 2048})"),
                     "model");
}

double per_layer(Recompute r, ActivationLayout layout) {
  return activation_bytes_per_layer(block_model(), 2048, 1, r, 2.0, layout);
}

TEST(Activations, EagerKeepsTheScoresFlashOnlyALogSumExpPerRow) {
  // Korthikanti: s·b·h·34 + 5·a·s²·b = 285,212,672 + 671,088,640.
  EXPECT_DOUBLE_EQ(per_layer(Recompute::none, {}), 956'301'312.0);
  // Flash: 34·s·b·h + 4 bytes (fp32) per head and row = 285,212,672 + 262,144.
  EXPECT_DOUBLE_EQ(per_layer(Recompute::none, {1, false, 1, true}), 285'474'816.0);
  // Selective recomputation drops exactly the eager s×s terms; flash has none to drop.
  EXPECT_DOUBLE_EQ(per_layer(Recompute::selective, {}), 285'212'672.0);
}

TEST(Activations, ContextParallelRanksHoldTheirShareOfTheSequence) {
  // cp = 4: s' = 512 tokens: 512·4096·34 + 4·32·512.
  EXPECT_DOUBLE_EQ(per_layer(Recompute::none, {1, false, 4, true}), 71'368'704.0);
  // tp 8 with sequence parallelism and cp 2: 1024·4096·34/8 + 4·(32/8)·1024.
  EXPECT_DOUBLE_EQ(per_layer(Recompute::none, {8, true, 2, true}), 17'842'176.0);
  // Full recomputation keeps the block input of the rank's tokens: 2·1024·4096.
  EXPECT_DOUBLE_EQ(per_layer(Recompute::full, {1, false, 2, true}), 8'388'608.0);
}

TEST(Activations, Fp8SavesHalfOfTheLinearLayersInputs) {
  // QKV 2, projection 2, MLP in 2, MLP out 8 (·s·b·h): 7·s·b·h saved, 34 → 27.
  EXPECT_DOUBLE_EQ(per_layer(Recompute::none, {1, false, 1, true, true}), 226'754'560.0);
  // Tensor parallel without SP: (10 + 24/t) → (8 + 19/t); t = 4: 12.75·s·b·h.
  EXPECT_DOUBLE_EQ(per_layer(Recompute::selective, {4, false, 1, true, true}),
                   2048.0 * 4096 * 12.75);
  // Full recomputation saves a norm's input, not a linear layer's: unchanged.
  EXPECT_DOUBLE_EQ(per_layer(Recompute::full, {1, false, 1, true, true}), 2.0 * 2048 * 4096);
}

json scenario(const std::string& strategy, const std::string& cluster = "\"dgx-h100\"",
              int seq_len = 4096) {
  return json::parse(R"({"model": "llama2-7b", "cluster": )" + cluster + R"(, "strategy": )" +
                     strategy + R"(, "training": {"seq_len": )" + std::to_string(seq_len) + "}}");
}

SpecError refused(const json& j) {
  try {
    parse_scenario(j);
  } catch (const SpecError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << j.dump();
  return SpecError("", "");
}

TEST(ModernKeys, DefaultsAreFlashAttentionWithoutContextParallelism) {
  const Scenario s = parse_scenario(scenario(R"({"dp": 8, "mixed_precision": "bf16"})"));
  EXPECT_EQ(s.strategy.attention, Attention::flash);
  EXPECT_EQ(s.strategy.cp, 1);
  EXPECT_EQ(effective_recompute(s.strategy), Recompute::none);
  const Scenario c = parse_scenario(scenario(R"({"dp": 2, "cp": 4, "mixed_precision": "bf16"})"));
  EXPECT_EQ(c.world_size(), 8);
  EXPECT_EQ(to_json(c)["strategy"]["cp"], 4);
}

TEST(ModernKeys, SelectiveRecomputationWithFlashAttentionIsNone) {
  const Scenario s =
      parse_scenario(scenario(R"({"dp": 8, "recompute": "selective", "mixed_precision": "bf16"})"));
  EXPECT_EQ(s.strategy.recompute, Recompute::selective);  // as written
  EXPECT_EQ(effective_recompute(s.strategy), Recompute::none);
  const Scenario e = parse_scenario(scenario(
      R"({"dp": 8, "recompute": "selective", "attention": "eager", "mixed_precision": "bf16"})"));
  EXPECT_EQ(effective_recompute(e.strategy), Recompute::selective);
}

TEST(ModernKeys, ContradictionsNameTheirKey) {
  EXPECT_EQ(refused(scenario(R"({"dp": 2, "cp": 4, "attention": "eager"})")).path(),
            "strategy.attention");
  EXPECT_EQ(refused(scenario(R"({"dp": 4, "cp": 4})")).path(), "strategy.dp");  // 16 ≠ 8
  // 2·cp chunks: 4100 is not a multiple of 8.
  EXPECT_EQ(refused(scenario(R"({"dp": 2, "cp": 4})", "\"dgx-h100\"", 4100)).path(),
            "training.seq_len");
  EXPECT_EQ(refused(scenario(R"({"dp": 8, "mixed_precision": "fp8"})", "\"dgx-a100-80gb\"")).path(),
            "strategy.mixed_precision");
  EXPECT_EQ(refused(scenario(R"({"dp": 8, "mixed_precision": "bf16", "tf32": true})")).path(),
            "strategy.tf32");
  EXPECT_EQ(
      refused(scenario(R"({"dp": 8, "mixed_precision": "bf16", "fp8_all_gather": true})")).path(),
      "strategy.fp8_all_gather");
  EXPECT_EQ(refused(scenario(R"({"dp": 8, "attention": "flashy"})")).path(), "strategy.attention");
  const json quick = json::parse(R"({"model": {"params": 7e9, "layers": 32},
      "cluster": "dgx-h100", "strategy": {"dp": 4, "cp": 2}, "training": {"seq_len": 4096}})");
  EXPECT_EQ(refused(quick).path(), "strategy.cp");
}

TEST(ModernKeys, Fp8RunsOnHopperAndTf32OnAmpere) {
  const Scenario f = parse_scenario(scenario(R"({"dp": 8, "mixed_precision": "fp8"})"));
  EXPECT_EQ(gemm_dtype(f.strategy), DType::fp8);
  EXPECT_EQ(compute_dtype(f.strategy.precision), DType::bf16);
  const Scenario t = parse_scenario(scenario(R"({"dp": 8, "tf32": true})", "\"dgx-a100-80gb\""));
  EXPECT_EQ(gemm_dtype(t.strategy), DType::tf32);
}

TEST(ModernKeys, AGpusMemoryMayBeOverriddenPerScenario) {
  const Scenario s = parse_scenario(
      scenario(R"({"dp": 8})",
               R"({"preset": "dgx-h100", "gpu": {"preset": "h100-80gb", "memory_GiB": 79}})"));
  EXPECT_DOUBLE_EQ(s.cluster.gpu.memory_bytes, 79.0 * (1ull << 30));
}

TEST(ModernKeys, AnNvlinkDomainIsWholeNodes) {
  const Scenario s = parse_scenario(scenario(R"({"dp": 9, "tp": 8})", R"("gb200-nvl72")"));
  EXPECT_EQ(s.cluster.domain_gpus(), 72);  // tp 8 spans two 4-GPU trays inside the domain
  EXPECT_EQ(refused(scenario(R"({"dp": 8})",
                             R"({"preset": "dgx-h100", "nvlink_domain_gpus": 12, "nodes": 2})"))
                .path(),
            "cluster.nvlink_domain_gpus");
}

}  // namespace
}  // namespace stratagem::scenario
