// Compute spread: the expected latest arrival at collectives and transfers.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/plan/builder.hpp"
#include "engine/scenario/profile.hpp"
#include "sim/jitter.hpp"
#include "sim/simulator.hpp"
#include "tests/sim/plan_maker.hpp"

namespace stratagem::test {
namespace {

using plan::CollectiveKind;

const result::Span& span_of(const result::RunResult& r, plan::OpId op) {
  for (const auto& rank : r.ranks) {
    for (const auto& s : rank.spans) {
      if (s.op == op) return s;
    }
  }
  throw std::runtime_error("no span for op " + std::to_string(op));
}

// E[max of n standard normals] (order-statistics tables).
const double kMax2 = 1 / std::sqrt(M_PI);
constexpr double kMax4 = 1.0293754, kMax8 = 1.4236003;

TEST(ExpectedLatest, TwoIdenticalArrivalsIsExact) {
  const auto m = sim::expected_latest({{10.0, 4.0}, {10.0, 4.0}});
  EXPECT_NEAR(m.mean_s, 10.0 + 2.0 * kMax2, 1e-6);
  // Var(max of two standard normals) = 1 - 1/π.
  EXPECT_NEAR(m.variance_s2, 4.0 * (1 - 1 / M_PI), 1e-6);
}

TEST(ExpectedLatest, LargerGroupsApproachTheOrderStatistic) {
  for (auto [n, exact] : {std::pair{4, kMax4}, std::pair{8, kMax8}}) {
    const std::vector<sim::Arrival> same(n, sim::Arrival{5.0, 1.0});
    EXPECT_NEAR(sim::expected_latest(same).mean_s - 5.0, exact, 0.05 * exact) << n;
  }
}

TEST(ExpectedLatest, AnEarlyMemberDoesNotMatterAndNoSpreadIsTheMaximum) {
  EXPECT_NEAR(sim::expected_latest({{0.0, 0.01}, {10.0, 0.01}}).mean_s, 10.0, 1e-9);
  EXPECT_EQ(sim::expected_latest({{3.0, 0}, {7.0, 0}, {5.0, 0}}).mean_s, 7.0);
  // At large absolute times the moments are taken relative to the latest mean.
  EXPECT_NEAR(sim::expected_latest({{1e6, 1e-6}, {1e6, 1e-6}}).mean_s - 1e6, 1e-3 * kMax2, 1e-9);
}

TEST(ComputeJitter, CollectiveStartsAtTheExpectedLatestArrival) {
  PlanMaker pm(2);
  const int g = pm.group({0, 1});
  const auto c0 = pm.compute(0, 2.0);
  const auto c1 = pm.compute(1, 2.0);
  const auto ar = pm.collective(g, CollectiveKind::all_reduce, 0, {0, 1}, {{c0}, {c1}});
  auto models = free_comm_models();
  models.compute_jitter_cv = 0.1;
  const auto r = sim::Simulator().run(pm.finish(), models);
  // Each rank's arrival: mean 2 s, standard deviation 0.2 s.
  for (auto op : ar) EXPECT_NEAR(span_of(r, op).start_s, 2.0 + 0.2 * kMax2, 1e-9);
  models.compute_jitter_cv = 0;
  const auto plain = sim::Simulator().run(pm.plan(), models);
  for (auto op : ar) EXPECT_EQ(span_of(plain, op).start_s, 2.0);
}

TEST(ComputeJitter, SpreadAccumulatesUntilComputeWaitsForCommunication) {
  // Rank timelines drift apart over four ops; an asynchronous collective does not bring them
  // back in step, but compute that waits for one does.
  PlanMaker pm(2);
  const int g = pm.group({0, 1});
  std::vector<plan::OpId> last(2);
  for (int r = 0; r < 2; ++r) {
    for (int k = 0; k < 4; ++k) last[r] = pm.compute(r, 1.0);
  }
  const auto first =
      pm.collective(g, CollectiveKind::all_reduce, 0, {0, 1}, {{last[0]}, {last[1]}});
  std::vector<plan::OpId> after(2);
  for (int r = 0; r < 2; ++r) after[r] = pm.compute(r, 1.0, plan::Phase::forward, 0, {first[r]});
  const auto second =
      pm.collective(g, CollectiveKind::all_reduce, 0, {0, 1}, {{after[0]}, {after[1]}});
  auto models = free_comm_models();
  const double cv = 0.05;
  models.compute_jitter_cv = cv;
  const auto r = sim::Simulator().run(pm.finish(), models);
  // Four independent 1 s ops: σ = 0.05 · √4 per rank.
  const double t1 = 4.0 + 0.05 * 2 * kMax2;
  EXPECT_NEAR(span_of(r, first[0]).start_s, t1, 1e-9);
  // After waiting for it, the ranks start together: the spread is that of the one op since
  // (what they waited for is common to both and makes neither later than the other).
  const double var = cv * cv;
  const double t2 = t1 + 1.0 + std::sqrt(2 * var) / std::sqrt(2 * M_PI);
  EXPECT_NEAR(span_of(r, second[0]).start_s, t2, 1e-9);
}

TEST(ComputeJitter, ASteadilySlowerRankDriftsWithTheComputeSummed) {
  // The same four 1 s ops: a per-rank speed spread of 5 % makes each arrival's σ 0.05 · 4
  // (the errors add up), where an independent spread per op gives 0.05 · √4.
  PlanMaker pm(2);
  const int g = pm.group({0, 1});
  std::vector<plan::OpId> last(2);
  for (int r = 0; r < 2; ++r) {
    for (int k = 0; k < 4; ++k) last[r] = pm.compute(r, 1.0);
  }
  const auto ar = pm.collective(g, CollectiveKind::all_reduce, 0, {0, 1}, {{last[0]}, {last[1]}});
  auto models = free_comm_models();
  models.rank_jitter_cv = 0.05;
  const auto r = sim::Simulator().run(pm.finish(), models);
  EXPECT_NEAR(span_of(r, ar[0]).start_s, 4.0 + 0.2 * kMax2, 1e-9);
  models.compute_jitter_cv = 0.05;  // both: the variances add
  const auto both = sim::Simulator().run(pm.plan(), models);
  EXPECT_NEAR(span_of(both, ar[0]).start_s, 4.0 + std::sqrt(0.04 + 0.01) * kMax2, 1e-9);
}

TEST(ComputeJitter, TransfersWaitForTheLaterEndOnly) {
  PlanMaker pm(2);
  const auto work = pm.compute(0, 10.0);
  const auto [snd, rcv] = pm.p2p(0, 1, 0, {work}, {});
  auto models = free_comm_models();
  models.compute_jitter_cv = 0.01;
  const auto r = sim::Simulator().run(pm.finish(), models);
  // The receiver has no spread and is posted long before: the transfer starts when the sender
  // is expected.
  EXPECT_NEAR(span_of(r, rcv).start_s, 10.0, 1e-9);
  EXPECT_NEAR(span_of(r, snd).start_s, 10.0, 1e-9);
}

TEST(ComputeJitter, MeasuredSpreadTravelsFromProfileToCostModels) {
  auto s = scenario::load_scenario(std::string(STRATAGEM_SOURCE_DIR) +
                                   "/scenarios/validate-cpu-zero3.json");
  scenario::MeasuredUnits m;
  m.shape = scenario::unit_shape_key(s);
  m.block_forward = 10e-3;
  m.block_backward = 20e-3;
  m.jitter_cv = 0.15;
  m.rank_cv = 0.05;
  const auto json = scenario::measured_units_json({m});
  const auto back = scenario::parse_measured_units(json, "units");
  ASSERT_EQ(back.size(), 1u);
  EXPECT_DOUBLE_EQ(back[0].jitter_cv, 0.15);
  EXPECT_DOUBLE_EQ(back[0].rank_cv, 0.05);
  s.cluster.gpu.measured_units = back;
  EXPECT_DOUBLE_EQ(sim::make_cost_models(s).compute_jitter_cv, 0.15);
  EXPECT_DOUBLE_EQ(sim::make_cost_models(s).rank_jitter_cv, 0.05);
  sim::CostOptions o;
  o.compute_jitter_cv = 0;
  o.rank_jitter_cv = 0;
  EXPECT_EQ(sim::make_cost_models(s, o).compute_jitter_cv, 0);
  EXPECT_FALSE(sim::make_cost_models(s, o).has_jitter());

  // A ZeRO-3 step, whose every gather and reduce-scatter synchronises the ranks, gets slower.
  const auto plan = plan::build_plan(s);
  const double with = sim::Simulator().run(plan, sim::make_cost_models(s)).metrics.step_time_s;
  const double without =
      sim::Simulator().run(plan, sim::make_cost_models(s, o)).metrics.step_time_s;
  EXPECT_GT(with, without * 1.02);
}

}  // namespace
}  // namespace stratagem::test

