// `stratagem compare <scenario> --real --num_processes N [--strategies ...] [--steps K]
// [--json]` (execs `stratagem-runtime compare-real ...`): the scenario reshaped to N local
// processes, each strategy variant trained for real, the same table as the simulated compare
// from the measured RunResults.
#include <iostream>

#include "apps/command.hpp"
#include "apps/compare_table.hpp"
#include "apps/scenario_loading.hpp"
#include "apps/torch/real_runs.hpp"
#include "engine/scenario/error.hpp"
#include "tune/strategy_variants.hpp"

namespace stratagem::cli {
namespace {

struct Options {
  std::string scenario;
  std::vector<std::string> strategies;
  RealRunOptions real;
  bool json = false;
};

int run(Options& o) {
  const auto base = on_local_processes(cli::load_scenario(o.scenario), o.real.num_processes);
  const auto names = o.strategies.empty() ? tune::default_variants() : o.strategies;
  const auto variants = tune::make_variants(base, names);
  if (o.real.work_dir.empty()) o.real.work_dir = default_work_dir("compare");
  CompareTable table;
  std::string hardware;
  scenario::Scenario shown = base;  // the header and MFU footer: the devices as the runs measured
  for (const auto& v : variants) {
    if (!v.scenario) {
      table.add_invalid(v.name, v.error);
      continue;
    }
    if (!o.json) std::cerr << "running " << v.name << "..." << std::endl;
    const auto r = run_for_real(*v.scenario, v.name, o.real);
    hardware = r.hardware;
    shown.cluster.gpu = r.scenario.cluster.gpu;
    table.add(v.name, r.scenario, r);
  }
  table.print(shown, hardware,
              "measured on " + std::to_string(o.real.num_processes) + " processes, " +
                  std::to_string(o.real.steps) + " steps each",
              o.json);
  if (!o.json) std::printf("runs and their scenarios: %s\n", o.real.work_dir.c_str());
  return 0;
}

// Not a cmd_*.cpp: `stratagem compare --real` execs it, so it stays out of `stratagem --help`.
Registration reg{
    {"compare-real", "The measured half of `stratagem compare --real` (use that)", 200,
     [](CLI::App& sub) {
       auto o = std::make_shared<Options>();
       sub.add_option("scenario", o->scenario, "Scenario file or shipped name")->required();
       sub.add_option("--strategies", o->strategies, "Comma-separated strategy variants")
           ->delimiter(',');
       sub.add_option("--num_processes", o->real.num_processes, "Worker processes")->required();
       sub.add_option("--steps", o->real.steps, "Steps per strategy (default 6)");
       sub.add_flag("--cpu", o->real.cpu, "CPU and Gloo even when a GPU is present");
       sub.add_option("--work_dir", o->real.work_dir, "Keep the runs here");
       sub.add_flag("--json", o->json, "Print JSON");
       return std::function<int()>([o] { return run(*o); });
     }}};

}  // namespace
}  // namespace stratagem::cli
