// `stratagem validate <scenario...> --num_processes N [--profile p.json] [--steps K]
// [--json report.json]`: runs each scenario for real on N local processes, simulates the
// same scenario (as the run executed it: its devices, the profile's hardware when given), and
// prints measured against predicted step time and peak memory per rank, time per kind of op,
// the ops whose durations deviate most, and the ranking of the scenarios by both.

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "apps/command.hpp"
#include "apps/format.hpp"
#include "apps/torch/real_runs.hpp"
#include "engine/plan/builder.hpp"
#include "engine/result/metrics.hpp"
#include "engine/spec/error.hpp"
#include "engine/spec/profile.hpp"
#include "sim/search.hpp"
#include "sim/simulator.hpp"
#include "sim/strategy_variants.hpp"

namespace stratagem::cli {
namespace {

struct Args {
  std::vector<std::string> scenarios;
  RealRunOptions real;
  std::string profile;
  std::string json;
  int top_ops = 5;
};

struct OpDeviation {
  const result::Span* real = nullptr;
  double predicted_s = 0;
  double diff_s() const { return (real->end_s - real->start_s) - predicted_s; }
};

std::string op_label(const result::Span& s) {
  std::string l = std::string(result::to_string(s.kind));
  if (s.unit_end > s.unit_begin) {
    l += " units [" + std::to_string(s.unit_begin) + "," + std::to_string(s.unit_end) + ")";
  }
  if (s.microbatch >= 0) l += " mb " + std::to_string(s.microbatch);
  return "op " + std::to_string(s.op) + " " + l;
}

struct Outcome {
  std::string name, layout;
  double measured_s = 0, predicted_s = 0;
  double error() const { return measured_s > 0 ? predicted_s / measured_s - 1.0 : 0.0; }
  std::vector<double> measured_peak, predicted_peak;
  nlohmann::json doc;
};

Outcome validate_one(const std::string& name_or_file, const Args& a,
                     const std::optional<spec::HardwareProfile>& profile) {
  const spec::Scenario asked =
      on_local_processes(spec::load_scenario(name_or_file), a.real.num_processes);
  const std::string label = std::filesystem::path(name_or_file).stem().string();
  std::cout << label << ": running " << a.real.steps << " steps on " << a.real.num_processes
            << " processes..." << std::flush;
  const result::RunResult real = run_for_real(asked, label, a.real);

  // Simulate what ran: the executed scenario (its measured devices), the profile's hardware.
  spec::Scenario simulated = real.scenario;
  if (profile) spec::apply_profile(simulated, *profile);
  const plan::StepPlan plan = plan::build_plan(simulated, {.fold = false});
  const result::RunResult sim = sim::Simulator().run(plan, sim::make_cost_models(simulated));
  std::cout << " done\n";

  Outcome o;
  o.name = label;
  o.layout = sim::strategy_label(simulated);
  o.measured_s = real.metrics.step_time_s;
  o.predicted_s = sim.metrics.step_time_s;
  std::printf("  %s; hardware: %s\n", o.layout.c_str(), sim.hardware.c_str());
  std::printf("  step time     measured %s   predicted %s   error %+.1f %%\n",
              fmt_time(o.measured_s).c_str(), fmt_time(o.predicted_s).c_str(), 100 * o.error());

  nlohmann::json ranks = nlohmann::json::array();
  std::printf("  peak memory   rank: measured / predicted\n               ");
  for (std::size_t r = 0; r < real.ranks.size(); ++r) {
    const double m = real.ranks[r].peak_memory_bytes,
                 p = sim.resolved(static_cast<int>(r)).peak_memory_bytes;
    o.measured_peak.push_back(m);
    o.predicted_peak.push_back(p);
    std::printf(" %zu: %s / %s", r, fmt_gib(m).c_str(), fmt_gib(p).c_str());
    ranks.push_back({{"rank", r}, {"measured_peak_bytes", m}, {"predicted_peak_bytes", p}});
  }
  std::printf("\n");

  // Time per kind of op and the ops that deviate most, on rank 0 (the traced step).
  const auto& rs = real.ranks.at(0).spans;
  const auto& ss = sim.resolved(0).spans;
  std::map<plan::OpId, const result::Span*> predicted;
  for (const auto& s : ss) predicted[s.op] = &s;
  std::map<std::string, std::pair<double, double>> by_kind;
  std::vector<OpDeviation> dev;
  for (const auto& s : rs) {
    auto& k = by_kind[result::to_string(s.kind)];
    k.first += s.end_s - s.start_s;
    const auto it = predicted.find(s.op);
    if (it == predicted.end()) continue;
    dev.push_back({&s, it->second->end_s - it->second->start_s});
  }
  for (const auto& s : ss) by_kind[result::to_string(s.kind)].second += s.end_s - s.start_s;
  std::printf("  rank 0 time by kind (summed op durations): measured / predicted\n");
  nlohmann::json kinds = nlohmann::json::object();
  for (const auto& [kind, t] : by_kind) {
    std::printf("    %-18s %10s / %-10s\n", kind.c_str(), fmt_time(t.first).c_str(),
                fmt_time(t.second).c_str());
    kinds[kind] = {{"measured_s", t.first}, {"predicted_s", t.second}};
  }
  std::sort(dev.begin(), dev.end(), [](const OpDeviation& x, const OpDeviation& y) {
    return std::abs(x.diff_s()) > std::abs(y.diff_s());
  });
  std::printf("  rank 0 ops that deviate most: measured / predicted\n");
  nlohmann::json top = nlohmann::json::array();
  for (int i = 0; i < a.top_ops && i < static_cast<int>(dev.size()); ++i) {
    const auto& d = dev[i];
    const double m = d.real->end_s - d.real->start_s;
    std::printf("    %-44s %10s / %-10s (%+.1f ms)\n", op_label(*d.real).c_str(),
                fmt_time(m).c_str(), fmt_time(d.predicted_s).c_str(), 1e3 * d.diff_s());
    top.push_back({{"op", d.real->op},
                   {"label", op_label(*d.real)},
                   {"measured_s", m},
                   {"predicted_s", d.predicted_s}});
  }
  o.doc = {{"scenario", label},
           {"layout", o.layout},
           {"hardware", sim.hardware},
           {"steps", a.real.steps},
           {"processes", a.real.num_processes},
           {"measured_step_time_s", o.measured_s},
           {"predicted_step_time_s", o.predicted_s},
           {"relative_error", o.error()},
           {"ranks", ranks},
           {"time_by_kind_rank0", kinds},
           {"top_deviating_ops_rank0", top}};
  return o;
}

std::string ranking(std::vector<const Outcome*> v, bool measured) {
  std::stable_sort(v.begin(), v.end(), [&](const Outcome* x, const Outcome* y) {
    return measured ? x->measured_s < y->measured_s : x->predicted_s < y->predicted_s;
  });
  std::string out;
  for (const auto* o : v) out += (out.empty() ? "" : " < ") + o->name;
  return out;
}

int run(Args& a) {
  if (a.scenarios.empty()) throw SpecError("scenario", "give at least one scenario");
  if (a.real.steps < 2) throw SpecError("--steps", "must be >= 2 (the first step is warm-up)");
  std::optional<spec::HardwareProfile> profile;
  if (!a.profile.empty()) profile = spec::load_profile(a.profile);
  if (a.real.work_dir.empty()) a.real.work_dir = default_work_dir("validate");
  std::vector<Outcome> outcomes;
  for (const auto& s : a.scenarios) {
    outcomes.push_back(validate_one(s, a, profile));
    std::printf("\n");
  }
  std::vector<std::vector<std::string>> rows = {
      {"scenario", "layout", "measured", "predicted", "error", "peak mem (meas / pred)"}};
  std::vector<double> errors;
  std::vector<const Outcome*> ptrs;
  for (const auto& o : outcomes) {
    errors.push_back(std::abs(o.error()));
    ptrs.push_back(&o);
    const double mp = *std::max_element(o.measured_peak.begin(), o.measured_peak.end());
    const double pp = *std::max_element(o.predicted_peak.begin(), o.predicted_peak.end());
    char err[32];
    std::snprintf(err, sizeof err, "%+.1f %%", 100 * o.error());
    rows.push_back({o.name, o.layout, fmt_time(o.measured_s), fmt_time(o.predicted_s), err,
                    fmt_gib(mp) + " / " + fmt_gib(pp)});
  }
  print_table(stdout, rows);
  const double med = result::median(errors);
  const std::string by_real = ranking(ptrs, true), by_sim = ranking(ptrs, false);
  std::printf("median |error| %.1f %% over %zu scenario(s)\n", 100 * med, outcomes.size());
  if (outcomes.size() > 1) {
    std::printf("fastest first, measured:  %s\nfastest first, predicted: %s\nranking %s\n",
                by_real.c_str(), by_sim.c_str(), by_real == by_sim ? "agrees" : "differs");
  }
  std::printf("real runs and their scenarios: %s\n", a.real.work_dir.c_str());
  if (!a.json.empty()) {
    nlohmann::json doc = {{"median_abs_relative_error", med},
                          {"ranking_measured", by_real},
                          {"ranking_predicted", by_sim},
                          {"ranking_agrees", by_real == by_sim},
                          {"profile", a.profile},
                          {"scenarios", nlohmann::json::array()}};
    for (const auto& o : outcomes) doc["scenarios"].push_back(o.doc);
    std::ofstream f(a.json);
    f << doc.dump(2) << "\n";
    if (!f) throw RuntimeError("cannot write " + a.json);
  }
  return 0;
}

Registration reg{
    {"validate",
     "Run scenarios for real and compare with the simulator's prediction (step time, memory, "
     "ops, ranking)",
     62, [](CLI::App& sub) {
       auto a = std::make_shared<Args>();
       sub.add_option("scenario", a->scenarios, "Scenario files or shipped names")->required();
       sub.add_option("--num_processes", a->real.num_processes,
                      "Local worker processes per run (the scenarios are reshaped to them)")
           ->required();
       sub.add_option("--profile", a->profile,
                      "Hardware profile from `stratagem calibrate` for the simulation "
                      "(default: the devices the run measured and the scenario's links)");
       sub.add_option("--steps", a->real.steps, "Steps per real run (default 6; first is warm-up)");
       sub.add_flag("--cpu", a->real.cpu, "Run on the CPU with Gloo even when a GPU is present");
       sub.add_option("--timeout", a->real.timeout_s, "Seconds without progress before a run ends");
       sub.add_option("--work_dir", a->real.work_dir,
                      "Where the runs' scenarios and results are kept (default: a temp dir)");
       sub.add_option("--top", a->top_ops, "Deviating ops listed per scenario (default 5)");
       sub.add_option("--json", a->json, "Also write the report as JSON here");
       return std::function<int()>([a] { return run(*a); });
     }}};

}  // namespace
}  // namespace stratagem::cli
