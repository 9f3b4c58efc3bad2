#pragma once
// The table `stratagem compare` prints, shared by the simulated compare and `compare --real`
// (which runs in stratagem-runtime): one row per strategy from its RunResult.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/format.hpp"
#include "engine/result/result.hpp"
#include "engine/scenario/scenario.hpp"
#include "tune/search.hpp"

namespace stratagem::cli {

class CompareTable {
 public:
  CompareTable() {
    rows_.push_back({"strategy", "layout", "step time", "tokens/s", "MFU", "bubble", "exposed comm",
                     "peak mem", "fits"});
  }

  void add(const std::string& name, const scenario::Scenario& s, const result::RunResult& r) {
    double peak = 0;
    bool oom = false;
    for (const auto& rank : r.ranks) {
      peak = std::max(peak, rank.peak_memory_bytes);
      oom = oom || rank.oom;
    }
    const auto& m = r.metrics;
    rows_.push_back({name, tune::strategy_label(s), fmt_time(m.step_time_s),
                     fmt_rate(m.tokens_per_s), fmt_percent(m.mfu), fmt_percent(m.bubble_fraction),
                     fmt_time(m.exposed_comm_s), fmt_gib(peak), oom ? "OOM" : "yes"});
    json_.push_back({{"strategy", name},
                     {"layout", tune::strategy_label(s)},
                     {"step_time_s", m.step_time_s},
                     {"tokens_per_s", m.tokens_per_s},
                     {"samples_per_s", m.samples_per_s},
                     {"mfu", m.mfu},
                     {"bubble_fraction", m.bubble_fraction},
                     {"exposed_comm_s", m.exposed_comm_s},
                     {"peak_memory_bytes", peak},
                     {"fits", !oom}});
  }

  void add_invalid(const std::string& name, const std::string& why) {
    rows_.push_back({name, "invalid: " + why});
    json_.push_back({{"strategy", name}, {"error", why}});
  }

  /// `how`: "simulated" or "measured on 2 processes".
  void print(const scenario::Scenario& base, const std::string& hardware, const std::string& how,
             bool json) const {
    if (json) {
      std::cout << nlohmann::json{{"scenario", base.name},
                                  {"hardware", hardware},
                                  {"executor", how},
                                  {"stack", scenario::to_string(base.strategy.stack)},
                                  {"compile", base.strategy.compile},
                                  {"strategies", json_}}
                       .dump(2)
                << "\n";
      return;
    }
    const auto& gpu = base.cluster.gpu;
    std::printf("%s: %s on %d × %s (%d node%s), global batch %lld × %lld tokens (%s)\n",
                base.name.c_str(), base.model.name.c_str(), base.cluster.world_size(),
                gpu.name.c_str(), base.cluster.nodes, base.cluster.nodes > 1 ? "s" : "",
                static_cast<long long>(base.training.global_batch),
                static_cast<long long>(base.training.seq_len), how.c_str());
    print_table(stdout, rows_);
    const double peak_flops = gpu.peak(scenario::compute_dtype(base.strategy.precision));
    // Whole TFLOP/s for GPUs; a CPU's GFLOP/s.
    const std::string peak =
        peak_flops >= 1e12 ? fmt("%.0f TFLOP/s", peak_flops / 1e12) : fmt_flops(peak_flops);
    std::printf(
        "MFU divides by %s peak %s per device; peak mem is the largest rank's, capacity %s.\n",
        scenario::to_string(scenario::compute_dtype(base.strategy.precision)), peak.c_str(),
        fmt_gib(gpu.memory_bytes).c_str());
    std::printf("Training stack: %s (strategy.stack; --stack to change).\n",
                scenario::stack_text(base.strategy).c_str());
  }

 private:
  std::vector<std::vector<std::string>> rows_;
  nlohmann::json json_ = nlohmann::json::array();
};

}  // namespace stratagem::cli
