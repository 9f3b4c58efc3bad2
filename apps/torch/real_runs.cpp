#include "apps/torch/real_runs.hpp"

#include "engine/runtime/model_layout.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "apps/torch/self_launch.hpp"
#include "apps/torch/worker_flags.hpp"
#include "engine/launch/launcher.hpp"
#include "engine/scenario/error.hpp"

namespace stratagem::cli {

std::string default_work_dir(const std::string& what) {
  return (std::filesystem::temp_directory_path() /
          ("stratagem-" + what + "-" + std::to_string(::getpid())))
      .string();
}

scenario::Scenario on_local_processes(const scenario::Scenario& scenario, int processes) {
  if (processes < 1) throw SpecError("--num_processes", "must be >= 1");
  // Refused here, before a process is started, not by each worker.
  runtime::check_runtime_model(scenario.model);
  runtime::check_runtime_strategy(scenario.strategy);
  scenario::Scenario s = scenario;
  if (s.world_size() == processes && s.cluster.nodes == 1) return s;
  s.cluster.nodes = 1;
  s.cluster.gpus_per_node = processes;
  auto& st = s.strategy;
  if (processes % st.pp != 0) st.pp = 1, st.chunks = 1;
  st.dp = processes / st.pp;
  st.grad_accum = 0;  // validate derives it from the global batch
  try {
    scenario::validate(s);
  } catch (const SpecError& e) {
    throw SpecError("--num_processes", "reshaped to dp " + std::to_string(st.dp) + " × pp " +
                                           std::to_string(st.pp) + ": " + e.what());
  }
  return s;
}

result::RunResult run_for_real(const scenario::Scenario& scenario, const std::string& label,
                               const RealRunOptions& o) {
  namespace fs = std::filesystem;
  fs::create_directories(o.work_dir);
  const std::string scenario_file = (fs::path(o.work_dir) / (label + ".scenario.json")).string();
  const std::string result_file = (fs::path(o.work_dir) / (label + ".real.json")).string();
  {
    std::ofstream f(scenario_file);
    f << scenario::to_json(scenario).dump(2) << "\n";
    if (!f) throw RuntimeError("cannot write " + scenario_file);
  }
  std::error_code ec;
  fs::remove(result_file, ec);

  WorkerFlags flags;
  flags.args.scenario = scenario_file;
  flags.args.steps = o.steps;
  flags.args.cpu = o.cpu;
  flags.args.timeout_s = o.timeout_s;
  flags.args.output = result_file;
  flags.args.measure_units = o.measure_units;
  flags.args.log_every = 1 << 30;  // quiet: the caller prints its own progress
  std::vector<std::string> argv = {this_executable(), "worker"};
  for (auto& a : worker_argv(flags)) argv.push_back(std::move(a));

  launch::LaunchOptions launch;
  launch.num_processes = o.num_processes;
  launch.main_process_port = 0;  // a free port: runs follow each other quickly
  launch.on_line = [](int, bool, const std::string&) {};  // kept in the failure report
  const launch::LaunchResult r = launch::launch(launch, argv);
  if (r.exit_code != 0) throw RuntimeError(label + ": the real run failed: " + r.message);
  return result::load_result(result_file);
}

}  // namespace stratagem::cli
