// `stratagem commbench [--backend gloo|nccl] [--op all_reduce,...] [-b 8] [-e 64M] [-f 2]
// [-w 5] [-n 20] [-d float] [-c 1] [--num_processes N] [--json out.json]`: collective
// benchmarks with nccl-tests' columns (size, count, type, redop, root, time, algbw, busbw,
// #wrong), over the same communicators the runtime trains with. Without launcher variables it
// starts N ranks of itself; under torchrun, Slurm or mpirun it is one rank. Exit code 1 when any
// result was wrong.
#include <fstream>
#include <iostream>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "apps/command.hpp"
#include "apps/torch/self_launch.hpp"
#include "apps/torch/worker_flags.hpp"
#include "apps/version.hpp"
#include "engine/runtime/host_memory.hpp"
#include "engine/runtime/threads.hpp"
#include "engine/measure/commbench.hpp"
#include "engine/comm/communicator.hpp"
#include "engine/measure/device_bench.hpp"
#include "engine/launch/dist_env.hpp"

namespace stratagem::cli {
namespace {

struct BenchArgs {
  std::string backend;  ///< empty: nccl when a GPU is there, else gloo
  std::vector<std::string> ops = {"all_reduce"};
  std::string min_bytes = "8", max_bytes = "64M";
  double factor = 2;
  int warmup = 5, iters = 20, check = 1, root = 0;
  std::string dtype = "float";
  std::string json;
  double timeout_s = 300;
  int inject_wrong = -1;  ///< hidden: this rank's contribution is off by one (tests)
  launch::LaunchOptions launch;
  bool processes_given = false;
};

std::string backend_of(const BenchArgs& a) {
  if (!a.backend.empty()) {
    if (a.backend != "gloo" && a.backend != "nccl") {
      throw SpecError("--backend", "expected gloo or nccl, got \"" + a.backend + "\"");
    }
    return a.backend;
  }
  return at::hasCUDA() ? "nccl" : "gloo";
}

// The flags as a rank of the job receives them.
std::vector<std::string> rank_argv(const BenchArgs& a) {
  std::vector<std::string> v = {"commbench",
                                "--backend",
                                backend_of(a),
                                "-b",
                                a.min_bytes,
                                "-e",
                                a.max_bytes,
                                "-f",
                                exact(a.factor),
                                "-w",
                                std::to_string(a.warmup),
                                "-n",
                                std::to_string(a.iters),
                                "-d",
                                a.dtype,
                                "-c",
                                std::to_string(a.check),
                                "--root",
                                std::to_string(a.root),
                                "--timeout",
                                exact(a.timeout_s)};
  std::string ops;
  for (const auto& op : a.ops) ops += (ops.empty() ? "" : ",") + op;
  v.insert(v.end(), {"--op", ops});
  if (!a.json.empty()) v.insert(v.end(), {"--json", a.json});
  if (a.inject_wrong >= 0) v.insert(v.end(), {"--inject_wrong", std::to_string(a.inject_wrong)});
  return v;
}

int run_rank(const BenchArgs& a) {
  const launch::DistEnv env = launch::read_dist_env();
  const std::string backend = backend_of(a);
  const c10::Device device =
      backend == "nccl" ? c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(env.local_rank))
                        : c10::Device(c10::kCPU);
  if (device.is_cpu()) {
    runtime::set_cpu_threads(measure::cpu_threads_per_process(env.local_world_size));
    runtime::keep_freed_host_memory();
  }
  measure::CommBenchOptions o;
  o.dtype = measure::parse_bench_dtype(a.dtype, "-d");
  o.sizes = scenario::size_sweep(scenario::parse_size(a.min_bytes, "-b"),
                                 scenario::parse_size(a.max_bytes, "-e"), a.factor);
  o.warmup = a.warmup;
  o.iters = a.iters;
  o.check = a.check != 0;
  o.root = a.root;
  o.device = device;
  o.fault_rank = a.inject_wrong;
  std::vector<scenario::CommOp> ops;
  for (const auto& name : a.ops) ops.push_back(scenario::parse_comm_op(name, "--op"));

