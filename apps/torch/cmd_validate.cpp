// `stratagem validate <scenario...> --num_processes N [--profile p.json] [--steps K]
// [--rounds R] [--json report.json]`: runs each scenario for real on N local processes (R
// rounds, the scenarios taking turns), simulates the same scenario (as the run executed it:
// its devices, the profile's hardware when given), and prints measured against predicted step
// time and peak memory per rank, time per kind of op, the ops whose durations deviate most,
// and the ranking of the scenarios by both — strictly, and counting only the pairs whose
// measured difference exceeds the measurement's own noise.

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include <ATen/Context.h>

#include "apps/command.hpp"
#include "apps/format.hpp"
#include "apps/host_profile.hpp"
#include "apps/scenario_loading.hpp"
#include "apps/torch/real_runs.hpp"
#include "engine/result/metrics.hpp"
#include "engine/scenario/error.hpp"
#include "engine/scenario/profile.hpp"
#include "sim/simulate.hpp"
#include "tune/search.hpp"
#include "tune/strategy_variants.hpp"

namespace stratagem::cli {
namespace {

struct Args {
  std::vector<std::string> scenarios;
  RealRunOptions real;
  std::string profile;
  std::string json;
  int top_ops = 5;
  int rounds = 1;
  bool recalibrate = false;
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
  /// Standard error of the measured step time: the larger of the one over the rounds'
  /// medians and the one over all steps.
  double noise_s = 0;
  double error() const { return measured_s > 0 ? predicted_s / measured_s - 1.0 : 0.0; }
  std::vector<double> measured_peak, predicted_peak;
  nlohmann::json doc;
};

double standard_error(const std::vector<double>& v) {
  return v.empty() ? 0 : result::sample_stddev(v) / std::sqrt(static_cast<double>(v.size()));
}

/// The units every run of a shape timed (--fresh-units), averaged: the compute cost over the
/// same minutes as the measured steps, so the machine's drift since `calibrate` and one run's
/// noise both drop out.
std::map<std::string, scenario::MeasuredUnits> pooled_units(
    const std::vector<std::vector<result::RunResult>>& runs) {
  std::map<std::string, std::vector<scenario::MeasuredUnits>> by_shape;
  for (const auto& scenario_runs : runs) {
    for (const auto& r : scenario_runs) {
      for (const auto& u : r.scenario.cluster.gpu.measured_units) by_shape[u.shape].push_back(u);
    }
  }
  std::map<std::string, scenario::MeasuredUnits> out;
  for (const auto& [shape, list] : by_shape) {
    out[shape] = scenario::average_units(list, /*between_is_rank=*/false);
  }
  return out;
}

/// One scenario's real runs (one per round; the first is reported op by op) against its
/// simulation.
Outcome report(const std::string& label, const std::vector<result::RunResult>& runs, const Args& a,
               const std::optional<scenario::HardwareProfile>& profile,
               const std::map<std::string, scenario::MeasuredUnits>& fresh) {
  const result::RunResult& real = runs.front();
  // Simulate what ran: the executed scenario (its measured devices), the profile's hardware.
  scenario::Scenario simulated = real.scenario;
  if (profile) scenario::apply_profile(simulated, *profile);
  // With --fresh-units the units timed around the runs replace the profile's for this shape;
  // the profile's network and overlap stay.
  const auto it = fresh.find(scenario::unit_shape_key(simulated));
  if (it != fresh.end()) {
    auto& units = simulated.cluster.gpu.measured_units;
    units.insert(units.begin(), it->second);
  }
  const result::RunResult sim = sim::simulate(simulated, {.build = {.fold = false}, .cost = {}});

  Outcome o;
  o.name = label;
  o.layout = tune::strategy_label(simulated);
  // Measured: the median over every round's steps after its warm-up.
  std::vector<double> steps, medians;
  for (const auto& r : runs) {
    const auto& t = r.metrics.step_times_s;
    if (t.size() > 1) {
      steps.insert(steps.end(), t.begin() + 1, t.end());
    } else {
      steps.push_back(r.metrics.step_time_s);
    }
    medians.push_back(r.metrics.step_time_s);
  }
  o.measured_s = result::median(steps);
  // Steps of one run share its conditions, so their spread understates the noise: with
  // rounds, the spread of the rounds' medians counts too.
  o.noise_s = std::max(standard_error(medians), standard_error(steps));
  o.predicted_s = sim.metrics.step_time_s;
  std::printf("%s\n  %s; hardware: %s\n", label.c_str(), o.layout.c_str(), sim.hardware.c_str());
  std::printf("  step time     measured %s ± %s   predicted %s   error %+.1f %%\n",
              fmt_time(o.measured_s).c_str(), fmt_time(o.noise_s).c_str(),
              fmt_time(o.predicted_s).c_str(), 100 * o.error());

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
           {"rounds", runs.size()},
           {"processes", a.real.num_processes},
           {"measured_step_time_s", o.measured_s},
           {"measured_noise_s", o.noise_s},
           {"measured_step_times_s", steps},
           {"predicted_step_time_s", o.predicted_s},
           {"relative_error", o.error()},
           {"ranks", ranks},
           {"time_by_kind_rank0", kinds},
           {"top_deviating_ops_rank0", top}};
  return o;
}

/// Two measured step times differ beyond noise when they are more than two standard errors
/// of their difference apart.
bool distinguishable(const Outcome& x, const Outcome& y) {
  return std::abs(x.measured_s - y.measured_s) >
         2 * std::sqrt(x.noise_s * x.noise_s + y.noise_s * y.noise_s);
}

/// Fastest first; with `ties`, neighbours the measurement cannot tell apart are joined by ≈.
std::string ranking(std::vector<const Outcome*> v, bool measured, bool ties) {
  std::stable_sort(v.begin(), v.end(), [&](const Outcome* x, const Outcome* y) {
    return measured ? x->measured_s < y->measured_s : x->predicted_s < y->predicted_s;
  });
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i > 0) out += ties && !distinguishable(*v[i - 1], *v[i]) ? " ≈ " : " < ";
    out += v[i]->name;
  }
  return out;
}

