// Cross-checks between the parts: the analytic memory model against the simulated plan, folded
// against unfolded simulation, and the simulator's response to strategy knobs.
#include <gtest/gtest.h>

#include "engine/plan/builder.hpp"
#include "engine/result/result.hpp"
#include "engine/scenario/presets.hpp"
#include "sim/simulator.hpp"
#include "tests/plan/plan_test_util.hpp"

namespace stratagem {
namespace {

result::RunResult simulate(const scenario::Scenario& s, bool fold = true) {
  return sim::Simulator().run(plan::build_plan(s, {.fold = fold}), sim::make_cost_models(s));
}

// The analytic memory model against the simulated peak: tests/memory/test_plan_agreement.cpp.

TEST(Agreement, FoldedAndUnfoldedSimulationsAgree) {
  for (const auto& name : scenario::shipped_scenario_names()) {
    SCOPED_TRACE(name);
    const auto s = scenario::load_scenario(name);
    const auto folded = simulate(s, true);
    const auto full = simulate(s, false);
    EXPECT_DOUBLE_EQ(folded.metrics.step_time_s, full.metrics.step_time_s);
    EXPECT_NEAR(folded.metrics.bubble_fraction, full.metrics.bubble_fraction, 1e-12);
    EXPECT_NEAR(folded.metrics.exposed_comm_s, full.metrics.exposed_comm_s, 1e-12);
    for (std::size_t r = 0; r < full.ranks.size(); ++r) {
      EXPECT_DOUBLE_EQ(folded.resolved(static_cast<int>(r)).peak_memory_bytes,
                       full.ranks[r].peak_memory_bytes);
    }
  }
}

TEST(Agreement, SimulationIsDeterministic) {
  const auto s = scenario::load_scenario("default");
  EXPECT_EQ(result::to_json(simulate(s)).dump(), result::to_json(simulate(s)).dump());
}

TEST(Agreement, SmallerDdpBucketsExposeLessCommunication) {
  auto exposed = [](double bucket_mb) {
    const auto s = test::small_scenario({{"dp", 8},
                                         {"micro_batch_size", 4},
                                         {"mixed_precision", "bf16"},
                                         {"bucket_mb", bucket_mb}});
    return simulate(s).metrics.exposed_comm_s;
  };
  const double one_bucket = exposed(1e6);
  const double default_buckets = exposed(25);
  EXPECT_GT(one_bucket, 0);
  EXPECT_LT(default_buckets, one_bucket) << "overlap with backward must hide communication";
}

TEST(Agreement, OneFOneBMatchesGPipeTimeWithLessMemory) {
  auto run = [](const char* schedule) {
    return simulate(test::small_scenario({{"dp", 2},
                                          {"pp", 4},
                                          {"schedule", schedule},
                                          {"grad_accum", 16},
                                          {"mixed_precision", "bf16"}}));
  };
  const auto gpipe = run("gpipe");
  const auto ofob = run("1f1b");
  const auto inter = simulate(test::small_scenario({{"dp", 2},
                                                    {"pp", 4},
                                                    {"schedule", "interleaved"},
                                                    {"chunks", 2},
                                                    {"grad_accum", 16},
                                                    {"mixed_precision", "bf16"}}));
  EXPECT_NEAR(ofob.metrics.bubble_fraction, gpipe.metrics.bubble_fraction, 0.02);
  EXPECT_LT(ofob.ranks[0].peak_memory_bytes, gpipe.ranks[0].peak_memory_bytes);
  EXPECT_LT(inter.metrics.bubble_fraction, ofob.metrics.bubble_fraction);
}

}  // namespace
}  // namespace stratagem