namespace stratagem::test {
namespace {

TEST(ComputeJitter, FoldedPlansWaitForTheMembersTheyDoNotBuild) {
  auto s = scenario::load_scenario(std::string(STRATAGEM_SOURCE_DIR) +
                                   "/scenarios/validate-cpu-zero3.json");
  s.strategy.dp = 8;
  s.cluster.nodes = 1;
  s.cluster.gpus_per_node = 8;
  s.training.global_batch = 64;
  sim::CostOptions o;
  o.compute_jitter_cv = 0.1;
  const auto models = sim::make_cost_models(s, o);
  const double folded = sim::Simulator().run(plan::build_plan(s), models).metrics.step_time_s;
  const double full =
      sim::Simulator().run(plan::build_plan(s, {.fold = false}), models).metrics.step_time_s;
  EXPECT_NEAR(folded, full, 0.05 * full);
  o.compute_jitter_cv = 0;
  o.rank_jitter_cv = 0.05;
  const auto rank_models = sim::make_cost_models(s, o);
  const double folded_rank = sim::Simulator().run(plan::build_plan(s), rank_models).metrics.step_time_s;
  const double full_rank =
      sim::Simulator().run(plan::build_plan(s, {.fold = false}), rank_models).metrics.step_time_s;
  EXPECT_NEAR(folded_rank, full_rank, 0.05 * full_rank);
  o.rank_jitter_cv = 0;
  EXPECT_GT(folded_rank, 1.01 * sim::Simulator()
                                    .run(plan::build_plan(s), sim::make_cost_models(s, o))
                                    .metrics.step_time_s);
}

// A rank that is steadily 2 % slow costs each synchronisation the expected maximum of the
// ranks' drift since they last waited — once, not again for every collective queued behind it
// on a stream (which turned 2 % into a 10× longer step of the default scenario).
TEST(ComputeJitter, RankSpreadCostsTheExpectedMaximumNotACompoundedOne) {
  const auto s = scenario::load_scenario("default");
  sim::CostOptions o;
  const double base = sim::Simulator().run(plan::build_plan(s), sim::make_cost_models(s, o))
                          .metrics.step_time_s;
  double previous = base;
  for (double cv : {0.005, 0.01, 0.02, 0.05}) {
    o.rank_jitter_cv = cv;
    const double t = sim::Simulator().run(plan::build_plan(s), sim::make_cost_models(s, o))
                         .metrics.step_time_s;
    // It grows with the spread and stays below the slowest of 8 ranks' drift over the whole
    // step (1.42 σ) counted three times.
    EXPECT_GT(t, previous) << cv;
    EXPECT_LT(t, base * (1 + 3 * 1.42 * cv)) << cv;
    previous = t;
  }
}

TEST(ExpectedLatest, CopiesOfOneArrival) {
  const auto one = sim::expected_latest_of_copies({2.0, 0.25}, 1);
  EXPECT_EQ(one.mean_s, 2.0);
  const auto four = sim::expected_latest_of_copies({2.0, 0.25}, 4);
  EXPECT_NEAR(four.mean_s, 2.0 + 0.5 * 1.0293754, 0.05 * 0.5);
}

}  // namespace
}  // namespace stratagem::test

