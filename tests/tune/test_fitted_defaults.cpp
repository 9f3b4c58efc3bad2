// The presets' fitted GEMM maxima (issue #40 item 3, bench/fit_defaults.py) are what the fit
// gives: the fitted curves are those its record (validation/cross-validation.json) adopted,
// and each is at the fit's fixed point, so the same fit run from the shipped values finds a
// scale within rounding of 1. And the pieces the
// fit is made of: leave-one-source-out by table, GPUs of one chip fitted together, and a
// parameter the runs barely depend on left undetermined.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/plan/builder.hpp"
#include "engine/scenario/cluster.hpp"
#include "engine/scenario/error.hpp"
#include "engine/scenario/fitted_profile.hpp"
#include "engine/scenario/presets.hpp"
#include "engine/scenario/scenario.hpp"
#include "tune/cross_validation.hpp"
#include "tune/measured_fit.hpp"

namespace stratagem::tune {
namespace {

using scenario::FitParam;

scenario::GpuSpec gpu_preset(const std::string& name) {
  scenario::GpuSpec g = scenario::parse_gpu(
      scenario::resolve_preset(scenario::PresetKind::gpu, nlohmann::json(name), "gpu"), "gpu");
  g.name = name;
  return g;
}

std::vector<MeasuredRun> validation_runs() {
  std::vector<std::string> files;
  for (const auto& e :
       std::filesystem::directory_iterator(std::string(STRATAGEM_SOURCE_DIR) + "/validation")) {
    if (e.path().extension() == ".jsonl") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  std::vector<MeasuredRun> runs;
  for (const auto& f : files) {
    auto more = load_measured_runs(f);
    runs.insert(runs.end(), more.begin(), more.end());
  }
  return runs;
}

TEST(FittedDefaults, ShippedGemmMaximaAreTheFitsFixedPoint) {
  std::ifstream in(std::string(STRATAGEM_SOURCE_DIR) + "/scenarios/presets/gpus.json");
  const auto presets = nlohmann::json::parse(in);
  // GPU name → the FitParam of each fitted curve.
  std::map<std::string, std::vector<FitParam>> fitted;
  for (const auto& [gpu, spec] : presets.items()) {
    for (const auto& [key, param] : {std::pair{"matmul_efficiency", FitParam::gemm},
                                     std::pair{"fp8_matmul_efficiency", FitParam::gemm_fp8}}) {
      if (!spec.is_object() || !spec.contains(key)) continue;
      const auto& curve = spec[key];
      if (!curve.contains("source")) continue;
      if (curve["source"].get<std::string>().find("bench/fit_defaults.py") == std::string::npos) {
        continue;
      }
      EXPECT_TRUE(curve.contains("prior")) << gpu << " " << key << ": the value before the fit";
      fitted[gpu].push_back(param);
    }
  }
  // The presets fitted are those bench/fit_defaults.py's record says it adopted.
  std::ifstream record_in(std::string(STRATAGEM_SOURCE_DIR) + "/validation/cross-validation.json");
  const auto record = nlohmann::json::parse(record_in);
  std::set<std::string> adopted, shipped;
  for (const auto& [key, _] : record.at("adopted").items()) adopted.insert(key);
  for (const auto& [gpu, params] : fitted) {
    for (FitParam fp : params) shipped.insert(gpu + " " + scenario::to_string(fp));
  }
  EXPECT_EQ(adopted, shipped) << "rerun python3 bench/fit_defaults.py --write";
  if (fitted.empty()) return;  // nothing adopted: nothing to refit
  // The fit is per chip; the runs of the fitted GPUs' chips are all it needs.
  std::set<std::string> chips;
  for (const auto& [gpu, _] : fitted) {
    chips.insert(chip_of(gpu_preset(gpu)));
  }
  std::vector<MeasuredRun> runs;
  for (auto& r : validation_runs()) {
    if (chips.count(chip_of(r.scenario.cluster.gpu))) runs.push_back(std::move(r));
  }
  ASSERT_FALSE(runs.empty());
  MeasuredFitOptions o;  // bench/fit_defaults.py's FIT_ARGS
  o.parameters = {FitParam::gemm, FitParam::gemm_fp8};
  o.per_chip = true;
  o.min_sensitivity = 0.25;
  const scenario::FittedProfile p = fit_measured_runs(runs, o);
  for (const auto& [gpu, params] : fitted) {
    const scenario::GpuFit* g = p.find(gpu);
    ASSERT_NE(g, nullptr) << gpu << " has no runs in validation/";
    for (FitParam fp : params) {
      const auto& v = g->parameters[static_cast<int>(fp)];
      EXPECT_TRUE(v.determined) << gpu << " " << scenario::to_string(fp);
      // Rounded to 3 digits of a maximum near 0.8: within 0.07 % of it.
      EXPECT_NEAR(v.value, 1.0, 0.0015)
          << gpu << " " << scenario::to_string(fp)
          << ": rerun python3 bench/fit_defaults.py --write, rebuild, until nothing moves";
    }
  }
}

// Runs "measured" as simulated with the GEMM 10 % slower, tagged with two sources.
std::vector<MeasuredRun> two_tables(double gemm) {
  const char* names[] = {"ddp-gpt2-xl-8xa100", "zero1-gpt2-xl-8xa100",
                         "fsdp-full-shard-llama2-7b-8xa100", "1f1b-dp2-pp4-gpt3-6.7b-8xa100"};
  std::vector<MeasuredRun> runs;
  int i = 0;
  for (const char* n : names) {
    MeasuredRun r;
    r.id = n;
    r.source = i++ % 2 ? "b" : "a";
    r.scenario = scenario::load_scenario(n);
    scenario::Scenario truth = r.scenario;
    scenario::FitValues v = scenario::neutral_values();
    v[static_cast<int>(FitParam::gemm)] = gemm;
    scenario::apply_fit_values(truth, v);
    r.tokens_per_s_per_gpu = 1;
    r.tokens_per_s_per_gpu = predict_measured(r, truth, plan::build_plan(r.scenario)).predicted;
    runs.push_back(std::move(r));
  }
  return runs;
}

TEST(FittedDefaults, LeaveOneSourceOutPredictsEachTableFromTheOther) {
  MeasuredFitOptions o;
  o.threads = 2;
  o.parameters = {FitParam::gemm};
  const CrossValidation cv = leave_one_source_out(two_tables(0.9), o);
  ASSERT_EQ(cv.folds.size(), 2u);
  for (const auto& f : cv.folds) {
    EXPECT_EQ(f.runs, 2);
    EXPECT_EQ(f.fitted_gpus, std::vector<std::string>{"a100-80gb"});
    // Unfitted, the presets are ~10 % optimistic; the other table's fit recovers the truth.
    EXPECT_GT(f.unfitted.signed_median, 0.03) << f.source;
    EXPECT_LT(f.held_out.median_abs, 0.002) << f.source;
    const auto* g = f.fit.find("a100-80gb");
    ASSERT_NE(g, nullptr);
    EXPECT_NEAR(g->parameters[static_cast<int>(FitParam::gemm)].value, 0.9, 0.01);
  }
  // One table only: nothing to hold out.
  auto one = two_tables(0.9);
  for (auto& r : one) r.source = "a";
  EXPECT_THROW(leave_one_source_out(one, o), SpecError);
}

TEST(FittedDefaults, GpusOfOneChipShareAFitAndWeakParametersStayNeutral) {
  auto runs = two_tables(0.9);
  // The same chip with other memory: A100 SXM 40 GB.
  MeasuredRun small = runs.front();
  small.id = "on a100-40gb";
  small.scenario.cluster.gpu = gpu_preset("a100-40gb");
  small.scenario.cluster.gpu.gemm_scale = 0.9;
  small.tokens_per_s_per_gpu = 1;
  small.tokens_per_s_per_gpu =
      predict_measured(small, small.scenario, plan::build_plan(small.scenario)).predicted;
  small.scenario.cluster.gpu.gemm_scale = 1.0;
  runs.push_back(small);
  EXPECT_EQ(chip_of(runs.front().scenario.cluster.gpu), chip_of(small.scenario.cluster.gpu));
  EXPECT_NE(chip_of(runs.front().scenario.cluster.gpu), chip_of(gpu_preset("h100-80gb")));
  MeasuredFitOptions o;
  o.threads = 2;
  o.parameters = {FitParam::gemm, FitParam::gemm_fp8};
  o.per_chip = true;
  const auto p = fit_measured_runs(runs, o);
  ASSERT_EQ(p.gpus.size(), 2u);
  for (const auto& g : p.gpus) {
    EXPECT_EQ(g.runs, 5) << g.gpu;
    EXPECT_NEAR(g.parameters[static_cast<int>(FitParam::gemm)].value, 0.9, 0.01) << g.gpu;
    // No run is fp8: the fp8 GEMM scale is not determined and stays 1.
    EXPECT_FALSE(g.parameters[static_cast<int>(FitParam::gemm_fp8)].determined);
    EXPECT_DOUBLE_EQ(g.parameters[static_cast<int>(FitParam::gemm_fp8)].value, 1.0);
  }
  // Every run's throughput moves by less than 1.5 times the GEMM scale's change: with that
  // floor nothing is determined and the fit keeps the presets.
  o.min_sensitivity = 1.5;
  const auto none = fit_measured_runs(runs, o);
  for (const auto& g : none.gpus) {
    EXPECT_FALSE(g.parameters[static_cast<int>(FitParam::gemm)].determined);
    EXPECT_DOUBLE_EQ(g.parameters[static_cast<int>(FitParam::gemm)].value, 1.0);
  }
}

TEST(FittedDefaults, Fp8GemmScaleMovesOnlyFp8Gemms) {
  scenario::Scenario s = scenario::load_scenario("fsdp-full-shard-llama3-8b-8xh100");
  MeasuredRun run;
  run.id = "x";
  run.scenario = s;
  run.tokens_per_s_per_gpu = 1;
  const auto plan = plan::build_plan(s);
  const double base = predict_measured(run, s, plan).predicted;
  scenario::Scenario scaled = s;
  scaled.cluster.gpu.fp8_gemm_scale = 0.5;
  EXPECT_DOUBLE_EQ(predict_measured(run, scaled, plan).predicted, base)
      << "a bf16 run has no fp8 GEMMs";
  const scenario::Scenario fp8 = scenario::load_scenario("3d-fp8-tp8-pp4-llama3-70b-64xh100");
  const auto fp8_plan = plan::build_plan(fp8);
  scenario::Scenario fp8_scaled = fp8;
  fp8_scaled.cluster.gpu.fp8_gemm_scale = 0.5;
  run.scenario = fp8;
  EXPECT_LT(predict_measured(run, fp8_scaled, fp8_plan).predicted,
            0.8 * predict_measured(run, fp8, fp8_plan).predicted);
  EXPECT_EQ(scenario::parse_fit_param("fp8_gemm"), FitParam::gemm_fp8);
  EXPECT_EQ(scenario::parse_fit_param("gemm_scale"), FitParam::gemm);
  EXPECT_EQ(scenario::parse_fit_param("comm_compute_slowdown"), FitParam::comm_compute_slowdown);
  EXPECT_FALSE(scenario::parse_fit_param("gemm_scal"));
}

}  // namespace
}  // namespace stratagem::tune
