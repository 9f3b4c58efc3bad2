// `stratagem launch [--num_processes N] [--num_machines M --machine_rank R --main_process_ip IP
// --main_process_port P] [--mixed_precision no|fp16|bf16] [--config_file accelerate.yaml]
// [strategy flags] -- ./my_training_binary args...`: `accelerate launch` for any program. Starts
// N copies with torchrun's environment plus the chosen configuration as STRATAGEM_* variables
// (what stratagem::accelerate::Accelerator reads), with `stratagem run`'s supervision: output
// prefixed by rank, the first failing rank reported and the others stopped, no orphans.
// Needs no LibTorch: it lives in the `stratagem` executable itself.
#include <iostream>
#include <optional>

#include "apps/command.hpp"
#include "engine/launch/child_process.hpp"
#include "engine/launch/launcher.hpp"
#include "engine/scenario/error.hpp"
#include "engine/scenario/import.hpp"
#include "engine/scenario/strategy.hpp"

namespace stratagem::cli {
namespace {

struct LaunchArgs {
  std::optional<int> num_processes, num_machines, machine_rank, main_process_port;
  std::optional<std::string> main_process_ip;
  std::string config_file;
  std::string mixed_precision;
  std::string sharding;
  std::string fsdp_sharding_strategy;
  bool use_fsdp = false;
  std::optional<int> zero_stage;
  std::string fsdp_wrap_cls;
  std::optional<std::int64_t> fsdp_min_num_params;
  std::optional<int> grad_accum;
  std::optional<int> pipeline_stages;
  std::optional<int> tp_size;
  std::string pipeline_schedule;
  std::optional<int> pipeline_micro_batches;
  bool cpu = false;
  bool debug = false;
  double timeout_s = 0;
  double kill_grace_s = 3;
  int liveness_s = 60;
  std::vector<std::string> command;
};

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

int run(LaunchArgs& a) {
  if (a.command.empty()) {
    throw SpecError("command",
                    "name the program to start after `--`, e.g. "
                    "`stratagem launch --num_processes 2 -- ./train`");
  }
  scenario::AccelerateLaunchConfig cfg;
  if (!a.config_file.empty()) {
    cfg = scenario::read_accelerate_launch_config(a.config_file);
    if (!cfg.warning.empty()) std::cerr << "warning: " << cfg.warning << std::endl;
  }

  launch::LaunchOptions l;
  l.num_processes = a.num_processes.value_or(cfg.num_processes.value_or(1));
  l.num_machines = a.num_machines.value_or(cfg.num_machines.value_or(1));
  l.machine_rank = a.machine_rank.value_or(cfg.machine_rank.value_or(0));
  l.main_process_ip = a.main_process_ip.value_or(cfg.main_process_ip.value_or("127.0.0.1"));
  l.main_process_port = a.main_process_port.value_or(cfg.main_process_port.value_or(29500));
  // accelerate's num_processes counts the whole job; torchrun's (and the launcher's) this
  // machine's. A config file's count is the job's; the flag, as in `stratagem run`, per machine.
  if (!a.num_processes && cfg.num_processes && l.num_machines > 1) {
    if (*cfg.num_processes % l.num_machines != 0) {
      throw SpecError(a.config_file + ": num_processes",
                      std::to_string(*cfg.num_processes) + " processes do not split over " +
                          std::to_string(l.num_machines) + " machines");
    }
    l.num_processes = *cfg.num_processes / l.num_machines;
  }
  if (l.num_processes < 1) throw SpecError("--num_processes", "must be >= 1");
  l.timeout = std::chrono::seconds(static_cast<long long>(a.timeout_s));
  l.kill_grace = std::chrono::milliseconds(static_cast<long long>(a.kill_grace_s * 1000));
  l.liveness = std::chrono::seconds(a.liveness_s);

  // The strategy: flags win over the file.
  std::string sharding = cfg.sharding;
  if (a.use_fsdp) sharding = "FULL_SHARD";
  if (!a.fsdp_sharding_strategy.empty()) {
    sharding = scenario::to_string(
        scenario::parse_sharding(a.fsdp_sharding_strategy, "--fsdp_sharding_strategy"));
  }
  if (a.zero_stage) {
    if (*a.zero_stage < 0 || *a.zero_stage > 2) {
      throw SpecError("--zero_stage",
                      "the Accelerator runs stages 0, 1 and 2 (use "
                      "--fsdp_sharding_strategy FULL_SHARD for stage 3)");
    }
    static const char* names[] = {"none", "zero1", "zero2"};
    sharding = names[*a.zero_stage];
  }
  if (!a.sharding.empty())
    sharding = scenario::to_string(scenario::parse_sharding(a.sharding, "--sharding"));
  // Refused here, before any worker starts, rather than by every worker.
  if (!sharding.empty() &&
      scenario::parse_sharding(sharding, "sharding") == scenario::Sharding::fsdp_hybrid_shard) {
    throw SpecError(!a.fsdp_sharding_strategy.empty() ? "--fsdp_sharding_strategy"
                    : !a.sharding.empty()             ? "--sharding"
                                                      : a.config_file + ": fsdp_sharding_strategy",
                    "HYBRID_SHARD is not available in the Accelerator (use FULL_SHARD, or "
                    "simulate it: strategy.sharding in a scenario)");
  }
  std::string precision = a.mixed_precision.empty() ? cfg.mixed_precision : a.mixed_precision;
  if (precision != "no" && precision != "fp16" && precision != "bf16") {
    throw SpecError("--mixed_precision", "expected no, fp16 or bf16, got \"" + precision + "\"");
  }
  const int accum = a.grad_accum.value_or(cfg.grad_accum.value_or(1));
  if (accum < 1) throw SpecError("--gradient_accumulation_steps", "must be >= 1");
  auto& env = l.env;
  env.push_back({"STRATAGEM_SHARDING", sharding});
  env.push_back({"STRATAGEM_MIXED_PRECISION", precision});
  env.push_back({"STRATAGEM_GRADIENT_ACCUMULATION_STEPS", std::to_string(accum)});
  env.push_back({"ACCELERATE_MIXED_PRECISION", precision});  // what accelerate's workers see
  if (a.cpu || cfg.cpu) env.push_back({"STRATAGEM_CPU", "1"});
  if (a.debug) env.push_back({"STRATAGEM_DEBUG", "1"});
  const std::string wrap = a.fsdp_wrap_cls.empty() ? join(cfg.fsdp_wrap_cls) : a.fsdp_wrap_cls;
  if (!wrap.empty()) env.push_back({"STRATAGEM_FSDP_WRAP_CLS", wrap});
  const auto min_params = a.fsdp_min_num_params.value_or(cfg.fsdp_min_num_params);
  if (min_params < 0) throw SpecError("--fsdp_min_num_params", "must be >= 0");
  if (min_params > 0) env.push_back({"STRATAGEM_FSDP_MIN_NUM_PARAMS", std::to_string(min_params)});
  if (a.tp_size) {
    if (*a.tp_size < 1) throw SpecError("--tp_size", "must be >= 1");
    env.push_back({"STRATAGEM_TP_SIZE", std::to_string(*a.tp_size)});
  }
  if (a.pipeline_stages) {
    if (*a.pipeline_stages < 1) throw SpecError("--pipeline_stages", "must be >= 1");
    env.push_back({"STRATAGEM_PIPELINE_STAGES", std::to_string(*a.pipeline_stages)});
  }
  if (!a.pipeline_schedule.empty()) {
    if (a.pipeline_schedule != "gpipe" && a.pipeline_schedule != "1f1b") {
      throw SpecError("--pipeline_schedule",
                      "expected gpipe or 1f1b, got \"" + a.pipeline_schedule + "\"");
    }
    env.push_back({"STRATAGEM_PIPELINE_SCHEDULE", a.pipeline_schedule});
  }
  if (a.pipeline_micro_batches) {
    if (*a.pipeline_micro_batches < 1) throw SpecError("--pipeline_micro_batches", "must be >= 1");
    env.push_back({"STRATAGEM_PIPELINE_MICRO_BATCHES", std::to_string(*a.pipeline_micro_batches)});
  }

  std::vector<std::string> argv = a.command;
  argv[0] = launch::resolve_executable(argv[0]);
  const launch::LaunchResult r = launch::launch(l, argv);
  if (r.exit_code != 0) std::cerr << "error: " << r.message << std::endl;
  return r.exit_code;
}

Registration reg{
    {"launch",
     "Start N copies of your own training program (a LibTorch program using "
     "stratagem::accelerate::Accelerator, or any program) with torchrun's environment",
     55, [](CLI::App& sub) {
       auto a = std::make_shared<LaunchArgs>();
       sub.add_option("--num_processes", a->num_processes,
                      "Processes on this machine (default: the config file's, else 1)");
       sub.add_option("--num_machines", a->num_machines, "Machines in the job");
       sub.add_option("--machine_rank", a->machine_rank, "This machine's index");
       sub.add_option("--main_process_ip", a->main_process_ip, "Address of machine 0");
       sub.add_option("--main_process_port", a->main_process_port,
                      "Rendezvous port on machine 0 (0: pick a free one; default 29500)");
       sub.add_option("--config_file", a->config_file,
                      "accelerate config (YAML) to read the job and strategy from");
       sub.add_option("--mixed_precision", a->mixed_precision, "no | fp16 | bf16");
       sub.add_flag("--cpu", a->cpu, "Run on CPUs with Gloo even when GPUs are present");
       sub.add_flag("--debug", a->debug,
                    "Show LibTorch's own warnings (profiler, allocator), hidden by default");
       sub.add_option("--sharding", a->sharding,
                      "ddp | zero1 | zero2 | FULL_SHARD | SHARD_GRAD_OP (default ddp)");
       sub.add_flag("--use_fsdp", a->use_fsdp, "FSDP (FULL_SHARD unless said otherwise)");
       sub.add_option("--fsdp_sharding_strategy", a->fsdp_sharding_strategy,
                      "FULL_SHARD | SHARD_GRAD_OP | NO_SHARD");
       sub.add_option("--fsdp_transformer_layer_cls_to_wrap", a->fsdp_wrap_cls,
                      "Module type names whose instances become FSDP units (comma-separated)");
       sub.add_option("--fsdp_min_num_params", a->fsdp_min_num_params,
                      "Size-based wrap: a submodule with at least this many parameters is a unit");
       sub.add_option("--zero_stage", a->zero_stage, "DeepSpeed ZeRO stage 0, 1 or 2");
       sub.add_option("--gradient_accumulation_steps", a->grad_accum,
                      "Micro-steps per optimizer step (Accelerator::accumulate)");
       sub.add_option("--tp_size", a->tp_size,
                      "Tensor-parallel group size (the program's AcceleratorOptions::tp_plan "
                      "names the layers)");
       sub.add_option("--pipeline_stages", a->pipeline_stages,
                      "Split a torch::nn::Sequential model over this many processes");
       sub.add_option("--pipeline_schedule", a->pipeline_schedule, "gpipe | 1f1b (default 1f1b)");
       sub.add_option("--pipeline_micro_batches", a->pipeline_micro_batches,
                      "Micro-batches per pipeline step (default: the number of stages)");
       sub.add_option("--timeout", a->timeout_s,
                      "Wall-clock limit for the whole job in seconds (default: none)");
       sub.add_option("--kill_grace", a->kill_grace_s,
                      "Seconds between SIGTERM and SIGKILL when ending workers (default 3)");
       sub.add_option("--liveness_timeout", a->liveness_s,
                      "End the job when a worker using the Accelerator sends no heartbeat, or "
                      "none progresses, for this many seconds (default 60; 0: off)")
           ->check(CLI::NonNegativeNumber);
       sub.add_option("command", a->command, "The program and its arguments, after `--`")
           ->required();
       return std::function<int()>([a] { return run(*a); });
     }}};

}  // namespace
}  // namespace stratagem::cli