/// Pairs the measurement orders beyond its noise that the prediction orders the other way.
std::vector<std::string> inverted_pairs(const std::vector<const Outcome*>& v) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    for (std::size_t j = i + 1; j < v.size(); ++j) {
      const Outcome &x = *v[i], &y = *v[j];
      if (!distinguishable(x, y)) continue;
      if ((x.measured_s < y.measured_s) != (x.predicted_s < y.predicted_s)) {
        out.push_back(x.name + " / " + y.name);
      }
    }
  }
  return out;
}

int run(Args& a) {
  if (a.scenarios.empty()) throw SpecError("scenario", "give at least one scenario");
  if (a.real.steps < 2) throw SpecError("--steps", "must be >= 2 (the first step is warm-up)");
  if (a.rounds < 1) throw SpecError("--rounds", "must be >= 1");
  if (a.real.work_dir.empty()) a.real.work_dir = default_work_dir("validate");
  // Every round runs every scenario, so slow drifts of the machine hit all of them alike.
  std::vector<std::string> labels;
  std::vector<scenario::Scenario> asked;
  for (const auto& s : a.scenarios) {
    labels.push_back(std::filesystem::path(s).stem().string());
    asked.push_back(on_local_processes(cli::load_scenario(s), a.real.num_processes));
  }
  // On CPUs the simulation defaults to this host's measured profile (apps/host_profile.hpp):
  // the device and Gloo's collectives as they ran here, not the shipped preset's figures.
  const bool on_cpu = a.real.cpu || !at::hasCUDA();
  if (a.recalibrate && !a.profile.empty() && a.profile != "host") {
    throw SpecError("--recalibrate", "measures this host's cached profile; drop --profile");
  }
  if (a.profile == "host" || (a.profile.empty() && on_cpu)) {
    if (!on_cpu) throw SpecError("--profile", "\"host\" is this host's CPU: add --cpu");
    a.profile = host_profile(a.real.num_processes, a.recalibrate);
    // The host's quick profile holds no units of the scenarios' shapes: each run times them on
    // its own processes (--fresh-units), as close to the run as a measurement gets.
    a.real.measure_units = true;
    std::cout << "simulated with this host's CPU profile " << a.profile
              << " (--recalibrate measures it again) and units timed on each run's processes"
              << std::endl;
  } else if (a.recalibrate) {
    throw SpecError("--recalibrate", "measures this host's CPU: add --cpu");
  }
  std::optional<scenario::HardwareProfile> profile;
  if (!a.profile.empty()) profile = scenario::load_profile(a.profile);
  std::vector<std::vector<result::RunResult>> runs(asked.size());
  for (int round = 0; round < a.rounds; ++round) {
    for (std::size_t i = 0; i < asked.size(); ++i) {
      std::string label = labels[i];
      if (a.rounds > 1) {
        std::cout << "round " << round + 1 << "/" << a.rounds << ": ";
        label += ".round" + std::to_string(round + 1);
      }
      std::cout << labels[i] << ": running " << a.real.steps << " steps on " << a.real.num_processes
                << " processes..." << std::flush;
      runs[i].push_back(run_for_real(asked[i], label, a.real));
      std::cout << " done" << std::endl;
    }
  }
  std::printf("\n");
  const auto fresh = pooled_units(runs);
  for (const auto& [shape, u] : fresh) {
    std::printf(
        "units timed around the runs, %s: block forward %s, backward %s, spread %.1f %% per "
        "repetition, %.1f %% between ranks\n",
        shape.c_str(), fmt_time(u.block_forward).c_str(), fmt_time(u.block_backward).c_str(),
        100 * u.jitter_cv, 100 * u.rank_cv);
  }
  std::vector<Outcome> outcomes;
  for (std::size_t i = 0; i < asked.size(); ++i) {
    outcomes.push_back(report(labels[i], runs[i], a, profile, fresh));
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
    rows.push_back({o.name, o.layout, fmt_time(o.measured_s) + " ± " + fmt_time(o.noise_s),
                    fmt_time(o.predicted_s), err, fmt_gib(mp) + " / " + fmt_gib(pp)});
  }
  print_table(stdout, rows);
  const double med = result::median(errors);
  const std::string by_real = ranking(ptrs, true, false), by_sim = ranking(ptrs, false, false);
  const std::string by_real_noise = ranking(ptrs, true, true);
  const auto inverted = inverted_pairs(ptrs);
  std::printf("median |error| %.1f %% over %zu scenario(s)\n", 100 * med, outcomes.size());
  if (outcomes.size() > 1) {
    std::printf("fastest first, measured:  %s\nfastest first, predicted: %s\nranking %s\n",
                by_real.c_str(), by_sim.c_str(), by_real == by_sim ? "agrees" : "differs");
    std::printf("measured, ≈ within noise (2 standard errors): %s\n", by_real_noise.c_str());
    if (inverted.empty()) {
      std::printf("every pair measured apart beyond noise is ranked the same by the prediction\n");
    } else {
      std::printf("pairs measured apart beyond noise that the prediction ranks the other way:");
      for (const auto& p : inverted) std::printf(" [%s]", p.c_str());
      std::printf("\n");
    }
  }
  std::printf("real runs and their scenarios: %s\n", a.real.work_dir.c_str());
  if (!a.json.empty()) {
    nlohmann::json doc = {{"median_abs_relative_error", med},
                          {"ranking_measured", by_real},
                          {"ranking_predicted", by_sim},
                          {"ranking_agrees", by_real == by_sim},
                          {"ranking_measured_with_ties", by_real_noise},
                          {"inverted_pairs_beyond_noise", inverted},
                          {"rounds", a.rounds},
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
                      "(default on CPUs: this host's, measured on first use and cached, with "
                      "--fresh-units; on GPUs: the devices the run measured and the scenario's "
                      "links)");
       sub.add_flag("--recalibrate", a->recalibrate,
                    "Measure this host's CPU profile again before validating");
       sub.add_option("--steps", a->real.steps, "Steps per real run (default 6; first is warm-up)");
       sub.add_flag("--fresh-units", a->real.measure_units,
                    "Time the model's units on each run's own processes just before it trains and "
                    "simulate with those (the profile's network and overlap stay): separates the "
                    "model's error from the machine's drift since `calibrate`");
       sub.add_option("--rounds", a->rounds,
                      "Real runs per scenario, the scenarios taking turns (default 1)");
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
