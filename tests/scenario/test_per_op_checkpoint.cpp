// torchtitan's per-op selective activation checkpointing (`recompute: selective-op`): the bytes a
// block keeps, counted by hand from torchtitan/distributed/activation_checkpoint.py's policy
// (save every odd `aten.mm` of a block, the fused attention, the reduce-scatters; recompute the
// rest), what its recompute op runs again, and that other stacks refuse it (the runtime's
// refusal: tests/runtime/test_model.cpp).
#include <gtest/gtest.h>

#include <string>

#include "engine/plan/builder.hpp"
#include "engine/scenario/error.hpp"
#include "engine/scenario/model.hpp"
#include "engine/scenario/scenario.hpp"
#include "engine/workload/units.hpp"

namespace stratagem::scenario {
namespace {

using nlohmann::json;

json llama3_8b(const std::string& strategy) {
  return json::parse(R"({"model": "llama3-8b", "cluster": "dgx-h100", "strategy": )" + strategy +
                     R"(, "training": {"seq_len": 8192, "global_batch": 8}})");
}

// Llama 3 8B: h 4096, 8 KV heads of 128 (kv 1024), SwiGLU f 14336, 32 heads; T = 8192 tokens.
TEST(PerOpCheckpoint, BytesByHand) {
  const ModelSpec m = parse_scenario(llama3_8b(R"({"dp": 8})"), "t").model;
  const double T = 8192, h = 4096, kv = 1024, f = 14336, a = 32, e = 2;
  // mm 1 wq saved, 2 wk recomputed, 3 wv saved, 4 wo recomputed, 5 w1 saved, 6 w3 recomputed,
  // 7 w2 saved; + the block input, the attention output and its fp32 log-sum-exp per head.
  const double one_rank = e * T * (h + h + kv + f + h) + e * T * h + 4 * T * a;
  EXPECT_DOUBLE_EQ(per_op_checkpoint_bytes(m, 8192, 1, 2.0, {1, false, 1, true}), one_rank);
  EXPECT_DOUBLE_EQ(
      activation_bytes_per_layer(m, 8192, 1, Recompute::selective_op, 2.0, {1, false, 1, true}),
      one_rank);
  // Under half of what Megatron's selective recomputation keeps with flash attention (which
  // saves everything but the attention core: 34·s·b·h + 4·a·s·b).
  EXPECT_LT(one_rank, 0.5 * activation_bytes_per_layer(m, 8192, 1, Recompute::none, 2.0,
                                                       {1, false, 1, true}));
  // tp 2 with sequence parallelism: the input and the two reduce-scatter outputs are /t, the
  // column-parallel outputs /t, the row-parallel w2's output is its full-width partial sum.
  const double t = 2;
  const double tp2 = e * T * h / t + e * T * (h / t + kv / t + f / t + h) + e * T * h / t +
                     4 * T * a / t + 2 * e * T * h / t;
  EXPECT_DOUBLE_EQ(per_op_checkpoint_bytes(m, 8192, 1, 2.0, {2, true, 1, true}), tp2);
  // Eager attention's batched matmuls and softmax are not on the list: nothing of it is kept.
  EXPECT_DOUBLE_EQ(per_op_checkpoint_bytes(m, 8192, 1, 2.0, {1, false, 1, false}),
                   e * T * (h + h + kv + f + h));
}

TEST(PerOpCheckpoint, LinearsWithABiasAreNotSaved) {
  // GPT-2's linears have biases: aten.linear runs them as addmm, which the policy does not list.
  ModelSpec m = parse_model(json::parse(R"({"layers": 2, "hidden": 768, "heads": 12,
                                           "ffn_hidden": 3072, "vocab": 50257,
                                           "max_positions": 1024, "bias": true})"),
                            "model");
  const double T = 1024, h = 768, e = 2;
  EXPECT_DOUBLE_EQ(per_op_checkpoint_bytes(m, 1024, 1, 2.0, {1, false, 1, true}),
                   e * T * h + e * T * h + 4 * T * 12);
  EXPECT_DOUBLE_EQ(per_op_recompute_flops_per_token(m, 1), 2 * (3 * h * h + h * h + 2 * 4 * h * h));
}

TEST(PerOpCheckpoint, TheRecomputeRunsTheUnsavedLinearsAndEveryPointwiseOp) {
  const Scenario s = parse_scenario(llama3_8b(R"({"dp": 8, "recompute": "selective-op"})"), "t");
  const auto units = workload::make_units(s);
  const workload::Unit& block = units[1];
  const double T = 8192, h = 4096, kv = 1024, f = 14336;
  // wk (T×kv×h), wo (T×h×h), w3 (T×f×h).
  EXPECT_DOUBLE_EQ(block.recompute_flops, 2 * T * (kv * h + h * h + f * h));
  EXPECT_DOUBLE_EQ(block.recompute_attn_flops, 0.0);  // the attention output is saved
  const workload::Compute again =
      workload::units_work(s.strategy, units, workload::Phase::recompute, 1, 2);
  const workload::Compute forward =
      workload::units_work(s.strategy, units, workload::Phase::forward, 1, 2);
  EXPECT_DOUBLE_EQ(again.bytes, forward.bytes);  // every memory-bound kernel again
  ASSERT_TRUE(again.gemms);
  EXPECT_EQ(again.gemms->size(), 3u);
  // The step: slower than no recomputation, faster than full; less memory than none.
  auto step = [](const std::string& rc) {
    const Scenario x = parse_scenario(llama3_8b(R"({"dp": 8, "recompute": ")" + rc + R"("})"), "t");
    return plan::build_plan(x).layout.units[1];
  };
  EXPECT_LT(step("selective-op").act_bytes, step("none").act_bytes);
  EXPECT_GT(step("selective-op").act_bytes, step("full").act_bytes);
}

TEST(PerOpCheckpoint, RefusedOutsideTorchtitansStack) {
  try {
    parse_scenario(llama3_8b(R"({"dp": 8, "recompute": "selective-op", "stack": "megatron"})"),
                   "t");
    FAIL() << "accepted";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.path(), "strategy.recompute");
    EXPECT_NE(std::string(e.what()).find("torchtitan"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace stratagem::scenario
