#include "tune/validation.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "engine/memory/memory.hpp"
#include "engine/plan/builder.hpp"
#include "engine/scenario/error.hpp"
#include "engine/scenario/json_reader.hpp"
#include "engine/scenario/stack.hpp"
#include "engine/scenario/units.hpp"
#include "sim/simulate.hpp"

namespace stratagem::tune {

std::vector<MeasuredRun> load_measured_runs(const std::string& file) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(file, ec)) throw SpecError(file, "no such file");
  if (!fs::is_regular_file(file, ec)) throw SpecError(file, "not a regular file");
  if (fs::file_size(file, ec) > scenario::kMaxJsonBytes) {
    throw SpecError(file, "larger than " + std::to_string(scenario::kMaxJsonBytes >> 20) + " MiB");
  }
  std::ifstream in(file);
  std::vector<MeasuredRun> runs;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = file + ":" + std::to_string(n);
    const nlohmann::json j = scenario::parse_json_text(line, where);
    try {
      scenario::ObjectReader r(j, "");
      r.allow({"notes"});
      MeasuredRun run;
      run.id = r.string("id");
      run.source = fs::path(file).stem().string();
      run.scenario = scenario::parse_scenario(r.at("scenario"), run.id);
      scenario::ObjectReader m(r.at("measured"), "measured");
      m.allow({"model_tflops_per_gpu", "mfu", "source"});
      if (m.has("tokens_per_s_per_gpu")) {
        run.tokens_per_s_per_gpu = m.number("tokens_per_s_per_gpu", 1e-9, 1e12);
      } else if (m.has("step_time_s")) {
        run.step_time_s = m.number("step_time_s", 1e-9, 1e9);
      } else {
        throw SpecError("measured", "needs tokens_per_s_per_gpu or step_time_s");
      }
      if (m.has("peak_memory_GiB")) run.peak_memory_GiB = m.number("peak_memory_GiB", 0, 1e6);
      m.finish();
      r.finish();
      runs.push_back(std::move(run));
    } catch (const SpecError& e) {
      // Scenario paths come unprefixed: say which line and which part of it.
      throw SpecError(where, e.what());
    }
  }
  if (runs.empty()) throw SpecError(file, "no runs (one JSON object per line)");
  return runs;
}

double RunComparison::error() const {
  if (measured <= 0 || predicted <= 0) return 0;
  return measured_is_step_time ? measured / predicted - 1.0 : predicted / measured - 1.0;
}

namespace {

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

}  // namespace

ErrorSummary summarize(const std::vector<RunComparison>& rows) {
  ErrorSummary s;
  s.runs = static_cast<int>(rows.size());
  if (rows.empty()) return s;
  std::vector<double> abs, signed_errors;
  int w10 = 0, w20 = 0;
  for (const auto& r : rows) {
    const double e = r.error();
    signed_errors.push_back(e);
    abs.push_back(std::abs(e));
    w10 += std::abs(e) <= 0.10;
    w20 += std::abs(e) <= 0.20;
    s.false_oom += r.predicted_oom;
  }
  s.median_abs = quantile(abs, 0.5);
  s.p90_abs = quantile(abs, 0.9);
  s.signed_median = quantile(signed_errors, 0.5);
  s.within_10 = static_cast<double>(w10) / s.runs;
  s.within_20 = static_cast<double>(w20) / s.runs;
  return s;
}

std::string strategy_family(const scenario::StrategySpec& st) {
  std::string f = scenario::to_string(st.sharding);
  if (st.tp > 1) f += " + tp";
  if (st.cp > 1) f += " + cp";
  if (st.pp > 1) f += " + pipeline";
  return f;
}

RunComparison predict_measured(const MeasuredRun& run, const scenario::Scenario& s,
                               const plan::StepPlan& plan, const sim::CostOptions& options) {
  const auto result = sim::simulate(plan, s, options);
  RunComparison c;
  c.id = run.id;
  c.gpu = s.cluster.gpu.name;
  c.family = strategy_family(s.strategy);
  c.stack = scenario::to_string(s.strategy.stack);
  c.measured_is_step_time = run.tokens_per_s_per_gpu <= 0;
  c.measured = c.measured_is_step_time ? run.step_time_s : run.tokens_per_s_per_gpu;
  c.predicted = c.measured_is_step_time
                    ? result.metrics.step_time_s
                    : result.metrics.tokens_per_s / static_cast<double>(s.world_size());
  double peak = 0;
  for (int r = 0; r < static_cast<int>(result.ranks.size()); ++r) {
    peak = std::max(peak, result.resolved(r).peak_memory_bytes);
  }
  c.predicted_peak_GiB = peak / units::kGiB;
  c.measured_peak_GiB = run.peak_memory_GiB;
  c.predicted_oom = peak > s.cluster.gpu.memory_bytes;
  return c;
}

std::vector<RunComparison> compare_with_measured(const std::vector<MeasuredRun>& runs,
                                                 const sim::CostOptions& options,
                                                 const std::function<void(int, int)>& progress) {
  std::vector<RunComparison> out;
  const int total = static_cast<int>(runs.size());
  for (int i = 0; i < total; ++i) {
    if (progress) progress(i, total);
    const scenario::Scenario& s = runs[i].scenario;
    out.push_back(predict_measured(runs[i], s, plan::build_plan(s), options));
  }
  if (progress) progress(total, total);
  return out;
}

}  // namespace stratagem::tune
