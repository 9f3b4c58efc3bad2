// The simulator on plans from build_plan: folding is exact, and it is fast enough.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/plan/builder.hpp"
#include "engine/result/result.hpp"
#include "engine/scenario/presets.hpp"
#include "engine/scenario/strategy_rewrite.hpp"
#include "sim/simulator.hpp"
#include "tune/search.hpp"
#include "tune/strategy_variants.hpp"

namespace stratagem::test {
namespace {

// A 24-layer GPT (h 1024) on `nodes` DGX A100 nodes with the given strategy.
scenario::Scenario gpt_scenario(const nlohmann::json& strategy, int nodes = 1) {
  nlohmann::json j = {{"name", "test"},
                      {"model",
                       {{"layers", 24},
                        {"hidden", 1024},
                        {"heads", 16},
                        {"vocab", 50257},
                        {"max_positions", 1024}}},
                      {"cluster", {{"preset", "dgx-a100-80gb"}, {"nodes", nodes}}},
                      {"strategy", strategy},
                      {"training", {{"seq_len", 1024}}}};
  return scenario::parse_scenario(j);
}

void expect_fold_exact(const scenario::Scenario& s) {
  const auto models = sim::make_cost_models(s);
  const auto folded = plan::build_plan(s, {.fold = true});
  const auto full = plan::build_plan(s, {.fold = false});
  const auto rf = sim::Simulator().run(folded, models);
  const auto ru = sim::Simulator().run(full, models);
  EXPECT_EQ(result::to_json(rf)["metrics"].dump(2), result::to_json(ru)["metrics"].dump(2));
  ASSERT_EQ(rf.ranks.size(), ru.ranks.size());
  for (std::size_t r = 0; r < rf.ranks.size(); ++r) {
    EXPECT_EQ(rf.ranks[r].peak_memory_bytes, ru.ranks[r].peak_memory_bytes) << "rank " << r;
    EXPECT_EQ(rf.ranks[r].oom, ru.ranks[r].oom) << "rank " << r;
  }
  EXPECT_GT(rf.metrics.step_time_s, 0.0);
}

TEST(SimScenarios, FoldingIsExactForDdpPipeline) {
  expect_fold_exact(gpt_scenario({{"dp", 4}, {"pp", 2}, {"grad_accum", 4}}));
}
TEST(SimScenarios, FoldingIsExactForZero2) {
  expect_fold_exact(scenario::load_scenario("default"));
}
TEST(SimScenarios, FoldingIsExactForInterleavedFp16) {
  expect_fold_exact(gpt_scenario({{"dp", 2},
                                  {"pp", 4},
                                  {"schedule", "interleaved"},
                                  {"chunks", 2},
                                  {"grad_accum", 8},
                                  {"sharding", "zero1"},
                                  {"mixed_precision", "fp16"}}));
}
TEST(SimScenarios, FoldingIsExactForZero3AcrossNodes) {
  expect_fold_exact(gpt_scenario(
      {{"dp", 16}, {"grad_accum", 2}, {"sharding", "zero3"}, {"mixed_precision", "bf16"}}, 2));
}
TEST(SimScenarios, FoldingIsExactForHybridShardAcrossNodes) {
  expect_fold_exact(gpt_scenario(
      {{"dp", 16}, {"grad_accum", 2}, {"sharding", "HYBRID_SHARD"}, {"mixed_precision", "bf16"}},
      2));
}
TEST(SimScenarios, FoldingIsExactForGpipeRecomputeAcrossNodes) {
  expect_fold_exact(gpt_scenario({{"dp", 8},
                                  {"pp", 2},
                                  {"schedule", "gpipe"},
                                  {"grad_accum", 4},
                                  {"sharding", "zero1"},
                                  {"mixed_precision", "bf16"},
                                  {"recompute", "full"}},
                                 2));
}
TEST(SimScenarios, FoldingIsExactForOptimizerOffload) {
  expect_fold_exact(gpt_scenario({{"dp", 8},
                                  {"grad_accum", 2},
                                  {"sharding", "zero2"},
                                  {"mixed_precision", "bf16"},
                                  {"offload_optimizer", "cpu"}}));
}

// Every allocation of a shipped scenario's plan is freed within the step, never below zero.
TEST(SimScenarios, MemoryOfShippedScenariosBalances) {
  for (const auto& name : scenario::shipped_scenario_names()) {
    SCOPED_TRACE(name);
    const auto s = scenario::load_scenario(name);
    const auto r = sim::Simulator().run(plan::build_plan(s), sim::make_cost_models(s));
    for (const auto& rank : r.ranks) {
      if (rank.same_as >= 0) continue;
      const auto& m = rank.memory;
      ASSERT_FALSE(m.time_s.empty());
      for (const auto& sample : m.bytes) {
        for (double b : sample) ASSERT_GE(b, 0.0) << "rank " << rank.rank;
      }
      for (int c = 0; c < plan::kTensorClassCount; ++c) {
        EXPECT_NEAR(m.bytes.back()[c], m.bytes.front()[c], 1.0)
            << "rank " << rank.rank << " " << plan::to_string(static_cast<plan::TensorClass>(c));
      }
      EXPECT_TRUE(std::is_sorted(m.time_s.begin(), m.time_s.end()));
    }
  }
}

}  // namespace
}  // namespace stratagem::test

