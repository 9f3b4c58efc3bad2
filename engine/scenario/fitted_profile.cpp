#include "engine/scenario/fitted_profile.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "engine/scenario/document_format.hpp"
#include "engine/scenario/error.hpp"
#include "engine/scenario/json_reader.hpp"
#include "engine/scenario/profile.hpp"

namespace stratagem::scenario {

namespace {
constexpr FitParam kParams[] = {FitParam::gemm,       FitParam::attention,
                                FitParam::hbm,        FitParam::intra_link,
                                FitParam::inter_link, FitParam::comm_compute_slowdown,
                                FitParam::gemm_fp8};
}  // namespace

const char* to_string(FitParam p) {
  switch (p) {
    case FitParam::gemm:
      return "gemm_scale";
    case FitParam::attention:
      return "attention_scale";
    case FitParam::hbm:
      return "hbm_scale";
    case FitParam::intra_link:
      return "intra_link_scale";
    case FitParam::inter_link:
      return "inter_link_scale";
    case FitParam::comm_compute_slowdown:
      return "comm_compute_slowdown";
    case FitParam::gemm_fp8:
      return "fp8_gemm_scale";
  }
  return "?";
}

std::optional<FitParam> parse_fit_param(const std::string& name) {
  for (FitParam p : kParams) {
    const std::string full = to_string(p);
    const std::string suffix = "_scale";
    const bool scaled = full.size() > suffix.size() &&
                        full.compare(full.size() - suffix.size(), suffix.size(), suffix) == 0;
    if (name == full || (scaled && name == full.substr(0, full.size() - suffix.size()))) return p;
  }
  return std::nullopt;
}

bool is_scale(FitParam p) {
  return p != FitParam::comm_compute_slowdown;
}
double neutral_value(FitParam p) {
  return is_scale(p) ? 1.0 : 0.0;
}

FitValues neutral_values() {
  FitValues v{};
  for (FitParam p : kParams) v[static_cast<int>(p)] = neutral_value(p);
  return v;
}

FitValues GpuFit::values() const {
  FitValues v{};
  for (int i = 0; i < kFitParamCount; ++i) v[i] = parameters[i].value;
  return v;
}

const GpuFit* FittedProfile::find(const std::string& gpu) const {
  for (const auto& g : gpus) {
    if (g.gpu == gpu) return &g;
  }
  return nullptr;
}

void apply_fit_values(Scenario& s, const FitValues& v) {
  auto& c = s.cluster;
  auto at = [&](FitParam p) { return v[static_cast<int>(p)]; };
  c.gpu.gemm_scale *= at(FitParam::gemm);
  c.gpu.fp8_gemm_scale *= at(FitParam::gemm_fp8);
  c.gpu.attention_scale *= at(FitParam::attention);
  c.gpu.hbm_bandwidth *= at(FitParam::hbm);
  c.intra_node.bandwidth *= at(FitParam::intra_link);
  c.inter_node.bandwidth *= at(FitParam::inter_link);
  if (c.calibration) {
    for (auto& op : c.calibration->ops) op.bus_bandwidth *= at(FitParam::intra_link);
  }
  const double slowdown = at(FitParam::comm_compute_slowdown);
  if (slowdown != 0.0 || c.gpu.comm_compute_slowdown) {
    c.gpu.comm_compute_slowdown = c.gpu.comm_compute_slowdown.value_or(0.0) + slowdown;
  }
}

void apply_fitted_profile(Scenario& s, const FittedProfile& p) {
  const GpuFit* fit = p.find(s.cluster.gpu.name);
  if (!fit) {
    std::string have;
    for (const auto& g : p.gpus) have += (have.empty() ? "" : ", ") + g.gpu;
    throw SpecError("--profile", p.source + " was fitted to runs on " + have +
                                     "; the scenario's GPU is " + s.cluster.gpu.name);
  }
  apply_fit_values(s, fit->values());
  validate(s);
}

bool is_fitted_profile(const nlohmann::json& doc) {
  return doc.is_object() && doc.contains("format") && doc["format"].is_string() &&
         doc["format"].get<std::string>() == kFittedProfileFormat;
}

FittedProfile parse_fitted_profile(const nlohmann::json& doc, const std::string& source) {
  try {
    ObjectReader r(doc, "");
    r.allow({"cross_validation"});  // a report beside the fit, not read back
    check_document_format(r, kFittedProfileFormat, kFittedProfileVersion, "fitted profile");
    FittedProfile p;
    p.source = source;
    p.name = r.string_or("name", "fitted");
    p.measured = r.string_or("measured", "");
    p.date = r.string_or("date", "");
    const nlohmann::json* gpus = r.find("gpus");
    if (!gpus) throw SpecError("gpus", "missing required key");
    if (!gpus->is_object() || gpus->empty()) {
      throw SpecError("gpus", "expected an object with one entry per GPU");
    }
    for (const auto& [name, body] : gpus->items()) {
      ObjectReader g(body, "gpus." + name);
      GpuFit fit;
      fit.gpu = name;
      fit.runs = static_cast<int>(g.integer("runs", 0, 1 << 30));
      const nlohmann::json* params = g.find("parameters");
      if (!params) throw SpecError(g.child_path("parameters"), "missing required key");
      ObjectReader pr(*params, g.child_path("parameters"));
      for (FitParam fp : kParams) {
        FittedValue& v = fit.parameters[static_cast<int>(fp)];
        v.value = neutral_value(fp);
        if (!pr.has(to_string(fp))) continue;
        ObjectReader e(pr.at(to_string(fp)), pr.child_path(to_string(fp)));
        v.value = is_scale(fp) ? e.number("value", 1e-3, 1e3) : e.number("value", 0, 100);
        v.stderr_ = e.number_or("stderr", 0, 0, 1e9);
        v.determined = e.boolean_or("determined", true);
        e.finish();
      }
      pr.finish();
      fit.median_abs_error_before = g.number_or("median_abs_error_before", 0, 0, 1e9);
      fit.median_abs_error_after = g.number_or("median_abs_error_after", 0, 0, 1e9);
      fit.median_abs_error_loo = g.number_or("median_abs_error_loo", 0, 0, 1e9);
      fit.bias_before = g.number_or("bias_before", 0, -1e9, 1e9);
      fit.bias_after = g.number_or("bias_after", 0, -1e9, 1e9);
      g.finish();
      p.gpus.push_back(std::move(fit));
    }
    r.finish();
    return p;
  } catch (const SpecError& e) {
    if (source.empty()) throw;
    throw SpecError(source + ": " + e.path(), e.reason());
  }
}

nlohmann::json to_json(const FittedProfile& p) {
  nlohmann::json gpus = nlohmann::json::object();
  for (const auto& g : p.gpus) {
    nlohmann::json params = nlohmann::json::object();
    for (FitParam fp : kParams) {
      const FittedValue& v = g.parameters[static_cast<int>(fp)];
      params[to_string(fp)] = {
          {"value", v.value}, {"stderr", v.stderr_}, {"determined", v.determined}};
    }
    gpus[g.gpu] = {{"runs", g.runs},
                   {"parameters", params},
                   {"median_abs_error_before", g.median_abs_error_before},
                   {"median_abs_error_after", g.median_abs_error_after},
                   {"median_abs_error_loo", g.median_abs_error_loo},
                   {"bias_before", g.bias_before},
                   {"bias_after", g.bias_after}};
  }
  return {{"format", kFittedProfileFormat},
          {"version", kFittedProfileVersion},
          {"name", p.name},
          {"measured", p.measured},
          {"date", p.date},
          {"gpus", gpus}};
}

void save_fitted_profile(const FittedProfile& p, const std::string& file,
                         const nlohmann::json& cross_validation) {
  nlohmann::json doc = to_json(p);
  if (!cross_validation.is_null()) doc["cross_validation"] = cross_validation;
  // Written beside the target and renamed over it: an interrupted write leaves the old file.
  const std::string tmp = file + ".tmp";
  {
    std::ofstream out(tmp);
    out << doc.dump(2) << "\n";
    if (!out) throw RuntimeError("cannot write " + file);
  }
  if (std::rename(tmp.c_str(), file.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw RuntimeError("cannot write " + file);
  }
}

void apply_profile_file(Scenario& s, const std::string& file) {
  const nlohmann::json doc = read_json_file(file);
  if (is_fitted_profile(doc)) {
    apply_fitted_profile(s, parse_fitted_profile(doc, file));
  } else {
    apply_profile(s, parse_profile(doc, file));
  }
}

}  // namespace stratagem::scenario