  const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(a.timeout_s * 1000));
  auto comm = comm::make_communicator(env, backend, timeout);
  const bool printer = env.rank == 0;
  if (printer) {
    std::cout << "# stratagem commbench: " << backend << ", " << env.world_size << " rank"
              << (env.world_size > 1 ? "s" : "") << " (" << env.local_world_size
              << " per machine), device " << (device.is_cpu() ? "cpu" : device.str())
              << (device.is_cpu() ? ", " + std::to_string(at::get_num_threads()) + " thread(s)/rank"
                                  : "")
              << "; warm-up " << o.warmup << ", iterations " << o.iters << ", check "
              << (o.check ? "on" : "off") << "\n# " << version_text() << std::endl;
  }
  nlohmann::json out = {{"format", "stratagem-commbench"},
                        {"version", 1},
                        {"backend", backend},
                        {"processes", env.world_size},
                        {"device", device.is_cpu() ? "cpu" : device.str()},
                        {"warmup", o.warmup},
                        {"iters", o.iters},
                        {"ops", nlohmann::json::array()}};
  std::int64_t wrong = 0;
  for (scenario::CommOp op : ops) {
    o.op = op;
    if (printer) std::cout << "#\n" << measure::commbench_header(o, env.world_size) << std::flush;
    const auto rows = measure::run_commbench(*comm, o, [&](const measure::CommBenchRow& row) {
      if (printer) std::cout << measure::commbench_row_text(row, o) << std::endl;
    });
    if (printer) std::cout << measure::commbench_footer(rows) << std::flush;
    for (const auto& r : rows) wrong += std::max<std::int64_t>(r.wrong, 0);
    out["ops"].push_back(measure::commbench_json(o, env.world_size, rows));
  }
  comm->barrier({});
  if (printer && !a.json.empty()) {
    std::ofstream f(a.json);
    f << out.dump(2) << "\n";
    if (!f) throw RuntimeError("cannot write " + a.json);
  }
  if (wrong > 0) {
    if (printer) std::cerr << "error: " << wrong << " wrong result elements" << std::endl;
    return 1;
  }
  return 0;
}

int run(BenchArgs& a) {
  if (!a.processes_given && started_as_rank()) return run_rank(a);
  // Check the flags here rather than in every rank.
  (void)backend_of(a);
  (void)measure::parse_bench_dtype(a.dtype, "-d");
  (void)scenario::size_sweep(scenario::parse_size(a.min_bytes, "-b"),
                             scenario::parse_size(a.max_bytes, "-e"), a.factor);
  for (const auto& name : a.ops) (void)scenario::parse_comm_op(name, "--op");
  if (a.root < 0 || a.root >= a.launch.num_processes * a.launch.num_machines) {
    throw SpecError("--root", "must be a rank of the job");
  }
  return launch_self(a.launch, rank_argv(a));
}

Registration reg{
    {"commbench", "Benchmark collectives like nccl-tests (Gloo on CPUs, NCCL on GPUs)", 62,
     [](CLI::App& sub) {
       auto a = std::make_shared<BenchArgs>();
       sub.add_option("--backend", a->backend,
                      "gloo or nccl (default: nccl with a GPU, else gloo)");
       sub.add_option("--op", a->ops,
                      "all_reduce, reduce_scatter, all_gather, broadcast, sendrecv "
                      "(comma-separated; default all_reduce)")
           ->delimiter(',');
       sub.add_option("-b,--minbytes", a->min_bytes, "Smallest size (K, M, G suffixes; default 8)");
       sub.add_option("-e,--maxbytes", a->max_bytes, "Largest size (default 64M)");
       sub.add_option("-f,--stepfactor", a->factor, "Size multiplication factor (default 2)");
       sub.add_option("-w,--warmup_iters", a->warmup, "Warm-up iterations per size (default 5)");
       sub.add_option("-n,--iters", a->iters, "Timed iterations per size (default 20)");
       sub.add_option("-d,--datatype", a->dtype, "float, double, bf16 or half (default float)");
       sub.add_option("-c,--check", a->check, "Check every result: 1 (default) or 0");
       sub.add_option("--root", a->root, "Broadcast root rank (default 0)");
       sub.add_option("--json", a->json, "Also write the results as JSON (rank 0)");
       sub.add_option("--timeout", a->timeout_s, "Seconds an operation may take (default 300)");
       auto& l = a->launch;
       l.num_processes = 1;
       l.main_process_port = 0;
       auto* n = sub.add_option("--num_processes", l.num_processes,
                                "Ranks to start on this machine (default 1; not under torchrun)");
       sub.add_option("--num_machines", l.num_machines, "Machines in the job");
       sub.add_option("--machine_rank", l.machine_rank, "This machine's index");
       sub.add_option("--main_process_ip", l.main_process_ip, "Address of machine 0");
       sub.add_option("--main_process_port", l.main_process_port,
                      "Rendezvous port (default 0: a free one, one machine only)");
       sub.add_option("--inject_wrong", a->inject_wrong, "Fault injection for tests: RANK")
           ->group("");
       return std::function<int()>([a, n] {
         a->processes_given = n->count() > 0;
         return run(*a);
       });
     }}};

}  // namespace
}  // namespace stratagem::cli
