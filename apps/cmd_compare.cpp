// `stratagem compare <scenario> [--strategies a,b,...] [--json]`: one table of the
// scenario's model and cluster trained with several strategies, simulated. `--profile p.json`
// simulates them on a calibrated machine instead of the scenario's GPU and links; `--real
// --num_processes N` trains them for real instead (apps/torch/compare_real.cpp).
#include <iostream>

#include "apps/command.hpp"
#include "apps/compare_table.hpp"
#include "apps/forward_runtime.hpp"
#include "apps/host_profile.hpp"
#include "apps/scenario_loading.hpp"
#include "engine/scenario/error.hpp"
#include "engine/scenario/fitted_profile.hpp"
#include "engine/scenario/profile.hpp"
#include "sim/cost_models.hpp"
#include "sim/simulate.hpp"
#include "tune/search.hpp"
#include "tune/strategy_variants.hpp"

namespace stratagem::cli {
namespace {

struct Options {
  std::string scenario = "default";
  std::vector<std::string> strategies;
  std::string profile;
  std::string stack;
  bool compile = false;
  bool json = false;
  bool real = false;
  int num_processes = 0;
  int steps = 0;
};

// --real: the strategies are trained for real by stratagem-runtime (LibTorch lives there).
int run_real(const Options& o) {
#ifdef STRATAGEM_RUNTIME_COMMANDS
  if (o.num_processes < 1) throw SpecError("--num_processes", "--real needs --num_processes N");
  if (!o.profile.empty()) throw SpecError("--profile", "a real compare measures the hardware");
  std::vector<std::string> args = {"compare-real", o.scenario, "--num_processes",
                                   std::to_string(o.num_processes)};
  if (!o.strategies.empty()) {
    std::string list;
    for (const auto& n : o.strategies) list += (list.empty() ? "" : ",") + n;
    args.insert(args.end(), {"--strategies", list});
  }
  if (o.steps > 0) args.insert(args.end(), {"--steps", std::to_string(o.steps)});
  if (o.json) args.push_back("--json");
  exec_runtime(args);
#else
  (void)o;
  throw SpecError("--real", "this build has no real runtime (LibTorch was not found)");
#endif
}

int run(const Options& o) {
  if (o.real) return run_real(o);
  auto base = cli::load_scenario(o.scenario);
  scenario::apply_stack_flags(base.strategy, {o.stack, o.compile, ""}, base.cluster.gpu);
  if (!o.profile.empty()) {
    scenario::apply_profile_file(base, resolve_profile(o.profile, base.cluster.gpus_per_node));
  }
  const auto names = o.strategies.empty() ? tune::default_variants() : o.strategies;
  const auto variants = tune::make_variants(base, names);
  CompareTable table;
  for (const auto& v : variants) {
    if (!v.scenario) {
      table.add_invalid(v.name, v.error);
      continue;
    }
    const auto& s = *v.scenario;
    table.add(v.name, s, sim::simulate(s));
  }
  table.print(base, sim::make_cost_models(base).profile, "simulated", o.json);
  return 0;
}

Registration reg{
    {"compare", "Compare strategies for one scenario in one table (simulated, or --real)", 10,
     [](CLI::App& sub) {
       auto o = std::make_shared<Options>();
       sub.add_option("scenario", o->scenario, "Scenario file or shipped name (default: default)");
       sub.add_option("--strategies", o->strategies,
                      "Comma-separated: base, ddp, zero1, zero2, zero3, fsdp, "
                      "shard_grad_op, hybrid, gpipe, 1f1b, interleaved, offload, tp, 3d, cp, "
                      "fp8")
           ->delimiter(',');
       sub.add_option("--profile", o->profile,
                      "Hardware profile from `stratagem calibrate` in place of the "
                      "scenario's GPU and links, or a fitted profile (`calibrate --measured`) "
                      "scaling them; \"host\": this host's CPU, measured on first use");
       sub.add_option("--stack", o->stack,
                      "Training stack for every strategy: pytorch, megatron, megatron-legacy, "
                      "deepspeed (default: the scenario's)");
       sub.add_flag("--compile", o->compile, "torch.compile over the eager stack's modules");
       sub.add_flag("--json", o->json, "Print JSON");
       sub.add_flag("--real", o->real,
                    "Train each strategy for real on local processes (Gloo on CPUs, "
                    "NCCL on GPUs) and tabulate the measurements");
       sub.add_option("--num_processes", o->num_processes,
                      "With --real: worker processes (the scenario is reshaped to "
                      "them)");
       sub.add_option("--steps", o->steps,
                      "With --real: steps per strategy (default 6; the step time is "
                      "the median after the first)");
       return std::function<int()>([o] { return run(*o); });
     }}};

}  // namespace
}  // namespace stratagem::cli
