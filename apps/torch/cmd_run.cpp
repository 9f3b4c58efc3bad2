// `stratagem run <scenario> --num_processes N [--cpu] [--mixed_precision no|fp16|bf16]
// [--num_machines M --machine_rank R --main_process_ip IP --main_process_port P] [-o result.json]
// [training flags]`: starts this machine's N `stratagem worker` processes with torchrun's
// environment, prints rank 0's progress and the other ranks' output prefixed with their rank,
// and ends every worker when one fails, naming it.
#include <unistd.h>

#include <climits>
#include <iostream>

#include <ATen/Context.h>

#include "apps/command.hpp"
#include "apps/torch/self_launch.hpp"
#include "apps/torch/worker_flags.hpp"
#include "engine/launch/launcher.hpp"
#include "engine/scenario/error.hpp"
#include "engine/scenario/scenario.hpp"

namespace stratagem::cli {
namespace {

struct RunArgs {
  WorkerFlags worker;
  launch::LaunchOptions launch;
  int liveness_s = 60;
};

int run(RunArgs& a) {
  finish_worker_flags(a.worker);
  auto& l = a.launch;
  l.liveness = std::chrono::seconds(a.liveness_s);
  if (l.num_processes < 1) throw SpecError("--num_processes", "must be >= 1");
  const int world = l.num_processes * l.num_machines;
  // Check the job's shape before starting anyone: the workers would all fail alike.
  const bool cpu = a.worker.args.cpu || !at::hasCUDA();
  const scenario::Scenario s =
      runtime::job_scenario(a.worker.args, cpu, l.num_machines, l.num_processes, false);
  if (s.world_size() != world) {
    throw SpecError(
        "--num_processes",
        "the scenario's strategy needs dp × pp = " + std::to_string(s.strategy.dp) + " × " +
            std::to_string(s.strategy.pp) + " = " + std::to_string(s.world_size()) +
            " processes, but " + std::to_string(l.num_machines) + " machine(s) × " +
            std::to_string(l.num_processes) + " = " + std::to_string(world) + " were asked for");
  }
  std::vector<std::string> argv = {this_executable(), "worker"};
  for (auto& w : worker_argv(a.worker)) argv.push_back(std::move(w));
  l.on_line = [](int rank, bool is_stderr, const std::string& line) {
    // Progress comes from rank 0 only and reads best unprefixed, like accelerate's output.
    const bool progress = rank == 0 && !is_stderr && line.rfind("【train】", 0) == 0;
    std::ostream& os = is_stderr ? std::cerr : std::cout;
    if (progress) {
      os << line << std::endl;
    } else {
      os << "[rank " << rank << "] " << line << std::endl;
    }
  };
  const launch::LaunchResult r = launch::launch(l, argv);
  if (r.exit_code != 0) std::cerr << "error: " << r.message << std::endl;
  return r.exit_code;
}

Registration reg{
    {"run",
     "Train for real: start N worker processes (Gloo on CPUs, NCCL on GPUs) that "
     "execute the scenario's step plan",
     60, [](CLI::App& sub) {
       auto a = std::make_shared<RunArgs>();
       add_worker_flags(sub, a->worker);
       auto& l = a->launch;
       sub.add_option("--num_processes", l.num_processes, "Worker processes on this machine")
           ->required();
       sub.add_option("--num_machines", l.num_machines, "Machines in the job");
       sub.add_option("--machine_rank", l.machine_rank, "This machine's index");
       sub.add_option("--main_process_ip", l.main_process_ip, "Address of machine 0 (rendezvous)");
       sub.add_option("--main_process_port", l.main_process_port,
                      "Rendezvous port on machine 0 (0: pick a free one, one "
                      "machine only; default 29500)");
       sub.add_option("--liveness_timeout", a->liveness_s,
                      "End the job when a worker sends no heartbeat, or none progresses, for "
                      "this many seconds, naming the rank and its op (0: off)")
           ->capture_default_str()
           ->check(CLI::NonNegativeNumber);
       return std::function<int()>([a] { return run(*a); });
     }}};

}  // namespace
}  // namespace stratagem::cli