namespace stratagem {
namespace {

// GPT-3 1.3B on one DGX A100 with a small enumeration: fast to search, and it prunes.
scenario::Scenario small_search_base() {
  nlohmann::json j = {{"model", "gpt3-1.3b"},
                      {"cluster", "dgx-a100-80gb"},
                      {"strategy", {{"dp", 8}}},
                      {"training", {{"seq_len", 2048}, {"global_batch", 32}}}};
  return scenario::parse_scenario(j);
}

tune::SearchOptions small_search_options() {
  tune::SearchOptions options;
  options.precisions = {scenario::Precision::bf16};
  options.recomputes = {scenario::Recompute::none, scenario::Recompute::selective};
  options.max_micro_batch_size = 4;
  options.keep_top = 3;
  return options;
}

// Every configuration search tries runs on the base's training stack, and the stack moves the
// throughput: the same best configuration is faster with torch.compile than eager.
TEST(Search, KeepsTheBaseStack) {
  auto base = small_search_base();
  tune::SearchOptions options = small_search_options();
  const auto eager = tune::search(base, options);
  base.strategy.compile = true;
  const auto compiled = tune::search(base, options);
  ASSERT_FALSE(compiled.ranked.empty());
  for (const auto& c : compiled.ranked) EXPECT_TRUE(c.scenario.strategy.compile) << c.label;
  EXPECT_GT(compiled.ranked[0].tokens_per_s, eager.ranked[0].tokens_per_s);
}

// Bound-and-prune returns exactly the exhaustive search's best configurations and Pareto front.
TEST(Search, PruningKeepsTheBestAndTheParetoFrontOfTheExhaustiveSearch) {
  const auto base = small_search_base();
  tune::SearchOptions options = small_search_options();
  const auto pruned = tune::search(base, options);
  options.keep_top = 0;
  const auto all = tune::search(base, options);
  EXPECT_GT(pruned.pruned, 0);
  EXPECT_EQ(all.pruned, 0);
  EXPECT_EQ(pruned.simulated + pruned.pruned, all.simulated);
  ASSERT_GE(pruned.ranked.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(pruned.ranked[i].label, all.ranked[i].label) << i;
  ASSERT_EQ(pruned.pareto.size(), all.pareto.size());
  for (std::size_t i = 0; i < all.pareto.size(); ++i) {
    EXPECT_EQ(pruned.ranked[pruned.pareto[i]].label, all.ranked[all.pareto[i]].label);
  }
  // Tensor parallelism is searched: some configuration has tp > 1.
  bool tp = false;
  for (const auto& c : all.ranked) tp = tp || c.scenario.strategy.tp > 1;
  EXPECT_TRUE(tp);
  // Sharding over a single data-parallel replica shards nothing: it is not searched twice.
  bool single_replica = false;
  for (const auto& c : all.ranked) {
    if (c.scenario.strategy.dp != 1) continue;
    single_replica = true;
    EXPECT_EQ(c.scenario.strategy.sharding, scenario::Sharding::none) << c.label;
  }
  EXPECT_TRUE(single_replica);
}

// Simulating several configurations at a time changes nothing: the same counts, the same
// ranking (every metric, bit for bit) and front as one at a time — with pruning, where a
// configuration simulated beside one that would have pruned it must be dropped again.
TEST(Search, ThreadsGiveTheSequentialResultExactly) {
  const auto base = small_search_base();
  tune::SearchOptions options = small_search_options();
  options.threads = 1;
  const auto one = tune::search(base, options);
  for (int threads : {2, 3, 8}) {
    options.threads = threads;
    const auto many = tune::search(base, options);
    EXPECT_EQ(many.simulated, one.simulated) << threads;
    EXPECT_EQ(many.pruned, one.pruned) << threads;
    EXPECT_EQ(many.memory_rejected, one.memory_rejected) << threads;
    ASSERT_EQ(many.ranked.size(), one.ranked.size()) << threads;
    for (std::size_t i = 0; i < one.ranked.size(); ++i) {
      EXPECT_EQ(many.ranked[i].label, one.ranked[i].label) << threads << " " << i;
      EXPECT_EQ(many.ranked[i].step_time_s, one.ranked[i].step_time_s) << threads << " " << i;
      EXPECT_EQ(many.ranked[i].peak_memory_bytes, one.ranked[i].peak_memory_bytes);
    }
    EXPECT_EQ(many.pareto, one.pareto) << threads;
  }
  EXPECT_GT(one.pruned, 0);  // the interesting case: pruning happened
}

}  // namespace
}  // namespace stratagem

namespace stratagem {
namespace {

// The bound the search prunes with never exceeds the simulated step time.
TEST(Search, TheStepTimeLowerBoundHoldsForEveryShippedScenarioAndVariant) {
  int bounded = 0;
  for (const auto& name : scenario::shipped_scenario_names()) {
    const auto base = scenario::load_scenario(name);
    for (const auto& v : tune::make_variants(base, tune::variant_names())) {
      if (!v.scenario) continue;
      SCOPED_TRACE(name + " " + v.name);
      const auto models = sim::make_cost_models(*v.scenario);
      const double bound = tune::step_time_lower_bound(*v.scenario, models);
      const double step =
          sim::Simulator().run(plan::build_plan(*v.scenario), models).metrics.step_time_s;
      EXPECT_LE(bound, step * (1 + 1e-12));
      bounded += bound > 0 ? 1 : 0;
    }
  }
  EXPECT_GT(bounded, 100);
}

// With the Megatron stack's backward overlap and async TP the bound skips the overlapped
// collectives; it still holds, and every compare variant keeps async TP only where it runs.
TEST(Search, TheBoundHoldsWithOverlappedTensorParallelCollectives) {
  for (const char* name : {"3d-fp8-tp8-pp4-llama3-70b-64xh100", "3d-tp8-pp4-llama3-70b-8xh100"}) {
    auto base = scenario::load_scenario(name);
    base.strategy.stack = scenario::Stack::megatron;
    base.strategy.async_tp = true;
    scenario::validate(base);
    int async = 0;
    for (const auto& v : tune::make_variants(base, tune::variant_names())) {
      if (!v.scenario) continue;
      SCOPED_TRACE(std::string(name) + " " + v.name);
      EXPECT_EQ(v.scenario->strategy.async_tp, scenario::async_tp_allowed(v.scenario->strategy));
      async += v.scenario->strategy.async_tp ? 1 : 0;
      const auto models = sim::make_cost_models(*v.scenario);
      const double bound = tune::step_time_lower_bound(*v.scenario, models);
      const double step =
          sim::Simulator().run(plan::build_plan(*v.scenario), models).metrics.step_time_s;
      EXPECT_LE(bound, step * (1 + 1e-12));
    }
    EXPECT_GT(async, 0);
  }
}

}  // namespace
}  // namespace stratagem
