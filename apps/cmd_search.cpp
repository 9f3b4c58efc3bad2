// `stratagem search --model M --cluster C [--nodes N] [--global_batch B] [--seq_len S]`:
// the best strategies by simulated throughput and the throughput/memory Pareto front.
// `--profile p.json` searches on a calibrated machine: its devices (one per profiled process,
// or --cluster's layout when given) with the measured compute and communication costs.
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <optional>
#include <thread>

#include "apps/command.hpp"
#include "apps/format.hpp"
#include "apps/host_profile.hpp"
#include "engine/scenario/error.hpp"
#include "engine/scenario/fitted_profile.hpp"
#include "engine/scenario/json_reader.hpp"
#include "engine/scenario/presets.hpp"
#include "engine/scenario/profile.hpp"
#include "engine/scenario/scenario.hpp"
#include "tune/expected_error.hpp"
#include "tune/search.hpp"

namespace stratagem::cli {
namespace {

struct Options {
  std::string model = "llama2-7b";
  std::string cluster = "dgx-a100-80gb";
  int nodes = 0;
  std::int64_t global_batch = 256;
  std::int64_t seq_len = 2048;
  int top = 10;
  int threads = 0;
  bool exhaustive = false;
  std::vector<std::string> precisions;
  std::vector<std::string> attentions;
  std::string profile;
  std::string stack;
  bool compile = false;
  bool cluster_given = false;
  bool json = false;
  bool quiet = false;
};

nlohmann::json candidate_json(const tune::Candidate& c) {
  const auto& st = c.scenario.strategy;
  return {{"label", c.label},
          {"strategy", scenario::to_json(st)},
          {"step_time_s", c.step_time_s},
          {"tokens_per_s", c.tokens_per_s},
          {"mfu", c.mfu},
          {"bubble_fraction", c.bubble_fraction},
          {"exposed_comm_s", c.exposed_comm_s},
          {"peak_memory_bytes", c.peak_memory_bytes}};
}

int run(const Options& o) {
  nlohmann::json cluster = {{"preset", o.cluster}};
  std::optional<scenario::HardwareProfile> profile;
  std::optional<scenario::FittedProfile> fitted;
  std::string cluster_name = o.cluster;
  if (!o.profile.empty()) {
    // "host": measured with the --cluster's devices per node, else one process per core (as
    // `calibrate`).
    const std::string file =
        o.profile != "host" ? o.profile
        : o.cluster_given
            ? host_profile(
                  scenario::parse_cluster(
                      scenario::resolve_preset(scenario::PresetKind::cluster, cluster, "--cluster"),
                      "--cluster")
                      .gpus_per_node,
                  false)
            : host_profile(static_cast<int>(std::max(2u, std::thread::hardware_concurrency())),
                           false);
    const nlohmann::json doc = scenario::read_json_file(file);
    if (scenario::is_fitted_profile(doc)) {
      fitted = scenario::parse_fitted_profile(doc, file);
    } else {
      profile = scenario::parse_profile(doc, file);
    }
  }
  if (profile) {
    cluster_name = "profile " + profile->name;
    if (!o.cluster_given) {
      // One device per profiled process on one machine; apply_profile fills in the rest.
      const int devices =
          profile->network ? profile->network->processes : profile->machine.processes;
      cluster = {{"name", cluster_name},
                 {"gpus_per_node", devices},
                 {"gpu", scenario::to_json(scenario::profile_gpu(*profile))},
                 {"intra_node", {{"bandwidth_GBps", 1}}}};
    }
  }
  if (o.nodes > 0) cluster["nodes"] = o.nodes;
  // Any valid strategy will do as the starting point: the search replaces it.
  nlohmann::json base_json = {{"name", o.model + " on " + cluster_name},
                              {"model", {{"preset", o.model}}},
                              {"cluster", cluster},
                              {"strategy", nlohmann::json::object()},
                              {"training", {{"seq_len", o.seq_len}}}};
  // Resolve the world size first so the starting strategy validates.
  scenario::ClusterSpec c = scenario::parse_cluster(
      scenario::resolve_preset(scenario::PresetKind::cluster, cluster, "--cluster"), "--cluster");
  // The starting strategy is plain data parallelism over every GPU, with one sample per GPU;
  // the search's candidates take the asked global batch, each dividing it by its own dp (a
  // global batch that the whole world does not divide can still suit tp × pp × cp > 1).
  base_json["strategy"] = {{"dp", c.world_size()}, {"micro_batch_size", 1}};
  base_json["training"]["global_batch"] = c.world_size();
  {
    scenario::StrategySpec st;  // the flags alone, checked as parsing checks them
    scenario::apply_stack_flags(st, {o.stack, o.compile, ""}, c.gpu);
    if (!o.stack.empty()) base_json["strategy"]["stack"] = scenario::to_string(st.stack);
    if (o.compile) base_json["strategy"]["compile"] = true;
  }
  auto base = scenario::parse_scenario(base_json, "search");
  if (profile) {
    scenario::apply_profile(base, *profile);
    c = base.cluster;
  }
  if (fitted) {
    scenario::apply_fitted_profile(base, *fitted);
    c = base.cluster;
  }
  base.training.global_batch = o.global_batch;  // the candidates' (see above)

  tune::SearchOptions options;
  options.keep_top = o.exhaustive ? 0 : o.top;  // --top is at least 1
  options.threads = o.threads;
  if (!o.precisions.empty()) {
    options.precisions.clear();
    for (const auto& p : o.precisions) {
      if (p == "no" || p == "fp32")
        options.precisions.push_back(scenario::Precision::no);
      else if (p == "fp16")
        options.precisions.push_back(scenario::Precision::fp16);
      else if (p == "bf16")
        options.precisions.push_back(scenario::Precision::bf16);
      else if (p == "fp8")
        options.precisions.push_back(scenario::Precision::fp8);
      else
        throw SpecError("--mixed_precision", "unknown '" + p + "'; valid: no, fp16, bf16, fp8");
    }
    // The list given is the list tried: fp8 only when named.
    options.fp8_when_available = false;
  }
  if (!o.attentions.empty()) {
    options.attentions.clear();
    for (const auto& a : o.attentions) {
      if (a == "flash")
        options.attentions.push_back(scenario::Attention::flash);
      else if (a == "eager")
        options.attentions.push_back(scenario::Attention::eager);
      else
        throw SpecError("--attention", "unknown '" + a + "'; valid: flash, eager");
    }
  }
  const bool tty = isatty(STDERR_FILENO) && !o.quiet;
  auto progress = [&](int done, int total) {
    if (!tty || total == 0 || (done % 16 != 0 && done != total)) return;
    const int width = 30, filled = width * done / total;
    std::fprintf(stderr, "\r[%s%s] %d/%d configurations", std::string(filled, '#').c_str(),
                 std::string(width - filled, '.').c_str(), done, total);
    if (done == total) std::fprintf(stderr, "\n");
  };
  const auto result = tune::search(base, options, progress);
  const std::string stack = scenario::to_string(base.strategy.stack);
  const auto expected = tune::expected_error(c.gpu.name, stack);
  // Within the expected error of the fastest: the simulator cannot tell them apart.
  auto within = [&](const tune::Candidate& x) {
    return expected && !result.ranked.empty() &&
           x.tokens_per_s >= result.ranked.front().tokens_per_s * (1.0 - expected->median_abs);
  };
  if (o.json) {
    nlohmann::json best = nlohmann::json::array(), front = nlohmann::json::array();
    for (int i = 0; i < std::min<int>(o.top, result.ranked.size()); ++i) {
      best.push_back(candidate_json(result.ranked[i]));
      if (expected) best.back()["within_expected_error_of_best"] = within(result.ranked[i]);
    }
    nlohmann::json accuracy = nullptr;
    if (expected) {
      accuracy = {{"gpu", expected->gpu},
                  {"stack", expected->stack},
                  {"runs", expected->runs},
                  {"tables", expected->tables},
                  {"median_abs_error", expected->median_abs},
                  {"p90_abs_error", expected->p90_abs},
                  {"bias", expected->bias}};
    }
    for (int i : result.pareto) front.push_back(candidate_json(result.ranked[i]));
    std::cout << nlohmann::json{{"model", o.model},
                                {"cluster", cluster_name},
                                {"gpus", c.world_size()},
                                {"stack", scenario::to_string(base.strategy.stack)},
                                {"compile", base.strategy.compile},
                                {"enumerated", result.enumerated},
                                {"invalid", result.invalid},
                                {"memory_rejected", result.memory_rejected},
                                {"simulated", result.simulated},
                                {"pruned", result.pruned},
                                {"expected_error", accuracy},
                                {"best", best},
                                {"pareto", front}}
                     .dump(2)
              << "\n";
    return 0;
  }
  std::printf(
      "%s on %d × %s, global batch %lld × %lld tokens: %d configurations, %d invalid, "
      "%d do not fit, %d simulated, %d pruned (provably outside the best %d and the Pareto "
      "front)\n",
      o.model.c_str(), c.world_size(), c.gpu.name.c_str(), static_cast<long long>(o.global_batch),
      static_cast<long long>(o.seq_len), result.enumerated, result.invalid, result.memory_rejected,
      result.simulated, result.pruned, options.keep_top);
  std::printf("Training stack: %s (--stack to change).\n",
              scenario::stack_text(base.strategy).c_str());
  if (expected) {
    std::string tables;
    for (const auto& t : expected->tables) tables += (tables.empty() ? "" : ", ") + t;
    std::printf(
        "Expected error: median %s, p90 %s, bias %s over %d measured %s runs under %s "
        "(%s; docs/calibrate-and-validate.md); ≈ marks throughput within the median "
        "of #1's.\n",
        fmt_percent(expected->median_abs).c_str(), fmt_percent(expected->p90_abs).c_str(),
        signed_percent(expected->bias).c_str(), expected->runs, c.gpu.name.c_str(), stack.c_str(),
        tables.c_str());
  } else {
    std::printf("Expected error: unknown, no measured %s runs under %s in validation/.\n",
                c.gpu.name.c_str(), stack.c_str());
  }
  if (result.ranked.empty()) {
    std::printf("nothing fits: try more GPUs (--nodes), a smaller --global_batch or --seq_len\n");
    return 1;
  }
  auto table = [&](const std::vector<int>& indices) {
    std::vector<std::vector<std::string>> rows = {
        {"#", "strategy", "step time", "tokens/s", "vs #1", "MFU", "bubble", "peak mem"}};
    const double top = result.ranked.front().tokens_per_s;
    for (int i : indices) {
      const auto& c = result.ranked[i];
      std::string vs = i == 0 ? "" : signed_percent(c.tokens_per_s / top - 1.0);
      if (i != 0 && within(c)) vs += " ≈";
      rows.push_back({std::to_string(i + 1), c.label, fmt_time(c.step_time_s),
                      fmt_rate(c.tokens_per_s), vs, fmt_percent(c.mfu),
                      fmt_percent(c.bubble_fraction), fmt_gib(c.peak_memory_bytes)});
    }
    print_table(stdout, rows);
  };
  std::vector<int> best;
  for (int i = 0; i < std::min<int>(o.top, result.ranked.size()); ++i) best.push_back(i);
  std::printf("\nBest %zu by throughput:\n", best.size());
  table(best);
  std::printf("\nPareto front (no configuration is both faster and lighter):\n");
  table(result.pareto);
  return 0;
}

Registration reg{
    {"search", "Search strategies for a model on a cluster (simulated)", 15, [](CLI::App& sub) {
       auto o = std::make_shared<Options>();
       sub.add_option("--model", o->model, "Model preset")->capture_default_str();
       auto* cluster = sub.add_option("--cluster", o->cluster, "Cluster preset");
       cluster->capture_default_str();
       sub.add_option("--profile", o->profile,
                      "Hardware profile from `stratagem calibrate`: search on that machine "
                      "(its processes as devices unless --cluster is given); a fitted profile "
                      "(`calibrate --measured`) scales the cluster's GPU and links; \"host\": this "
                      "host's CPU, measured on first use");
       sub.add_option("--nodes", o->nodes, "Nodes (default: the preset's)")
           ->check(at_least_one());
       sub.add_option("--global_batch", o->global_batch, "Samples per step")
           ->capture_default_str()
           ->check(at_least_one());
       sub.add_option("--seq_len", o->seq_len, "Tokens per sample")
           ->capture_default_str()
           ->check(at_least_one());
       sub.add_option("--top", o->top, "How many to list")
           ->capture_default_str()
           ->check(at_least_one());
       sub.add_flag("--exhaustive", o->exhaustive,
                    "Simulate every configuration that fits (no bound-and-prune)");
       sub.add_option("--threads", o->threads,
                      "Simulations at a time (default 0: one per hardware thread; the result "
                      "is the same for any number)")
           ->check(cli::whole_number(0, 256));
       sub.add_option("--mixed_precision", o->precisions,
                      "Precisions to try (default: bf16,fp16,no, and fp8 on GPUs that have it)")
           ->delimiter(',');
       sub.add_option("--attention", o->attentions,
                      "Attention kernels to try: flash, eager (default: flash)")
           ->delimiter(',');
       sub.add_option("--stack", o->stack,
                      "Training stack: pytorch (default), megatron, megatron-legacy, deepspeed");
       sub.add_flag("--compile", o->compile, "torch.compile over the eager stack's modules");
       sub.add_flag("--json", o->json, "Print JSON");
       sub.add_flag("--quiet", o->quiet, "No progress bar");
       return std::function<int()>([o, cluster] {
         o->cluster_given = cluster->count() > 0;
         return run(*o);
       });
     }}};

}  // namespace
}  // namespace stratagem::cli
