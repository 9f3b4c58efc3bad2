// Compute contention between a node's ranks (scenario::CommCalibration::compute_contention): the
// profile's compute times hold for every process computing at once; a rank computing alone
// runs faster, a folded replica computes with its representative.
#include <gtest/gtest.h>

#include "engine/plan/builder.hpp"
#include "engine/scenario/profile.hpp"
#include "engine/scenario/scenario.hpp"
#include "sim/cost_models.hpp"
#include "sim/simulator.hpp"
#include "tests/calib/gloo_profile.hpp"

namespace stratagem::test {
namespace {

scenario::Scenario with_contention(const std::string& name, double contention) {
  auto s =
      scenario::load_scenario(std::string(STRATAGEM_SOURCE_DIR) + "/scenarios/" + name + ".json");
  scenario::CommCalibration c;
  c.profile = "test";
  c.processes = 2;
  for (auto& m : c.ops) m = {100e-6, 0.5e9, 0.0, 0.0};
  c.compute_contention = contention;
  s.cluster.calibration = c;
  return s;
}

double step(const scenario::Scenario& s, bool fold = true) {
  sim::Simulator sim;
  return sim.run(plan::build_plan(s, {.fold = fold}), sim::make_cost_models(s)).metrics.step_time_s;
}

TEST(Contention, RateIsOneWithTheMeasuredProcessCountAndFasterAlone) {
  sim::CostModels m;
  m.compute_contention = 1.0;
  m.contention_processes = 2;
  EXPECT_DOUBLE_EQ(m.contention_rate(2), 1.0);
  EXPECT_DOUBLE_EQ(m.contention_rate(1), 2.0);
  EXPECT_DOUBLE_EQ(m.contention_rate(0), 2.0);  // counts below one are the op itself
  m.contention_processes = 4;
  m.compute_contention = 0.5;
  EXPECT_DOUBLE_EQ(m.contention_rate(4), 1.0);
  EXPECT_DOUBLE_EQ(m.contention_rate(2), 2.5 / 1.5);
}

TEST(Contention, DataParallelRanksAlwaysComputeTogether) {
  // DDP's two ranks run the same compute at the same moments: the measured (together) times
  // hold throughout, folded (one rank stands for both) or not.
  const auto base = with_contention("validate-cpu-ddp", 0.0);
  const auto shared = with_contention("validate-cpu-ddp", 1.0);
  EXPECT_NEAR(step(shared), step(base), 1e-12);
  EXPECT_NEAR(step(shared, false), step(base, false), 1e-9);
}

TEST(Contention, PipelineStagesTakingTurnsRunFaster) {
  // 1F1B over two stages: in the warm-up and cool-down one stage computes while the other
  // waits, so with contention the step is shorter, but never shorter than all compute at the
  // alone rate (2x here).
  const double base = step(with_contention("validate-cpu-1f1b", 0.0));
  const double shared = step(with_contention("validate-cpu-1f1b", 1.0));
  EXPECT_LT(shared, 0.97 * base);
  EXPECT_GT(shared, 0.5 * base);
}

TEST(Contention, TravelsFromProfileToCostModels) {
  scenario::HardwareProfile p = gloo_profile("shared");
  p.overlap.compute_contention = 0.8;
  p.overlap.compute_each_alone_s = 10e-3;
  p.overlap.compute_each_together_s = 18e-3;
  const auto q = scenario::parse_profile(scenario::to_json(p), "mem");
  EXPECT_DOUBLE_EQ(q.overlap.compute_contention, 0.8);
  EXPECT_DOUBLE_EQ(q.overlap.compute_each_together_s, 18e-3);
  auto s = scenario::load_scenario(std::string(STRATAGEM_SOURCE_DIR) +
                                   "/scenarios/validate-cpu-1f1b.json");
  scenario::apply_profile(s, q);
  const auto again =
      scenario::parse_scenario(scenario::to_json(s), "again");  // the result's scenario
  const auto m = sim::make_cost_models(again);
  EXPECT_DOUBLE_EQ(m.compute_contention, 0.8);
  EXPECT_EQ(m.contention_processes, 2);
}

}  // namespace
}  // namespace stratagem::test