namespace stratagem::test {
namespace {

TEST(AverageUnits, RanksAddTheSpreadOfTheirMeansRunsPoolTheirs) {
  scenario::MeasuredUnits a, b;
  a.shape = b.shape = "s";
  a.block_forward = 0.010, a.block_backward = 0.020, a.jitter_cv = 0.1, a.rank_cv = 0.02;
  b.block_forward = 0.020, b.block_backward = 0.030, b.jitter_cv = 0.0, b.rank_cv = 0.04;
  a.head_forward = 1, b.head_forward = 3;
  // Blocks of 30 and 50 ms: mean 40 ms; per-repetition spread 3 ms and 0 ms.
  const auto ranks = scenario::average_units({a, b}, true);
  EXPECT_EQ(ranks.shape, "s");
  EXPECT_DOUBLE_EQ(ranks.head_forward, 2);
  EXPECT_DOUBLE_EQ(ranks.block_forward, 0.015);
  EXPECT_NEAR(ranks.jitter_cv, std::sqrt(0.003 * 0.003 / 2) / 0.040, 1e-12);
  EXPECT_NEAR(ranks.rank_cv, 0.010 / 0.040, 1e-12);  // the means' standard deviation, 10 ms
  const auto runs = scenario::average_units({a, b}, false);
  EXPECT_NEAR(runs.jitter_cv, ranks.jitter_cv, 1e-12);
  EXPECT_NEAR(runs.rank_cv, std::sqrt((0.0006 * 0.0006 + 0.002 * 0.002) / 2) / 0.040, 1e-12);
  EXPECT_EQ(scenario::average_units({}, true).block_forward, 0);
}

}  // namespace
}  // namespace stratagem::test
