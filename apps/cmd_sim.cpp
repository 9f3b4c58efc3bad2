// `stratagem sim <scenario> [-o result.json] [--chrome-trace trace.json] [--csv spans.csv]
// [--no-fold] [--json] [--profile profile.json]`: builds the step plan, simulates it and prints
// the metrics.
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>

#include "apps/command.hpp"
#include "apps/format.hpp"
#include "apps/host_profile.hpp"
#include "apps/scenario_loading.hpp"
#include "engine/result/export.hpp"
#include "engine/result/result.hpp"
#include "engine/scenario/error.hpp"
#include "engine/scenario/fitted_profile.hpp"
#include "engine/scenario/profile.hpp"
#include "engine/scenario/scenario.hpp"
#include "sim/simulate.hpp"

namespace stratagem::cli {
namespace {

struct SimArgs {
  std::string scenario, output, chrome_trace, csv, algorithm = "fastest", profile;
  bool no_fold = false, json = false;
  double slowdown = 0;
  bool slowdown_given = false;
  std::optional<double> jitter, rank_jitter;
};

struct StageMemory {
  double peak_bytes = 0, capacity_bytes = 0;
  bool oom = false;
};

std::map<int, StageMemory> memory_by_stage(const result::RunResult& r) {
  std::map<int, StageMemory> stages;
  for (const auto& rank : r.ranks) {
    StageMemory& s = stages[rank.stage];
    s.peak_bytes = std::max(s.peak_bytes, rank.peak_memory_bytes);
    s.capacity_bytes = std::max(s.capacity_bytes, rank.capacity_bytes);
    s.oom = s.oom || rank.oom;
  }
  return stages;
}

sim::Algorithm parse_algorithm(const std::string& name) {
  for (auto a : {sim::Algorithm::ring, sim::Algorithm::tree, sim::Algorithm::fastest}) {
    if (name == sim::to_string(a)) return a;
  }
  throw SpecError("--algorithm", "unknown \"" + name + "\" (ring, tree, fastest)");
}

int run_sim(const SimArgs& a) {
  auto scenario = cli::load_scenario(a.scenario);
  if (!a.profile.empty()) {
    scenario::apply_profile_file(scenario,
                                 resolve_profile(a.profile, scenario.cluster.gpus_per_node));
  }
  sim::CostOptions cost_options;
  cost_options.algorithm = parse_algorithm(a.algorithm);
  if (a.slowdown_given) {
    if (a.slowdown < 0) throw SpecError("--comm-compute-slowdown", "must be >= 0");
    cost_options.comm_compute_slowdown = a.slowdown;
  }
  if (a.jitter) {
    if (*a.jitter < 0) throw SpecError("--compute-jitter", "must be >= 0");
    cost_options.compute_jitter_cv = a.jitter;
  }
  if (a.rank_jitter) {
    if (*a.rank_jitter < 0) throw SpecError("--rank-jitter", "must be >= 0");
    cost_options.rank_jitter_cv = a.rank_jitter;
  }
  const sim::Simulation simulation =
      sim::simulate_scenario(scenario, {.build = {.fold = !a.no_fold}, .cost = cost_options});
  const plan::StepPlan& plan = simulation.plan;
  const result::RunResult& r = simulation.result;
  const double build_s = simulation.build_s;
  const double sim_s = simulation.simulate_s;

  if (!a.output.empty()) result::save_result(r, a.output);
  if (!a.chrome_trace.empty()) result::write_chrome_trace(r, a.chrome_trace);
  if (!a.csv.empty()) result::write_spans_csv(r, a.csv);

  const auto& m = r.metrics;
  const auto stages = memory_by_stage(r);
  const int built = static_cast<int>(plan.built_ranks().size());
  if (a.json) {
    nlohmann::json j = result::to_json(r)["metrics"];
    nlohmann::json mem = nlohmann::json::array();
    for (const auto& [stage, s] : stages) {
      mem.push_back({{"stage", stage},
                     {"peak_memory_bytes", s.peak_bytes},
                     {"capacity_bytes", s.capacity_bytes},
                     {"oom", s.oom}});
    }
    j["memory_by_stage"] = std::move(mem);
    j["ranks"] = r.ranks.size();
    j["built_ranks"] = built;
    j["events"] = r.events;
    j["hardware"] = r.hardware;
    j["build_wall_s"] = build_s;
    j["sim_wall_s"] = sim_s;
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::printf("%s\n", scenario.name.c_str());
  std::printf("  simulated        %zu ranks (%d built%s), %llu events in %.2f ms (plan %.2f ms)\n",
              r.ranks.size(), built, plan.folded ? ", identical replicas folded" : "",
              static_cast<unsigned long long>(r.events), sim_s * 1e3, build_s * 1e3);
  std::printf("  hardware         %s\n", r.hardware.c_str());
  std::printf("  step time        %.4f s\n", m.step_time_s);
  std::printf("  samples/s        %.2f\n", m.samples_per_s);
  std::printf("  tokens/s         %.0f\n", m.tokens_per_s);
  std::printf("  MFU              %.1f %% of %s %s per GPU\n", 100.0 * m.mfu,
              fmt_flops(m.peak_flops.flops_per_s).c_str(), scenario::to_string(m.peak_flops.dtype));
  std::printf("  bubble fraction  %.4f\n", m.bubble_fraction);
  std::printf("  exposed comm     %.2f ms per rank (of %.2f ms communicating: %.0f %% hidden)\n",
              m.exposed_comm_s * 1e3, m.comm_s * 1e3,
              m.comm_s > 0 ? 100.0 * (1.0 - m.exposed_comm_s / m.comm_s) : 0.0);
  std::printf("  comm per step   ");
  for (int c = 0; c < result::kCommCategoryCount; ++c) {
    if (m.comm_bytes[c] > 0) {
      std::printf(" %s %.3g GB", result::to_string(static_cast<result::CommCategory>(c)),
                  m.comm_bytes[c] / units::kGB);
    }
  }
  std::printf(" (summed over ranks)\n");
  std::printf("  peak memory per stage:\n");
  for (const auto& [stage, s] : stages) {
    std::printf("    stage %-3d %8.2f GiB of %.2f GiB%s\n", stage, s.peak_bytes / units::kGiB,
                s.capacity_bytes / units::kGiB, s.oom ? "  OOM" : "");
  }
  return 0;
}

Registration reg{
    {"sim", "Simulate one training step: time, throughput, MFU, bubble, memory", 40,
     [](CLI::App& sub) {
       auto a = std::make_shared<SimArgs>();
       sub.add_option("scenario", a->scenario, "Scenario file or shipped name")->required();
       sub.add_option("-o,--output", a->output, "Write the run result (JSON)");
       sub.add_option("--chrome-trace", a->chrome_trace, "Write a Chrome trace / Perfetto JSON");
       sub.add_option("--csv", a->csv, "Write the spans as CSV");
       sub.add_flag("--no-fold", a->no_fold,
                    "Simulate every data-parallel replica instead of one per stage");
       sub.add_option("--algorithm", a->algorithm,
                      "All-reduce algorithm: ring, tree or fastest (default)");
       auto* slowdown = sub.add_option(
           "--comm-compute-slowdown", a->slowdown,
           "Compute slow-down while communication runs (default: the profile's, else 0)");
       slowdown->check(finite_non_negative());
       sub.add_option("--compute-jitter", a->jitter,
                      "Compute's spread per op (std/mean); collectives wait for the expected "
                      "slowest member (default: the profile's, else 0)")
           ->check(finite_non_negative());
       sub.add_option("--rank-jitter", a->rank_jitter,
                      "Spread of the ranks' speeds over a step (std/mean) (default: the "
                      "profile's, else 0)")
           ->check(finite_non_negative());
       sub.add_option("--profile", a->profile,
                      "Hardware profile from `stratagem calibrate` in place of the scenario's "
                      "GPU and links, or a fitted profile (`calibrate --measured`) scaling them; "
                      "\"host\": this host's CPU, measured on first use");
       sub.add_flag("--json", a->json, "Print the summary as JSON");
       return std::function<int()>([a, slowdown] {
         a->slowdown_given = slowdown->count() > 0;
         return run_sim(*a);
       });
     }}};

}  // namespace
}  // namespace stratagem::cli
