// Expert parallelism's layout (Megatron-Core's expert rank generator, order tp-ep-dp-pp), its
// rules with the key each violation names, and one rank's experts and dispatch bytes by hand.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

#include "engine/scenario/error.hpp"
#include "engine/scenario/expert_mesh.hpp"
#include "engine/scenario/scenario.hpp"

namespace stratagem::scenario {
namespace {

using nlohmann::json;

json mixtral_on_8(json strategy) {
  return {{"model", "mixtral-8x7b"},
          {"cluster", "dgx-h100"},
          {"strategy", std::move(strategy)},
          {"training", {{"seq_len", 4096}}}};
}

std::string error_path(const json& scenario) {
  try {
    parse_scenario_to_describe(scenario, "test");
  } catch (const SpecError& e) {
    return e.path();
  }
  return "";
}

TEST(ExpertMesh, RanksAreEtpFastestThenEpThenEdpInsideEachStage) {
  ExpertMesh m;
  m.etp = 2;
  m.ep = 4;
  m.edp = 2;
  // Every rank has its own coordinate, inside the axes' extents, and maps back to itself.
  std::set<std::tuple<int, int, int, int>> seen;
  for (int r = 0; r < 32; ++r) {
    const ExpertCoord c = m.coord_of(r);
    EXPECT_EQ(m.rank_of(c), r);
    EXPECT_TRUE(c.etp < 2 && c.ep < 4 && c.edp < 2 && c.stage < 2) << r;
    seen.insert({c.stage, c.edp, c.ep, c.etp});
  }
  EXPECT_EQ(seen.size(), 32u);
  // Rank 11 = stage 0, local 11: etp 1, ep (11 / 2) % 4 = 1, edp 11 / 8 = 1.
  const ExpertCoord c = m.coord_of(11);
  EXPECT_EQ(c.stage, 0);
  EXPECT_EQ(c.etp, 1);
  EXPECT_EQ(c.ep, 1);
  EXPECT_EQ(c.edp, 1);
  // Rank 0's expert-parallel group: ep 0..3 at etp 0, edp 0 -> ranks 0, 2, 4, 6.
  for (int e = 0; e < 4; ++e) EXPECT_EQ(m.rank_of({0, 0, e, 0}), 2 * e);
  EXPECT_EQ(m.coord_of(16).stage, 1);
}

TEST(ExpertMesh, EdpIsTheStageRanksOverEpTimesEtp) {
  StrategySpec st;
  st.dp = 16;
  st.tp = 2;
  st.cp = 2;
  st.ep = 8;
  st.etp = 2;
  st.pp = 4;
  const ExpertMesh m = expert_mesh(st);
  EXPECT_EQ(m.edp, 16 * 2 * 2 / (8 * 2));
  EXPECT_EQ(m.ranks_per_stage(), 64);
}

TEST(ExpertMesh, EachRuleNamesItsKey) {
  EXPECT_EQ(error_path(mixtral_on_8({{"dp", 8}, {"ep", 8}})), "");
  EXPECT_EQ(error_path(mixtral_on_8({{"dp", 8}, {"ep", 3}})), "strategy.ep");  // 8 experts
  EXPECT_EQ(error_path(mixtral_on_8({{"dp", 2}, {"pp", 4}, {"ep", 4}})),
            "strategy.ep");                             // 2 ranks/stage
  json narrow = mixtral_on_8({{"dp", 8}, {"etp", 8}});  // experts 1,500 wide: 8 does not divide
  narrow["model"] = {{"preset", "mixtral-8x7b"}, {"moe", {{"expert_ffn_hidden", 1500}}}};
  EXPECT_EQ(error_path(narrow), "strategy.etp");
  narrow["strategy"]["etp"] = 4;
  EXPECT_EQ(error_path(narrow), "");
  EXPECT_EQ(error_path(mixtral_on_8({{"dp", 4}, {"tp", 2}, {"ep", 2}})),
            "strategy.sequence_parallel");
  EXPECT_EQ(
      error_path(mixtral_on_8({{"dp", 4}, {"tp", 2}, {"sequence_parallel", true}, {"ep", 2}})), "");
  // The busiest expert takes at most experts / top_k = 4 times the mean.
  EXPECT_EQ(error_path(mixtral_on_8({{"dp", 8}, {"ep", 8}, {"moe_load_imbalance", 4}})), "");
  EXPECT_EQ(error_path(mixtral_on_8({{"dp", 8}, {"ep", 8}, {"moe_load_imbalance", 4.5}})),
            "strategy.moe_load_imbalance");
  // A dense model has no experts to split.
  json dense = mixtral_on_8({{"dp", 8}, {"ep", 2}});
  dense["model"] = "llama3-8b";
  EXPECT_EQ(error_path(dense), "strategy.ep");
  dense["strategy"] = {{"dp", 8}, {"moe_dispatcher", "allgather"}};
  EXPECT_EQ(error_path(dense), "strategy.moe_dispatcher");
}

TEST(ExpertMesh, OneRanksExpertsAndDispatchBytesByHand) {
  // Mixtral 8x7B on 8 H100, dp 8 × ep 8, bf16, s = 4096, micro-batch 1.
  const Scenario s = parse_scenario_to_describe(
      mixtral_on_8({{"dp", 8}, {"ep", 8}, {"mixed_precision", "bf16"}}), "test");
  const ExpertRankLoad a = expert_rank_load(s, 2.0);
  const double h = 4096, f = 14336;
  EXPECT_EQ(a.local_experts, 1);
  EXPECT_EQ(a.expert_params, 3 * h * f);
  EXPECT_EQ(a.tokens, 4096);
  EXPECT_EQ(a.routed, 2 * 4096);
  EXPECT_EQ(a.dispatch_bytes, 2 * 4096 * h * 2);                   // 64 MiB of token copies
  EXPECT_EQ(a.dispatch_bytes_off_rank, 2 * 4096 * h * 2 * 7 / 8);  // all but its own expert's
  EXPECT_EQ(a.expert_gemm_rows, 8 * 2 * 4096 / 8);
  // The all-gather dispatcher gathers the group's tokens, not copies.
  json j = mixtral_on_8({{"dp", 8},
                         {"ep", 8},
                         {"mixed_precision", "bf16"},
                         {"moe_dispatcher", "allgather"},
                         {"moe_load_imbalance", 1.5}});
  const ExpertRankLoad g = expert_rank_load(parse_scenario_to_describe(j, "test"), 2.0);
  EXPECT_EQ(g.dispatch_bytes, 8 * 4096 * h * 2);
  EXPECT_EQ(g.dispatch_bytes_off_rank, 7 * 4096 * h * 2);
  EXPECT_EQ(g.expert_gemm_rows, 1.5 * 8 * 2 * 4096 / 8);
  // ep 4 × etp 2 with tp 2 + SP: 2 experts per rank, half of each; 2,048 tokens per rank; the
  // all-to-all's 3/4 off the rank plus the etp all-gather's one more copy of what arrives.
  json t = mixtral_on_8({{"dp", 4},
                         {"tp", 2},
                         {"sequence_parallel", true},
                         {"ep", 4},
                         {"etp", 2},
                         {"mixed_precision", "bf16"}});
  const ExpertRankLoad e = expert_rank_load(parse_scenario_to_describe(t, "test"), 2.0);
  EXPECT_EQ(e.local_experts, 2);
  EXPECT_EQ(e.expert_params, 2 * 3 * h * f / 2);
  EXPECT_EQ(e.tokens, 2048);
  EXPECT_EQ(e.dispatch_bytes_off_rank, 2 * 2048 * h * 2 * (3.0 / 4 + 1));
  EXPECT_EQ(e.expert_gemm_rows, 8 * 2 * 2048 / 8);
}

}  // namespace
}  // namespace stratagem::scenario

