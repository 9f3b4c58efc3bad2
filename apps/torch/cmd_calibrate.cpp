// `stratagem calibrate [--num_processes N] -o profile.json [--quick] [--scenario S]`: measures
// this machine with N processes running at once (engine/measure/calibrate.hpp) and writes a
// hardware profile that `sim`, `compare` and `search` take with --profile. Without launcher
// variables it starts N ranks of itself; under torchrun, Slurm or mpirun it is one rank.
#include <unistd.h>

#include <filesystem>
#include <iomanip>
#include <iostream>
#include <thread>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "apps/command.hpp"
#include "apps/torch/self_launch.hpp"
#include "apps/torch/worker_flags.hpp"
#include "apps/version.hpp"
#include "engine/comm/communicator.hpp"
#include "engine/launch/dist_env.hpp"
#include "engine/measure/calibrate.hpp"
#include "engine/measure/device_bench.hpp"
#include "engine/runtime/host_memory.hpp"
#include "engine/runtime/threads.hpp"
#include "engine/scenario/host.hpp"
#include "engine/scenario/profile.hpp"

namespace stratagem::cli {
namespace {

struct CalibrateArgs {
  std::string output;
  bool quick = false;
  bool host = false;  ///< write to this host's cache (engine/scenario/host.hpp)
  std::string name;
  std::vector<std::string> scenarios;
  std::string backend;
  double timeout_s = 300;
  launch::LaunchOptions launch;
  bool processes_given = false;
};

std::string backend_of(const CalibrateArgs& a) {
  if (!a.backend.empty()) {
    if (a.backend != "gloo" && a.backend != "nccl") {
      throw SpecError("--backend", "expected gloo or nccl, got \"" + a.backend + "\"");
    }
    return a.backend;
  }
  return at::hasCUDA() ? "nccl" : "gloo";
}

std::vector<std::string> rank_argv(const CalibrateArgs& a) {
  std::vector<std::string> v = {"calibrate",   "-o",        a.output,          "--backend",
                                backend_of(a), "--timeout", exact(a.timeout_s)};
  if (a.quick) v.push_back("--quick");
  if (a.host) v.push_back("--host");  // the rank writes -o and leaves the advice to run_host
  if (!a.name.empty()) v.insert(v.end(), {"--name", a.name});
  for (const auto& sc : a.scenarios) v.insert(v.end(), {"--scenario", sc});
  return v;
}

int run_rank(const CalibrateArgs& a) {
  if (a.host && a.output.empty()) {
    throw SpecError("--host", "starts its own processes: run it without a launcher");
  }
  const launch::DistEnv env = launch::read_dist_env();
  const std::string backend = backend_of(a);
  measure::CalibrateOptions o;
  o.quick = a.quick;
  o.name = a.name;
  o.local_processes = env.local_world_size;
  o.stratagem_version = version_text();
  o.device = backend == "nccl"
                 ? c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(env.local_rank))
                 : c10::Device(c10::kCPU);
  if (o.device.is_cpu()) {
    runtime::set_cpu_threads(measure::cpu_threads_per_process(env.local_world_size));
    runtime::keep_freed_host_memory();  // as the workers run
  }
  for (const auto& sc : a.scenarios) {
    const scenario::Scenario s = scenario::load_scenario(sc);
    for (const auto& g : measure::model_gemms(s)) o.extra_gemms.push_back(g);
    o.unit_scenarios.push_back(s);
  }
  const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(a.timeout_s * 1000));
  auto comm = comm::make_communicator(env, backend, timeout);
  const bool printer = env.rank == 0;
  if (printer) {
    std::cout << "calibrating " << env.world_size << " process" << (env.world_size > 1 ? "es" : "")
              << " (" << backend << ", " << (o.device.is_cpu() ? "cpu" : o.device.str())
              << (o.device.is_cpu()
                      ? ", " + std::to_string(at::get_num_threads()) + " thread(s) each"
                      : "")
              << ")" << (a.quick ? ", quick" : "") << std::endl;
  }
  const auto profile = measure::calibrate(*comm, o, [&](const std::string& line) {
    if (printer) std::cout << "  " << line << std::endl;
  });
  comm->barrier({});
  if (printer) {
    scenario::save_profile(profile, a.output);
    std::cout << "wrote " << a.output << " (\"" << profile.name << "\", " << std::setprecision(3)
              << profile.machine.duration_s << " s)";
    if (!a.host) std::cout << "; use it with: stratagem sim <scenario> --profile " << a.output;
    std::cout << std::endl;
  }
  return 0;
}

