// Cold starts: a collective that one of its ranks starts with no communication in flight
// (issued after compute, not queued behind another) pays the profile's measured wake-up
// extra; one that follows another collective at once does not.
#include <gtest/gtest.h>

#include <algorithm>
#include <utility>

#include "engine/plan/builder.hpp"
#include "engine/scenario/profile.hpp"
#include "engine/scenario/scenario.hpp"
#include "sim/cost_models.hpp"
#include "sim/simulator.hpp"
#include "tests/calib/gloo_profile.hpp"

namespace stratagem::test {
namespace {

scenario::Scenario tp_with_cold_start(scenario::CommOp op, double cold_s) {
  auto s = scenario::load_scenario(std::string(STRATAGEM_SOURCE_DIR) +
                                   "/scenarios/tp2-cpu-gpt-tiny.json");
  scenario::CommCalibration c;
  c.profile = "test";
  c.processes = 2;
  for (auto& m : c.ops) m = {100e-6, 0.5e9, 0.0, 0.0};
  c.ops[static_cast<int>(op)].cold_start_s = cold_s;
  s.cluster.calibration = c;
  return s;
}

// Rank 0's spans of `kind` that start cold: no communication of the rank in flight or
// ending at that instant.
std::pair<int, int> cold_starts(const result::RunResult& r, result::SpanKind kind) {
  const auto& spans = r.ranks[0].spans;
  int all = 0, cold = 0;
  for (const auto& x : spans) {
    if (x.kind != kind) continue;
    ++all;
    const bool warm_start = std::any_of(spans.begin(), spans.end(), [&](const result::Span& y) {
      return &y != &x && !result::is_compute(y.kind) && y.start_s < x.start_s &&
             y.end_s >= x.start_s;
    });
    if (!warm_start) ++cold;
  }
  return {all, cold};
}

TEST(ColdStart, CollectivesIssuedAfterComputePayTheExtraOthersDoNot) {
  // tp 2 with sequence parallelism, dp 1: every op of a rank is on its critical path and its
  // peer's chain is the same. Each reduce-scatter follows a block's compute (cold), each
  // all-gather follows a reduce-scatter or all-reduce at once (warm).
  sim::Simulator sim;
  const auto base = tp_with_cold_start(scenario::CommOp::reduce_scatter, 0.0);
  const auto a = sim.run(plan::build_plan(base), sim::make_cost_models(base));
  const auto [reduce_scatters, cold_rs] = cold_starts(a, result::SpanKind::reduce_scatter);
  const auto [all_gathers, cold_ag] = cold_starts(a, result::SpanKind::all_gather);
  ASSERT_GT(reduce_scatters, 0);
  ASSERT_GT(all_gathers, 0);
  EXPECT_EQ(cold_rs, reduce_scatters);
  EXPECT_EQ(cold_ag, 0);

  const auto rs = tp_with_cold_start(scenario::CommOp::reduce_scatter, 1e-3);
  const auto b = sim.run(plan::build_plan(rs), sim::make_cost_models(rs));
  EXPECT_NEAR(b.metrics.step_time_s - a.metrics.step_time_s, cold_rs * 1e-3, 1e-9);

  const auto ag = tp_with_cold_start(scenario::CommOp::all_gather, 1e-3);
  const auto c = sim.run(plan::build_plan(ag), sim::make_cost_models(ag));
  EXPECT_NEAR(c.metrics.step_time_s, a.metrics.step_time_s, 1e-12);
}

TEST(ColdStart, TravelsFromProfileToCostModels) {
  scenario::HardwareProfile p = gloo_profile("cold");
  auto& rs = p.network->ops[scenario::CommOp::reduce_scatter];
  rs.cold_start_s = 700e-6;
  rs.cold_start_back_to_back_s = 500e-6;
  rs.cold_start_after_compute_s = 1200e-6;
  rs.cold_start_bytes = 262144;
  const auto q = scenario::parse_profile(scenario::to_json(p), "mem");
  EXPECT_DOUBLE_EQ(q.network->ops.at(scenario::CommOp::reduce_scatter).cold_start_s, 700e-6);
  EXPECT_DOUBLE_EQ(q.network->ops.at(scenario::CommOp::reduce_scatter).cold_start_bytes, 262144);
  auto s = scenario::load_scenario(std::string(STRATAGEM_SOURCE_DIR) +
                                   "/scenarios/validate-cpu-ddp.json");
  scenario::apply_profile(s, q);
  const auto again =
      scenario::parse_scenario(scenario::to_json(s), "again");  // the result's scenario
  const auto m = sim::make_cost_models(again);
  EXPECT_DOUBLE_EQ(m.cold_start_s[static_cast<int>(scenario::CommOp::reduce_scatter)], 700e-6);
  EXPECT_DOUBLE_EQ(m.cold_start_s[static_cast<int>(scenario::CommOp::all_gather)], 0.0);
}

}  // namespace
}  // namespace stratagem::test
