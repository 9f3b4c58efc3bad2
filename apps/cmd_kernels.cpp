// `stratagem kernels <scenario> [--stack S] [--compile] [--fp8_recipe R] [--json]`: the kernels one
// transformer block launches on one rank under the scenario's training stack
// (engine/workload/kernels.hpp), forward and backward, each with its shape, FLOPs, HBM bytes, what
// bounds it and its modeled time on the scenario's GPU (sim/kernel_cost.hpp), next to what the
// simulator's compute ops charge for the block (the same bytes and launches, its GEMMs at one
// efficiency for the op).
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "apps/command.hpp"
#include "apps/scenario_loading.hpp"
#include "engine/scenario/error.hpp"
#include "engine/scenario/scenario.hpp"
#include "engine/workload/kernels.hpp"
#include "engine/workload/units.hpp"
#include "sim/compute_model.hpp"
#include "sim/kernel_cost.hpp"

namespace stratagem::cli {
namespace {

struct Options {
  std::string scenario;
  std::string stack;
  bool compile = false;
  std::string fp8_recipe;
  bool json = false;
};

struct Row {
  workload::Kernel kernel;
  sim::KernelCost cost;
};

struct Pass {
  std::vector<Row> rows;
  double seconds = 0;
  double by_kind[3] = {0, 0, 0};  // gemm, attention, memory
};

Pass cost_pass(const std::vector<workload::Kernel>& kernels, const sim::RooflineModel& roofline,
               scenario::AttentionKernel attention_kernel) {
  Pass p;
  for (const workload::Kernel& k : kernels) {
    Row r{k, sim::kernel_cost(k, roofline, attention_kernel)};
    p.seconds += r.cost.seconds;
    p.by_kind[static_cast<int>(k.kind)] += r.cost.seconds;
    p.rows.push_back(std::move(r));
  }
  return p;
}

std::string shape_text(const workload::Kernel& k) {
  char buf[96];
  switch (k.kind) {
    case workload::KernelKind::gemm:
      std::snprintf(buf, sizeof buf, "%.0fx%.0fx%.0f %s", k.m, k.n, k.k,
                    scenario::to_string(k.dtype));
      break;
    case workload::KernelKind::attention:
      std::snprintf(buf, sizeof buf, "s %.0f d %.0f%s", k.seq, k.head_dim,
                    k.causal ? " causal" : "");
      break;
    case workload::KernelKind::memory:
      buf[0] = '\0';
      break;
  }
  return buf;
}

nlohmann::json pass_json(const Pass& p) {
  nlohmann::json list = nlohmann::json::array();
  for (const Row& r : p.rows) {
    nlohmann::json j = {{"name", r.kernel.name},
                        {"kind", workload::to_string(r.kernel.kind)},
                        {"flops", r.kernel.flops},
                        {"bytes", r.kernel.bytes},
                        {"bound", sim::to_string(r.cost.bound)},
                        {"seconds", r.cost.seconds}};
    if (r.kernel.kind == workload::KernelKind::gemm) {
      j["m"] = r.kernel.m;
      j["n"] = r.kernel.n;
      j["k"] = r.kernel.k;
    }
    if (r.kernel.kind != workload::KernelKind::memory) {
      j["dtype"] = scenario::to_string(r.kernel.dtype);
    }
    list.push_back(std::move(j));
  }
  return {{"kernels", list},
          {"seconds", p.seconds},
          {"gemm_seconds", p.by_kind[0]},
          {"attention_seconds", p.by_kind[1]},
          {"memory_seconds", p.by_kind[2]}};
}

void print_pass(const char* title, const Pass& p) {
  const double total = p.seconds > 0 ? p.seconds : 1;
  std::printf("%s: %zu kernels, %.1f us (GEMM %.0f%%, attention %.0f%%, memory-bound %.0f%%)\n",
              title, p.rows.size(), p.seconds * 1e6, 100 * p.by_kind[0] / total,
              100 * p.by_kind[1] / total, 100 * p.by_kind[2] / total);
  std::printf("  %-9s %-46s %-22s %9s %9s %-7s %9s %6s\n", "kind", "kernel", "shape", "GFLOP", "MB",
              "bound", "us", "share");
  for (const Row& r : p.rows) {
    std::printf("  %-9s %-46.46s %-22s %9.2f %9.2f %-7s %9.1f %5.1f%%\n",
                workload::to_string(r.kernel.kind), r.kernel.name.c_str(),
                shape_text(r.kernel).c_str(), r.kernel.flops / 1e9, r.kernel.bytes / 1e6,
                sim::to_string(r.cost.bound), r.cost.seconds * 1e6, 100 * r.cost.seconds / total);
  }
}

int run(const Options& o) {
  scenario::Scenario s = cli::load_scenario(o.scenario);
  scenario::apply_stack_flags(s.strategy, {o.stack, o.compile, o.fp8_recipe}, s.cluster.gpu);
  const sim::RooflineModel roofline =
      sim::scenario_roofline(s, sim::default_host(s.cluster.gpus_per_node));
  const workload::BlockKernels k = workload::block_kernels(s);
  const Pass fwd = cost_pass(k.forward, roofline, s.strategy.attention_kernel),
             bwd = cost_pass(k.backward, roofline, s.strategy.attention_kernel);
  // The simulator's charge for the same block: one op per unit on the roofline.
  const auto units = workload::make_units(s);
  const double roof_fwd =
      roofline.duration(workload::units_work(s.strategy, units, workload::Phase::forward, 1, 2));
  const double roof_bwd =
      roofline.duration(workload::units_work(s.strategy, units, workload::Phase::backward, 1, 2));
  const std::string stack = scenario::stack_text(s.strategy);
  if (o.json) {
    const nlohmann::json j = {{"scenario", s.name},
                              {"stack", scenario::to_string(s.strategy.stack)},
                              {"compile", s.strategy.compile},
                              {"fp8_recipe", scenario::to_string(s.strategy.fp8_recipe)},
                              {"gpu", s.cluster.gpu.name},
                              {"forward", pass_json(fwd)},
                              {"backward", pass_json(bwd)},
                              {"roofline_forward_seconds", roof_fwd},
                              {"roofline_backward_seconds", roof_bwd}};
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  const auto& st = s.strategy;
  std::printf("One block of %s on one rank: stack %s, %s, %s, micro-batch %d x %lld tokens",
              s.name.c_str(), stack.c_str(), s.cluster.gpu.name.c_str(),
              scenario::to_string(st.precision), st.micro_batch_size,
              static_cast<long long>(s.training.seq_len));
  if (st.tp > 1) std::printf(", tp %d%s", st.tp, st.sequence_parallel ? " + SP" : "");
  if (st.cp > 1) std::printf(", cp %d", st.cp);
  std::printf("\n");
  print_pass("forward", fwd);
  print_pass("backward", bwd);
  std::printf(
      "block forward + backward: %.1f us from its kernels one by one; the simulator's compute "
      "ops charge %.1f us (forward %.1f, backward %.1f)\n",
      (fwd.seconds + bwd.seconds) * 1e6, (roof_fwd + roof_bwd) * 1e6, roof_fwd * 1e6,
      roof_bwd * 1e6);
  return 0;
}

Registration reg{
    {"kernels", "The kernels one block launches under the scenario's stack, with modeled times", 35,
     [](CLI::App& sub) {
       auto o = std::make_shared<Options>();
       sub.add_option("scenario", o->scenario, "Scenario file or shipped name")->required();
       sub.add_option("--stack", o->stack,
                      "pytorch, megatron, megatron-legacy or deepspeed (default: the "
                      "scenario's strategy.stack)");
       sub.add_flag("--compile", o->compile, "torch.compile (eager stacks only)");
       sub.add_option("--fp8_recipe", o->fp8_recipe,
                      "Under fp8: tensorwise, rowwise, blockwise or mxfp8 (default: the "
                      "scenario's strategy.fp8_recipe)");
       sub.add_flag("--json", o->json, "Print JSON (seconds, bytes, FLOPs)");
       return std::function<int()>([o] { return run(*o); });
     }}};

}  // namespace
}  // namespace stratagem::cli
