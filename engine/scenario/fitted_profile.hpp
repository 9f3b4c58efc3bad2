#pragma once
// A fitted profile: a handful of interpretable hardware multipliers that `stratagem calibrate
// --measured runs.jsonl` fits, per GPU, to a team's own measured training runs, and that
// `sim`, `compare`, `search` and `validate --measured` take with `--profile` (the same flag as a
// machine profile from `stratagem calibrate`; the file's "format" says which it is).
//
// Format ("format": "stratagem-fitted-profile", "version": 1):
//   name, measured (the runs file it was fitted to), date,
//   gpus* { "<gpu name>": {runs*, parameters* {<parameter>: {value*, stderr, determined}},
//                          median_abs_error_before, median_abs_error_after,
//                          median_abs_error_loo, bias_before, bias_after} }
// Parameters (FitParam): gemm_scale and attention_scale multiply the GEMM and attention
// efficiencies (held at or below the peak), fp8_gemm_scale the fp8 GEMMs' (the head and
// attention of an fp8 run stay at 16 bits: gemm_scale), hbm_scale the HBM bandwidth,
// intra_link_scale and inter_link_scale the links' bandwidths, comm_compute_slowdown is compute's
// slow-down while communication runs (absolute, default 0). A parameter the runs did not determine
// (no run depends on it) keeps its neutral value and says so.
#include <array>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/scenario/scenario.hpp"

namespace stratagem::scenario {

inline constexpr const char* kFittedProfileFormat = "stratagem-fitted-profile";
inline constexpr int kFittedProfileVersion = 1;

enum class FitParam {
  gemm,
  attention,
  hbm,
  intra_link,
  inter_link,
  comm_compute_slowdown,
  gemm_fp8
};
inline constexpr int kFitParamCount = 7;
/// "gemm_scale", "attention_scale", "hbm_scale", "intra_link_scale", "inter_link_scale",
/// "comm_compute_slowdown", "fp8_gemm_scale".
const char* to_string(FitParam p);
/// The parameter named by to_string()'s name or its short form without "_scale" ("gemm",
/// "hbm"); nullopt for anything else.
std::optional<FitParam> parse_fit_param(const std::string& name);
/// Multipliers are 1 when neutral; the slow-down is 0.
double neutral_value(FitParam p);
/// Whether the parameter multiplies (fitted in log space) or adds (the slow-down).
bool is_scale(FitParam p);

using FitValues = std::array<double, kFitParamCount>;
FitValues neutral_values();

struct FittedValue {
  double value = 1;
  /// Standard error: relative for a scale (of its logarithm), absolute for the slow-down.
  double stderr_ = 0;
  bool determined = true;
};

struct GpuFit {
  std::string gpu;  ///< GpuSpec::name of the runs
  int runs = 0;
  std::array<FittedValue, kFitParamCount> parameters{};
  double median_abs_error_before = 0, median_abs_error_after = 0, median_abs_error_loo = 0;
  double bias_before = 0, bias_after = 0;
  FitValues values() const;
};

struct FittedProfile {
  std::string name;
  std::string measured;  ///< the runs file
  std::string date;
  std::string source;  ///< file it was loaded from
  std::vector<GpuFit> gpus;
  const GpuFit* find(const std::string& gpu) const;
};

/// The scenario with the values applied to its GPU and links (on top of what it already says).
void apply_fit_values(Scenario& s, const FitValues& v);
/// Applies the profile's fit for the scenario's GPU; SpecError("--profile") naming the GPUs it
/// has when the scenario's is not among them.
void apply_fitted_profile(Scenario& s, const FittedProfile& p);

bool is_fitted_profile(const nlohmann::json& doc);
FittedProfile parse_fitted_profile(const nlohmann::json& doc, const std::string& source);
nlohmann::json to_json(const FittedProfile& p);
/// Writes the profile (pretty-printed), with `cross_validation` (`calibrate --measured
/// --cross-validate`'s table per held-out source) under that key when it is not null;
/// RuntimeError when the file cannot be written.
void save_fitted_profile(const FittedProfile& p, const std::string& file,
                         const nlohmann::json& cross_validation = nullptr);

/// `--profile FILE` for a scenario: a machine profile (profile.hpp) replaces its hardware, a
/// fitted profile scales it. SpecError names the file for a missing or malformed one.
void apply_profile_file(Scenario& s, const std::string& file);

}  // namespace stratagem::scenario