namespace stratagem::scenario {
namespace {

TEST(ExpertMesh, StrategyKeysRoundTripThroughJson) {
  const Scenario s = parse_scenario_to_describe({{"model", "mixtral-8x7b"},
                                                 {"cluster", "dgx-h100"},
                                                 {"strategy",
                                                  {{"dp", 4},
                                                   {"tp", 2},
                                                   {"sequence_parallel", true},
                                                   {"ep", 4},
                                                   {"etp", 2},
                                                   {"moe_dispatcher", "allgather"},
                                                   {"moe_load_imbalance", 1.25}}}},
                                                "test");
  const Scenario again = parse_scenario_to_describe(to_json(s), "again");
  EXPECT_EQ(again.strategy.ep, 4);
  EXPECT_EQ(again.strategy.etp, 2);
  EXPECT_EQ(again.strategy.moe_dispatcher, MoeDispatcher::allgather);
  EXPECT_EQ(again.strategy.moe_load_imbalance, 1.25);
  // A dense scenario's JSON gains no expert keys.
  const nlohmann::json dense = to_json(parse_scenario(
      {{"model", "llama3-8b"}, {"cluster", "dgx-h100"}, {"strategy", {{"dp", 8}}}}, "dense"));
  for (const char* key : {"ep", "etp", "moe_dispatcher", "moe_load_imbalance"}) {
    EXPECT_FALSE(dense.at("strategy").contains(key)) << key;
  }
}

}  // namespace
}  // namespace stratagem::scenario