/// --host: a quick measurement of this host's CPU written to its cache, where `validate`
/// without --profile and `--profile host` find it. Written to a temporary file first and
/// renamed, so an interrupted measurement leaves the previous cache entry whole.
int run_host(CalibrateArgs& a) {
  if (!a.output.empty()) throw SpecError("--host", "writes this host's cache; drop -o");
  if (!a.scenarios.empty()) throw SpecError("--host", "measures the device only; drop --scenario");
  if (backend_of(a) != "gloo") throw SpecError("--host", "measures the CPU: use --backend gloo");
  const std::filesystem::path path = scenario::host_profile_path(a.launch.num_processes);
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) throw RuntimeError("cannot create " + path.parent_path().string() + ": " + ec.message());
  const std::string tmp = path.string() + ".tmp" + std::to_string(::getpid());
  a.output = tmp;
  a.quick = true;
  if (a.name.empty()) {
    a.name = "cpu x" + std::to_string(a.launch.num_processes) + " (gloo), " + scenario::hostname();
  }
  std::cout << "measuring this host's CPU with " << a.launch.num_processes
            << " processes for " << path.string() << std::endl;
  const int rc = launch_self(a.launch, rank_argv(a));
  if (rc != 0) {
    std::filesystem::remove(tmp, ec);
    return rc;
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw RuntimeError("cannot write " + path.string() + ": " + ec.message());
  std::cout << "cached " << path.string() << std::endl;
  return 0;
}

int run(CalibrateArgs& a) {
  if (!a.processes_given && started_as_rank()) return run_rank(a);
  if (a.host) return run_host(a);
  if (a.output.empty()) throw SpecError("-o", "give the profile to write (-o profile.json) or --host");
  (void)backend_of(a);
  for (const auto& sc : a.scenarios) (void)scenario::load_scenario(sc);
  return launch_self(a.launch, rank_argv(a));
}

int default_processes() {
  // One per GPU, as training would run; on CPUs one per core (workers take a core each).
  if (at::hasCUDA()) return std::max<int>(1, static_cast<int>(at::getNumGPUs()));
  return static_cast<int>(std::max(2u, std::thread::hardware_concurrency()));
}

Registration reg{
    {"calibrate",
     "Measure this machine (compute, collectives, overlap) and write a hardware profile for "
     "sim/compare/search --profile",
     63, [](CLI::App& sub) {
       auto a = std::make_shared<CalibrateArgs>();
       sub.add_option("-o,--out", a->output, "Profile to write (JSON)");
       sub.add_flag("--host", a->host,
                    "Measure this host's CPU quickly and cache it, for `validate` without "
                    "--profile and `--profile host` (replaces -o)");
       sub.add_flag("--quick", a->quick, "Fewer, shorter measurements (a few seconds; for tests)");
       sub.add_option("--name", a->name, "Profile name (default: device, processes, backend)");
       sub.add_option("--scenario", a->scenarios,
                      "Also measure this scenario's GEMM shapes and time its model's units "
                      "(embedding, block, head, optimizer) at its micro-batch; repeatable");
       sub.add_option("--backend", a->backend,
                      "gloo or nccl (default: nccl with a GPU, else gloo)");
       sub.add_option("--timeout", a->timeout_s, "Seconds an operation may take (default 300)");
       auto& l = a->launch;
       l.main_process_port = 0;
       auto* n = sub.add_option("--num_processes", l.num_processes,
                                "Processes measured at once (default: one per GPU, else one per "
                                "core and at least 2)");
       sub.add_option("--main_process_port", l.main_process_port,
                      "Rendezvous port (default 0: a free one)");
       return std::function<int()>([a, n] {
         a->processes_given = n->count() > 0;
         if (!a->processes_given) a->launch.num_processes = default_processes();
         return run(*a);
       });
     }}};

}  // namespace
}  // namespace stratagem::cli
