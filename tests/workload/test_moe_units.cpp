// An MoE block's unit (units.hpp) and kernels (block_moe.cpp) on one rank, by hand: Mixtral
// 8x7B (h 4096, 8 experts, top-2, expert width 14336, SwiGLU), one micro-batch of 4096 tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/scenario/expert_mesh.hpp"
#include "engine/scenario/scenario.hpp"
#include "engine/workload/kernels.hpp"
#include "engine/workload/tp_chain.hpp"
#include "engine/workload/units.hpp"

namespace stratagem::workload {
namespace {

using nlohmann::json;

scenario::Scenario mixtral(json strategy = json::object(), const std::string& stack = "megatron") {
  json st = {{"dp", 8},
             {"micro_batch_size", 1},
             {"grad_accum", 1},
             {"mixed_precision", "bf16"},
             {"stack", stack}};
  st.update(strategy);
  return scenario::parse_scenario_to_describe({{"model", "mixtral-8x7b"},
                                               {"cluster", "dgx-h100"},
                                               {"strategy", st},
                                               {"training", {{"seq_len", 4096}}}},
                                              "test");
}

constexpr double n = 4096, h = 4096, f = 14336, E = 8, k = 2;

const Kernel& find(const std::vector<Kernel>& kernels, const std::string& name) {
  const auto it = std::find_if(kernels.begin(), kernels.end(),
                               [&](const Kernel& kr) { return kr.name == name; });
  if (it != kernels.end()) return *it;
  ADD_FAILURE() << "no kernel " << name;
  static const Kernel none;
  return none;
}

TEST(MoeUnits, EveryBlockOfMixtralIsAnMoeBlockWithAllItsParametersOnOneExpertRank) {
  const scenario::Scenario s = mixtral();
  const std::vector<Unit> units = make_units(s);
  ASSERT_EQ(units.size(), 34u);
  const scenario::BlockParamsBreakdown p =
      scenario::block_params_breakdown(s.model, scenario::BlockKind::moe);
  for (int u = 1; u <= 32; ++u) {
    EXPECT_DOUBLE_EQ(units[u].params, p.attention + p.norms + p.router + p.mlp);
    EXPECT_DOUBLE_EQ(units[u].expert_params, p.mlp);  // no shared experts
  }
  // Forward GEMM FLOPs: 2 per token and active matrix (attention, router, top-2 experts); the
  // attention core runs in the fused kernel (causal: half of 4·s·s·h).
  EXPECT_NEAR(units[1].fwd_flops,
              2.0 * n * scenario::block_matmul_params(s.model, scenario::BlockKind::moe),
              1e-9 * units[1].fwd_flops);
  EXPECT_DOUBLE_EQ(units[1].attn_fwd_flops, 4.0 * n * n * h / 2);
}

TEST(MoeUnits, ExpertParallelismSplitsTheExpertsAndImbalanceLoadsTheBusiestOne) {
  const std::vector<Unit> one = make_units(mixtral());
  const std::vector<Unit> ep8 = make_units(mixtral({{"ep", 8}}));
  const double expert = 3 * h * f;
  EXPECT_DOUBLE_EQ(ep8[1].expert_params, expert);
  EXPECT_DOUBLE_EQ(one[1].params - ep8[1].params, 7 * expert);
  // Balanced, a rank runs as many expert rows with one expert as with all eight.
  EXPECT_NEAR(ep8[1].fwd_flops, one[1].fwd_flops, 1e-9 * one[1].fwd_flops);
  // With the busiest expert at 1.5 × its share, the rank's expert GEMMs grow by half.
  const std::vector<Unit> skew = make_units(mixtral({{"ep", 8}, {"moe_load_imbalance", 1.5}}));
  EXPECT_NEAR(skew[1].fwd_flops - ep8[1].fwd_flops, 0.5 * n * k * 2 * expert,
              1e-9 * skew[1].fwd_flops);
  // A capacity of 1.25 caps it.
  scenario::Scenario capped = mixtral({{"ep", 8}, {"moe_load_imbalance", 1.5}});
  capped.model.moe->capacity_factor = 1.25;
  EXPECT_NEAR(make_units(capped)[1].fwd_flops - ep8[1].fwd_flops, 0.25 * n * k * 2 * expert,
              1e-9 * skew[1].fwd_flops);
}

TEST(MoeUnits, GroupedExpertGemmsRunAtTheExpertsRowsAndTheRouterIn16Bits) {
  const BlockKernels ep8 = block_kernels(mixtral({{"ep", 8}}), scenario::BlockKind::moe);
  // One local expert receiving its 8 ranks' copies: 8 · 4096 · 2 / 8 rows.
  const Kernel& fc1 = find(ep8.forward, "experts linear_fc1");
  EXPECT_DOUBLE_EQ(fc1.m, n * k);
  EXPECT_DOUBLE_EQ(fc1.n, 2 * f);
  EXPECT_DOUBLE_EQ(fc1.flops, 2 * n * k * 2 * f * h);
  const BlockKernels one = block_kernels(mixtral(), scenario::BlockKind::moe);
  // Eight local experts of 1024 rows each, grouped in one launch.
  const Kernel& grouped = find(one.forward, "experts linear_fc1");
  EXPECT_DOUBLE_EQ(grouped.m, n * k / E);
  EXPECT_DOUBLE_EQ(grouped.flops, fc1.flops);
  const Kernel& router = find(one.forward, "router");
  EXPECT_DOUBLE_EQ(router.flops, 2 * n * E * h);
  EXPECT_EQ(router.part, kMoePrePart);
  EXPECT_EQ(grouped.part, kExpertsPart);
  // Dispatched rows are regrouped by expert when a rank holds several (ep 2: four each).
  const BlockKernels ep2 = block_kernels(mixtral({{"ep", 2}}), scenario::BlockKind::moe);
  EXPECT_EQ(find(ep2.forward, "sort received rows by expert").part, kMoePrePart);
  EXPECT_EQ(find(ep2.forward, "unsort expert outputs").part, kExpertsPart);
  // Backward: each grouped GEMM's data and weight gradients at the same rows.
  EXPECT_DOUBLE_EQ(find(one.backward, "experts linear_fc1 wgrad").flops, grouped.flops);
  EXPECT_DOUBLE_EQ(find(one.backward, "experts linear_fc2 dgrad").m, n * k / E);
}

TEST(MoeUnits, SavedTensorsOfTheMoeHalfByHand) {
  const scenario::Scenario s = mixtral();
  const BlockKernels kr = block_kernels(s, scenario::BlockKind::moe);
  const double rows = n * k;  // every routed copy, on this one rank
  // Norm statistics and output (the router's and permutation's input), fp32 scores, top-k
  // indices, the permuted copies and their probabilities.
  EXPECT_DOUBLE_EQ(kr.saved[kMoePrePart],
                   n * 4 + n * h * 2 + n * E * 4 + n * k * 8 + rows * h * 2 + rows * 4);
  // fc1's output (gate and up) and the weighted SwiGLU's output.
  EXPECT_DOUBLE_EQ(kr.saved[kExpertsPart], rows * 2 * f * 2 + rows * f * 2);
  EXPECT_DOUBLE_EQ(kr.saved[kSharedPart], 0.0);
  EXPECT_DOUBLE_EQ(kr.saved[kMoePostPart], n * h * 2);  // the block's output
  const Unit block = make_units(s)[1];
  EXPECT_GT(block.act_bytes, kr.saved[kExpertsPart]);
  // Full recomputation keeps the block's input alone.
  const Unit full = make_units(mixtral({{"recompute", "full"}}))[1];
  EXPECT_DOUBLE_EQ(full.act_bytes, n * h * 2);
  EXPECT_DOUBLE_EQ(full.recompute_flops, full.fwd_flops);
}

TEST(MoeUnits, TorchtitanScalesTheExpertsOutputsAndKeepsThem) {
  const BlockKernels kr =
      block_kernels(mixtral(json::object(), "pytorch"), scenario::BlockKind::moe);
  EXPECT_DOUBLE_EQ(find(kr.forward, "experts w1").flops, 2 * (n * k / E) * f * h * E);
  find(kr.forward, "experts scale by routing scores");
  find(kr.backward, "experts routing scores grad");
  find(kr.forward, "gather routed copies");
}

// Qwen3-30B-A3B's attention: 32 heads × 128 on h = 2048 (q and o 4096 wide), 4 KV heads,
// per-head q/k RMSNorms before RoPE; 128 experts of width 768, top 8.
TEST(MoeUnits, Qwen3AttentionIsHeadsTimesHeadDimWideWithPerHeadNorms) {
  const scenario::Scenario s = scenario::parse_scenario(
      {{"model", "qwen3-30b-a3b"},
       {"cluster", "dgx-h100"},
       {"strategy", {{"dp", 8}, {"ep", 8}, {"mixed_precision", "bf16"}, {"stack", "megatron"}}},
       {"training", {{"seq_len", 4096}}}});
  const double tokens = 4096, q = 32 * 128, kv = 4 * 128, hq = 2048;
  const BlockKernels kr = block_kernels(s, scenario::BlockKind::moe);
  const Kernel& qkv = find(kr.forward, "linear_qkv");
  EXPECT_DOUBLE_EQ(qkv.n, q + 2 * kv);
  EXPECT_DOUBLE_EQ(find(kr.forward, "linear_proj").k, q);
  // One kernel per norm: reads q (or k) and writes it, with the row statistics of each head.
  EXPECT_DOUBLE_EQ(find(kr.forward, "q_layernorm").bytes,
                   2 * tokens * q * 2 + 128 * 2 + tokens * 32 * 4);
  EXPECT_DOUBLE_EQ(find(kr.forward, "k_layernorm").bytes,
                   2 * tokens * kv * 2 + 128 * 2 + tokens * 4 * 4);
  find(kr.backward, "q_layernorm backward");
  // The fused attention core over q's width (causal: half of 4·s·s·q).
  const std::vector<Unit> units = make_units(s);
  EXPECT_DOUBLE_EQ(units[1].attn_fwd_flops, 4.0 * tokens * tokens * q / 2);
  // One rank's 16 experts, each 8 ranks' 4096 tokens × top 8 / 128 = 2048 rows.
  const Kernel& fc1 = find(kr.forward, "experts linear_fc1");
  EXPECT_DOUBLE_EQ(fc1.m, 2048);
  EXPECT_DOUBLE_EQ(fc1.flops, 16 * 2 * 2048 * (2 * 768) * hq);
}

// Under async TP the projection runs beside the attention's reduce-scatter; the MoE half's
// norm and router need the reduced output, so they are a piece of their own after it.
TEST(MoeUnits, UnderAsyncTpTheMoeHalfWaitsForTheReduceScatter) {
  const scenario::Scenario s =
      mixtral({{"dp", 4}, {"tp", 2}, {"sequence_parallel", true}, {"async_tp", true}, {"ep", 4}});
  const TpChains chains(s);
  const std::vector<TpPiece>& c = chains.chain(1, false, true);
  std::size_t rs = c.size();
  for (std::size_t k = 0; k < c.size(); ++k) {
    if (c[k].collective && c[k].alongside && c[k].kind == CollectiveKind::reduce_scatter) {
      rs = k;
      break;
    }
  }
  ASSERT_LT(rs + 3, c.size());
  EXPECT_FALSE(c[rs + 1].collective);  // the projection, beside the reduce-scatter
  EXPECT_FALSE(c[rs + 2].collective);  // norm, router, permutation: after both
  EXPECT_GT(c[rs + 2].flops_share, 0.0);
  EXPECT_TRUE(c[rs + 3].collective);
  EXPECT_EQ(c[rs + 3].kind, CollectiveKind::all_to_all);
  EXPECT_EQ(c[rs + 3].group, PieceGroup::ep);
  // The shares of the chain's compute pieces add up to the block's work.
  double flops = 0, bytes = 0;
  for (const TpPiece& p : c) {
    flops += p.collective ? 0 : p.flops_share;
    bytes += p.collective ? 0 : p.bytes_share;
  }
  EXPECT_NEAR(flops, 1.0, 1e-12);
  EXPECT_NEAR(bytes, 1.0, 1e-12);
}

}  // namespace
}  // namespace stratagem::workload
