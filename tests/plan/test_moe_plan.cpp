// Mixture-of-experts plans (model.moe with ep, etp): the expert groups as Megatron-Core lays
// them out, the token dispatch and combine of each MoE block by hand, the experts' gradients
// over the expert-data-parallel group, the distributed optimizer's shards per group, and
// folded == unfolded.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "engine/memory/memory.hpp"
#include "engine/plan/builder.hpp"
#include "engine/scenario/error.hpp"
#include "sim/simulator.hpp"
#include "tests/plan/plan_test_util.hpp"
#include "tune/search.hpp"

namespace stratagem {
namespace {

using plan::CollectiveKind;
using plan::Phase;
using test::group_named;

// 4 GPT blocks (h 1024, 16 heads, GeLU MLPs with biases), 8 experts of width 2048, top 2, the
// first block dense, on one 8×A100 node: 4096 tokens per micro-batch.
scenario::Scenario small_moe(nlohmann::json strategy,
                             nlohmann::json moe = nlohmann::json::object()) {
  nlohmann::json m = {
      {"experts", 8}, {"top_k", 2}, {"expert_ffn_hidden", 2048}, {"dense_layers", 1}};
  m.update(moe);
  nlohmann::json st = {{"dp", 8}, {"grad_accum", 2}, {"mixed_precision", "bf16"}};
  st.update(strategy);
  return scenario::parse_scenario({{"model",
                                    {{"layers", 4},
                                     {"hidden", 1024},
                                     {"heads", 16},
                                     {"ffn_hidden", 4096},
                                     {"vocab", 32000},
                                     {"max_positions", 4096},
                                     {"moe", m}}},
                                   {"cluster", {{"preset", "dgx-a100-80gb"}}},
                                   {"strategy", st},
                                   {"training", {{"seq_len", 4096}}}});
}

struct Traffic {
  std::map<std::pair<Phase, CollectiveKind>, int> count;
  std::map<std::pair<Phase, CollectiveKind>, double> bytes;
  std::map<int, double> grad_bytes;  ///< by group size
};

Traffic traffic_of(const plan::StepPlan& p, int rank) {
  Traffic out;
  Phase phase = Phase::forward;
  for (const auto& op : p.ops) {
    if (op.rank != rank) continue;
    if (const auto* c = std::get_if<plan::Compute>(&op.payload)) phase = c->phase;
    const auto* c = std::get_if<plan::Collective>(&op.payload);
    if (!c) continue;
    if (c->purpose == plan::CommPurpose::grad_sync) {
      out.grad_bytes[static_cast<int>(p.groups[c->group].ranks.size())] += c->bytes;
    }
    if (c->purpose != plan::CommPurpose::expert_parallel) continue;
    EXPECT_EQ(op.stream, plan::Stream::ep);
    out.count[{phase, c->kind}] += 1;
    out.bytes[{phase, c->kind}] += c->bytes;
  }
  return out;
}

TEST(MoePlan, ExpertGroupsAreCarvedOutOfTheStageAsMegatronCoreDoes) {
  // tp 2 × dp 4 = 8 ranks a stage, regrouped as etp 1 × ep 4 × edp 2.
  const auto p = plan::build_plan(
      small_moe({{"dp", 4}, {"tp", 2}, {"ep", 4}, {"sequence_parallel", true}}), {.fold = false});
  EXPECT_EQ(group_named(p, "ep(stage 0, edp 0)").ranks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(group_named(p, "ep(stage 0, edp 1)").ranks, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(group_named(p, "edp(stage 0, ep 1)").ranks, (std::vector<int>{1, 5}));
}

TEST(MoePlan, EachMoeBlockDispatchesAndCombinesItsRoutedCopies) {
  const auto s = small_moe({{"ep", 8}});
  const auto p = plan::build_plan(s);
  const Traffic t = traffic_of(p, 0);
  // 3 MoE blocks × 2 micro-batches, a dispatch and a combine each way.
  EXPECT_EQ((t.count.at({Phase::forward, CollectiveKind::all_to_all})), 3 * 2 * 2);
  EXPECT_EQ((t.count.at({Phase::backward, CollectiveKind::all_to_all})), 3 * 2 * 2);
  // Each carries the rank's 4096 tokens × top 2 copies of h = 1024 bf16 values.
  const double copies = 4096.0 * 2 * 1024 * 2;
  EXPECT_DOUBLE_EQ((t.bytes.at({Phase::forward, CollectiveKind::all_to_all})), 12 * copies);
  // Dense gradients over dp 8; each rank holds one expert per block, alone in its edp group.
  const auto& u = p.layout.units;
  double dense = 0, experts = 0;
  for (const auto& unit : u) {
    dense += unit.params - unit.expert_params;
    experts += unit.expert_params;
  }
  // 3 MoE blocks, one expert each (GeLU: 2·h·f and the biases).
  EXPECT_DOUBLE_EQ(experts, 3 * (2.0 * 1024 * 2048 + 2048 + 1024));
  ASSERT_EQ(t.grad_bytes.size(), 1u);
  EXPECT_DOUBLE_EQ(t.grad_bytes.at(8), 2 * dense);
}

TEST(MoePlan, ExpertGradientsSyncOverTheExpertDataParallelGroup) {
  // ep 2: edp 4, each rank with 4 experts per block; the distributed optimizer shards the
  // dense states over 8 ranks and the experts' over 4.
  const auto s = small_moe({{"ep", 2}, {"sharding", "zero1"}});
  const auto p = plan::build_plan(s);
  const Traffic t = traffic_of(p, 0);
  const double expert_params = 3 * 4 * (2.0 * 1024 * 2048 + 2048 + 1024);
  EXPECT_DOUBLE_EQ(t.grad_bytes.at(4), 2 * expert_params);
  double total = 0;
  for (const auto& unit : p.layout.units) total += unit.params;
  EXPECT_DOUBLE_EQ(t.grad_bytes.at(8), 2 * (total - expert_params));
  const auto& initial = p.ranks[0].initial;
  EXPECT_NEAR(initial[static_cast<int>(plan::TensorClass::optimizer)],
              8.0 * ((total - expert_params) / 8 + expert_params / 4), 1e-6);
  // The analytic memory model agrees with the simulated peak.
  const auto analytic = memory::estimate_memory(s);
  const auto sim = sim::Simulator().run(p, sim::make_cost_models(s));
  EXPECT_NEAR(sim.resolved(0).peak_memory_bytes, analytic.ranks[0].peak_bytes,
              1e-12 * analytic.ranks[0].peak_bytes);
}

TEST(MoePlan, ExpertTensorParallelismGathersTheDispatchedRows) {
  const auto s = small_moe({{"ep", 4}, {"etp", 2}});
  const auto p = plan::build_plan(s);
  const Traffic t = traffic_of(p, 0);
  const double copies = 4096.0 * 2 * 1024 * 2;
  // Forward: per MoE block and micro-batch, all-to-all, all-gather over etp, reduce-scatter,
  // all-to-all; the etp collectives carry both ranks' copies.
  EXPECT_EQ((t.count.at({Phase::forward, CollectiveKind::all_gather})), 6);
  EXPECT_DOUBLE_EQ((t.bytes.at({Phase::forward, CollectiveKind::all_gather})), 6 * 2 * copies);
  EXPECT_EQ((t.count.at({Phase::backward, CollectiveKind::reduce_scatter})), 6);
}

TEST(MoePlan, SharedExpertsRunBesideTheDispatch) {
  const auto s = small_moe({{"ep", 8}}, {{"shared_experts", 1}});
  const auto p = plan::build_plan(s);
  // The first forward all-to-all of an MoE block and the shared experts' piece both wait for
  // the router's piece; the routed experts wait for both.
  bool found = false;
  for (const auto& op : p.ops) {
    const auto* c = std::get_if<plan::Collective>(&op.payload);
    if (!c || c->kind != CollectiveKind::all_to_all) continue;
    const auto deps = p.deps_of(op);
    ASSERT_EQ(deps.size(), 1u);
    int waiting = 0;
    for (const auto& other : p.ops) {
      const auto od = p.deps_of(other);
      for (plan::OpId d : od) waiting += d == deps[0] ? 1 : 0;
    }
    EXPECT_EQ(waiting, 2);  // the all-to-all and the shared experts
    found = true;
    break;
  }
  EXPECT_TRUE(found) << "no all-to-all in the plan";
}

TEST(MoePlan, FoldedAndUnfoldedAgree) {
  for (const nlohmann::json& st :
       {nlohmann::json{{"ep", 8}}, nlohmann::json{{"ep", 2}, {"sharding", "zero1"}},
        nlohmann::json{{"dp", 4}, {"tp", 2}, {"ep", 4}, {"sequence_parallel", true}},
        nlohmann::json{{"ep", 4}, {"etp", 2}, {"moe_dispatcher", "allgather"}}}) {
    const auto s = small_moe(st);
    const auto folded = plan::build_plan(s);
    const auto full = plan::build_plan(s, {.fold = false});
    const auto models = sim::make_cost_models(s);
    const auto a = sim::Simulator().run(folded, models);
    const auto b = sim::Simulator().run(full, models);
    EXPECT_DOUBLE_EQ(a.metrics.step_time_s, b.metrics.step_time_s) << st.dump();
    for (int r = 0; r < 8; ++r) {
      EXPECT_DOUBLE_EQ(a.resolved(r).peak_memory_bytes, b.ranks[r].peak_memory_bytes) << st.dump();
    }
    const auto analytic = memory::estimate_memory(s);
    for (const auto& r : analytic.ranks) {
      EXPECT_NEAR(a.resolved(r.rank).peak_memory_bytes, r.peak_bytes, 1e-12 * r.peak_bytes)
          << st.dump();
    }
  }
}

TEST(MoePlan, WhatIsNotSimulatedYetIsRefusedByKey) {
  auto refused = [](const nlohmann::json& st, const nlohmann::json& moe) {
    try {
      small_moe(st, moe);
    } catch (const SpecError& e) {
      return e.path();
    }
    return std::string();
  };
  EXPECT_EQ(refused({{"sharding", "zero3"}}, nlohmann::json::object()), "strategy.sharding");
  EXPECT_EQ(refused({{"tp", 2}, {"dp", 4}}, {{"shared_experts", 1}}), "strategy.tp");
  EXPECT_EQ(refused({{"recompute", "selective-op"}}, nlohmann::json::object()),
            "strategy.recompute");
}

// search enumerates ep over the experts' divisors that divide a stage's ranks, and its bound
// (which leaves the dispatch out) still prunes nothing the exhaustive search ranks first.
TEST(MoePlan, SearchTriesExpertParallelismAndPruningKeepsTheBest) {
  const auto base = small_moe(nlohmann::json::object());
  tune::SearchOptions options;
  options.precisions = {scenario::Precision::bf16};
  options.fp8_when_available = false;
  options.recomputes = {scenario::Recompute::none, scenario::Recompute::full};
  options.max_pp = 2;
  options.max_micro_batch_size = 2;
  options.threads = 1;
  options.keep_top = 3;
  const auto pruned = tune::search(base, options);
  options.keep_top = 0;
  const auto all = tune::search(base, options);
  std::set<int> eps;
  for (const auto& c : all.ranked) {
    const auto& st = c.scenario.strategy;
    eps.insert(st.ep);
    EXPECT_EQ(8 % st.ep, 0) << c.label;
    EXPECT_EQ((st.dp * st.tp) % st.ep, 0) << c.label;
  }
  EXPECT_EQ(eps, (std::set<int>{1, 2, 4, 8}));
  ASSERT_GE(pruned.ranked.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(pruned.ranked[i].label, all.ranked[i].label) << i;
}

}  // namespace
}  // namespace stratagem
