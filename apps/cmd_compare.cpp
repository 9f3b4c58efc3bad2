// `stratagem compare <scenario> [--strategies a,b,...] [--json]`: one table of the
// scenario's model and cluster trained with several strategies, simulated. `--profile p.json`
// simulates them on a calibrated machine instead of the scenario's GPU and links.
#include <iostream>

#include "apps/command.hpp"
#include "apps/format.hpp"
#include "engine/plan/builder.hpp"
#include "engine/spec/profile.hpp"
#include "sim/cost_models.hpp"
#include "sim/search.hpp"
#include "sim/simulator.hpp"
#include "sim/strategy_variants.hpp"

namespace stratagem::cli {
namespace {

struct Options {
  std::string scenario = "default";
  std::vector<std::string> strategies;
  std::string profile;
  bool json = false;
};

int run(const Options& o) {
  auto base = spec::load_scenario(o.scenario);
  if (!o.profile.empty()) spec::apply_profile(base, spec::load_profile(o.profile));
  const auto names = o.strategies.empty() ? sim::default_variants() : o.strategies;
  const auto variants = sim::make_variants(base, names);
  sim::Simulator simulator;
  std::vector<std::vector<std::string>> rows = {{"strategy", "layout", "step time", "tokens/s",
                                                 "MFU", "bubble", "exposed comm", "peak mem",
                                                 "fits"}};
  nlohmann::json out = nlohmann::json::array();
  for (const auto& v : variants) {
    if (!v.scenario) {
      rows.push_back({v.name, "invalid: " + v.error});
      out.push_back({{"strategy", v.name}, {"error", v.error}});
      continue;
    }
    const auto& s = *v.scenario;
    const auto r = simulator.run(plan::build_plan(s), sim::make_cost_models(s));
    double peak = 0;
    bool oom = false;
    for (const auto& rank : r.ranks) {
      peak = std::max(peak, rank.peak_memory_bytes);
      oom = oom || rank.oom;
    }
    const auto& m = r.metrics;
    rows.push_back({v.name, sim::strategy_label(s), fmt_time(m.step_time_s),
                    fmt_rate(m.tokens_per_s), fmt_percent(m.mfu), fmt_percent(m.bubble_fraction),
                    fmt_time(m.exposed_comm_s), fmt_gib(peak), oom ? "OOM" : "yes"});
    out.push_back({{"strategy", v.name},
                   {"layout", sim::strategy_label(s)},
                   {"step_time_s", m.step_time_s},
                   {"tokens_per_s", m.tokens_per_s},
                   {"samples_per_s", m.samples_per_s},
                   {"mfu", m.mfu},
                   {"bubble_fraction", m.bubble_fraction},
                   {"exposed_comm_s", m.exposed_comm_s},
                   {"peak_memory_bytes", peak},
                   {"fits", !oom}});
  }
  if (o.json) {
    std::cout << nlohmann::json{{"scenario", base.name},
                                {"hardware", sim::make_cost_models(base).profile},
                                {"strategies", out}}
                     .dump(2)
              << "\n";
    return 0;
  }
  const auto& gpu = base.cluster.gpu;
  const double peak_flops = gpu.peak(spec::compute_dtype(base.strategy.precision));
  // Whole TFLOP/s for GPUs (as before); a calibrated CPU's GFLOP/s.
  const std::string peak =
      peak_flops >= 1e12 ? fmt("%.0f TFLOP/s", peak_flops / 1e12) : fmt_flops(peak_flops);
  std::printf("%s: %s on %d × %s (%d node%s), global batch %lld × %lld tokens (simulated)\n",
              base.name.c_str(), base.model.name.c_str(), base.cluster.world_size(),
              gpu.name.c_str(), base.cluster.nodes, base.cluster.nodes > 1 ? "s" : "",
              static_cast<long long>(base.training.global_batch),
              static_cast<long long>(base.training.seq_len));
  print_table(stdout, rows);
  std::printf("MFU divides by %s peak %s per GPU; peak mem is the largest rank's, capacity %s.\n",
              spec::to_string(spec::compute_dtype(base.strategy.precision)), peak.c_str(),
              fmt_gib(gpu.memory_bytes).c_str());
  return 0;
}

Registration reg{{"compare", "Compare strategies for one scenario in one table (simulated)", 10,
                  [](CLI::App& sub) {
                    auto o = std::make_shared<Options>();
                    sub.add_option("scenario", o->scenario,
                                   "Scenario file or shipped name (default: default)");
                    sub.add_option("--strategies", o->strategies,
                                   "Comma-separated: base, ddp, zero1, zero2, zero3, fsdp, "
                                   "shard_grad_op, hybrid, gpipe, 1f1b, interleaved, offload")
                        ->delimiter(',');
                    sub.add_option("--profile", o->profile,
                                   "Hardware profile from `stratagem calibrate` in place of the "
                                   "scenario's GPU and links");
                    sub.add_flag("--json", o->json, "Print JSON");
                    return std::function<int()>([o] { return run(*o); });
                  }}};

}  // namespace
}  // namespace stratagem::cli
