// calibrate --measured (sim/measured_fit.hpp, engine/scenario/fitted_profile.hpp): the fit recovers
// known multipliers from runs simulated with them, leaves what no run depends on undetermined,
// and its profile round-trips, applies to the matching GPU only and rejects bad files by path.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "engine/plan/builder.hpp"
#include "engine/scenario/error.hpp"
#include "engine/scenario/fitted_profile.hpp"
#include "engine/scenario/scenario.hpp"
#include "tune/measured_fit.hpp"

namespace stratagem::tune {
namespace {

using scenario::FitParam;

double& at(scenario::FitValues& v, FitParam p) {
  return v[static_cast<int>(p)];
}

// Shipped one-node A100 scenarios with different mixes of GEMM, attention, memory-bound work
// and communication; "measured" = simulated with `truth` applied.
std::vector<MeasuredRun> synthetic_runs(const scenario::FitValues& truth) {
  const char* names[] = {"fsdp-full-shard-llama2-7b-8xa100",
                         "ddp-gpt2-xl-8xa100",
                         "zero1-gpt2-xl-8xa100",
                         "gpipe-gpt3-2.7b-8xa100",
                         "zero2-llama2-7b-selective-8xa100",
                         "fsdp-shard-grad-op-gpt2-xl-8xa100",
                         "1f1b-dp2-pp4-gpt3-6.7b-8xa100",
                         "ddp-bert-large-fp32-8xa100"};
  std::vector<MeasuredRun> runs;
  for (const char* n : names) {
    MeasuredRun r;
    r.id = n;
    r.scenario = scenario::load_scenario(n);
    r.tokens_per_s_per_gpu = 1;  // given as a throughput (predicted then is one too)
    scenario::Scenario truth_scenario = r.scenario;
    scenario::apply_fit_values(truth_scenario, truth);
    const auto c = predict_measured(r, truth_scenario, plan::build_plan(r.scenario));
    r.tokens_per_s_per_gpu = c.predicted;
    runs.push_back(std::move(r));
  }
  return runs;
}

TEST(MeasuredFit, RecoversKnownMultipliers) {
  scenario::FitValues truth = scenario::neutral_values();
  at(truth, FitParam::gemm) = 0.8;
  at(truth, FitParam::attention) = 0.6;
  at(truth, FitParam::hbm) = 0.7;
  const auto runs = synthetic_runs(truth);
  for (const auto& r : runs) EXPECT_GT(std::abs(log_residual(r, scenario::neutral_values())), 0.01);
  MeasuredFitOptions o;
  o.threads = 2;
  const scenario::FittedProfile p = fit_measured_runs(runs, o);
  ASSERT_EQ(p.gpus.size(), 1u);
  const scenario::GpuFit& g = p.gpus.front();
  EXPECT_EQ(g.gpu, "a100-80gb");
  EXPECT_EQ(g.runs, 8);
  const auto& v = g.parameters;
  EXPECT_NEAR(v[static_cast<int>(FitParam::gemm)].value, 0.8, 0.01);
  EXPECT_NEAR(v[static_cast<int>(FitParam::hbm)].value, 0.7, 0.02);
  EXPECT_NEAR(v[static_cast<int>(FitParam::attention)].value, 0.6, 0.05);
  // One node: no run crosses the inter-node link, so the fit cannot say anything about it.
  EXPECT_FALSE(v[static_cast<int>(FitParam::inter_link)].determined);
  EXPECT_DOUBLE_EQ(v[static_cast<int>(FitParam::inter_link)].value, 1.0);
  EXPECT_GT(g.median_abs_error_before, 0.1);
  EXPECT_LT(g.median_abs_error_after, 0.005);
  EXPECT_LT(g.median_abs_error_loo, 0.01);
  // The fitted values reproduce the measurements.
  for (const auto& r : runs) EXPECT_LT(std::abs(log_residual(r, g.values())), 0.01) << r.id;
}

TEST(MeasuredFit, ProfileRoundTripsAndAppliesToItsGpuOnly) {
  scenario::FittedProfile p;
  p.name = "team";
  p.measured = "runs.jsonl";
  scenario::GpuFit g;
  g.gpu = "a100-80gb";
  g.runs = 3;
  for (auto& v : g.parameters) v = {1.0, 0.0, true};
  g.parameters[static_cast<int>(FitParam::gemm)] = {0.5, 0.01, true};
  g.parameters[static_cast<int>(FitParam::comm_compute_slowdown)] = {0.2, 0.05, true};
  g.parameters[static_cast<int>(FitParam::inter_link)] = {1.0, 0.0, false};
  p.gpus.push_back(g);
  const std::string file = testing::TempDir() + "/measured_fit_profile.json";
  scenario::save_fitted_profile(p, file);

  scenario::Scenario s = scenario::load_scenario("ddp-gpt2-xl-8xa100");
  const double hbm = s.cluster.gpu.hbm_bandwidth;
  scenario::apply_profile_file(s, file);
  EXPECT_DOUBLE_EQ(s.cluster.gpu.gemm_scale, 0.5);
  EXPECT_DOUBLE_EQ(s.cluster.gpu.hbm_bandwidth, hbm);
  ASSERT_TRUE(s.cluster.gpu.comm_compute_slowdown);
  EXPECT_DOUBLE_EQ(*s.cluster.gpu.comm_compute_slowdown, 0.2);
  // The scaled GPU survives a scenario's JSON round trip (workers, exported scenarios).
  const auto back = scenario::parse_cluster(scenario::to_json(s.cluster), "cluster");
  EXPECT_DOUBLE_EQ(back.gpu.gemm_scale, 0.5);
  EXPECT_DOUBLE_EQ(*back.gpu.comm_compute_slowdown, 0.2);
  // Half the GEMM efficiency: a GEMM-bound step gets slower.
  const auto plain = scenario::load_scenario("ddp-gpt2-xl-8xa100");
  MeasuredRun run{"x", plain, 1.0, 0, {}, "table"};
  EXPECT_LT(predict_measured(run, s, plan::build_plan(plain)).predicted,
            predict_measured(run, plain, plan::build_plan(plain)).predicted);

  scenario::Scenario h100 = scenario::load_scenario("fsdp-full-shard-llama3-8b-8xh100");
  try {
    scenario::apply_profile_file(h100, file);
    FAIL() << "applied to another GPU";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.path(), "--profile");
    EXPECT_NE(std::string(e.what()).find("a100-80gb"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("h100"), std::string::npos) << e.what();
  }
}

TEST(MeasuredFit, BadProfilesNameTheirPath) {
  auto expect_error = [](const std::string& text, const std::string& path_part) {
    const std::string file = testing::TempDir() + "/bad_fitted.json";
    std::ofstream(file) << text;
    scenario::Scenario s = scenario::load_scenario("ddp-gpt2-xl-8xa100");
    try {
      scenario::apply_profile_file(s, file);
      ADD_FAILURE() << "accepted " << text;
    } catch (const SpecError& e) {
      EXPECT_NE(std::string(e.what()).find(path_part), std::string::npos) << e.what();
    }
  };
  const std::string head = R"({"format": "stratagem-fitted-profile", "version": 1, )";
  expect_error(head + R"("name": "x"})", "gpus");
  expect_error(head + R"("gpus": {}})", "gpus");
  expect_error(head + R"("gpus": {"a100-80gb": {"runs": 2}}})", "gpus.a100-80gb.parameters");
  expect_error(head + R"("gpus": {"a100-80gb": {"runs": 2, "parameters": {"gemm_scale": )"
                      R"({"value": -1}}}}})",
               "gemm_scale.value");
  expect_error(head + R"("gpus": {"a100-80gb": {"runs": 2, "parameters": {"gemm_scal": )"
                      R"({"value": 1}}}}})",
               "gemm_scal");
  expect_error(R"({"format": "stratagem-fitted-profile", "version": 9, "gpus": {}})", "version");
}

TEST(MeasuredFit, NoRunsIsAnError) {
  EXPECT_THROW(fit_measured_runs({}), SpecError);
}

}  // namespace
}  // namespace stratagem::tune
