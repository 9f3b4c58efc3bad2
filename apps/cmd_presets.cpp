// `stratagem presets [models|gpus|clusters] [NAME] [--json]`: the model, GPU and cluster
// presets (scenarios/presets/*.json) with their key figures; with a NAME, one preset in full
// (description and source included).
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "apps/command.hpp"
#include "engine/scenario/cluster.hpp"
#include "engine/scenario/error.hpp"
#include "engine/scenario/model.hpp"
#include "engine/scenario/presets.hpp"
#include "engine/scenario/units.hpp"

namespace stratagem::cli {
namespace {

using scenario::PresetKind;

struct Options {
  std::string kind;
  std::string name;
  bool json = false;
};

// 124.4M, 6.738B: parameter counts as model cards quote them.
std::string short_count(double x) {
  char buf[32];
  if (x >= 1e9) {
    std::snprintf(buf, sizeof buf, "%.4gB", x / 1e9);
  } else {
    std::snprintf(buf, sizeof buf, "%.4gM", x / 1e6);
  }
  return buf;
}

void print_models() {
  std::printf("%-16s %-8s %6s %6s %5s %4s %6s %7s %-7s %-9s %-8s %15s %9s %9s\n", "model", "kind",
              "layers", "hidden", "heads", "kv", "ffn", "vocab", "mlp", "norm", "experts", "params",
              "approx", "active");
  for (const auto& name : scenario::preset_names(PresetKind::model)) {
    const auto m =
        scenario::parse_model(scenario::resolve_preset(PresetKind::model, name, name), name);
    const double p = scenario::total_params(m);
    // An MoE model: routed experts / top k, and each dense block's MLP width only where it has
    // dense blocks.
    const bool dense_mlp = scenario::block_count(m, scenario::BlockKind::dense) > 0;
    const std::string experts =
        m.moe ? std::to_string(m.moe->experts) + "/" + std::to_string(m.moe->top_k) : "-";
    const std::string ffn =
        dense_mlp ? std::to_string(m.ffn_hidden)
                  : std::to_string(m.moe->expert_ffn_hidden);  // no dense block: an expert's
    std::printf("%-16s %-8s %6lld %6lld %5lld %4lld %6s %7lld %-7s %-9s %-8s %15.0f %9s %9s\n",
                name.c_str(), m.kind == scenario::ModelKind::encoder ? "encoder" : "decoder",
                static_cast<long long>(m.layers), static_cast<long long>(m.hidden),
                static_cast<long long>(m.heads), static_cast<long long>(m.kv_heads), ffn.c_str(),
                static_cast<long long>(m.vocab),
                m.mlp == scenario::MlpKind::swiglu ? "swiglu" : "gelu",
                m.norm == scenario::NormKind::rmsnorm ? "rmsnorm" : "layernorm", experts.c_str(), p,
                short_count(p).c_str(), short_count(scenario::active_params(m)).c_str());
  }
}

void print_gpus() {
  std::printf("%-14s %8s %8s %8s %8s %8s %8s %9s %12s %11s %10s\n", "gpu", "mem GiB", "fp32",
              "tf32", "fp16", "bf16", "fp8", "HBM GB/s", "matmul eff", "attn f/b", "launch us");
  std::printf("%-14s %8s %44s %9s %12s\n", "", "", "(dense peak TFLOP/s)", "", "max/half_dim");
  for (const auto& name : scenario::preset_names(PresetKind::gpu)) {
    const auto g = scenario::parse_gpu(scenario::resolve_preset(PresetKind::gpu, name, name), name);
    const double t = units::kTera;
    char eff[32], fp8[32], attention[32];
    std::snprintf(eff, sizeof eff, "%.2g/%g", g.matmul_efficiency.max,
                  g.matmul_efficiency.half_dim);
    std::snprintf(fp8, sizeof fp8, "%.4g", g.peak_fp8 / t);
    std::snprintf(attention, sizeof attention, "%.2g/%.2g", g.attention_efficiency(false),
                  g.attention_efficiency(true));
    std::printf("%-14s %8.4g %8.4g %8.4g %8.4g %8.4g %8s %9.4g %12s %11s %10.3g\n", name.c_str(),
                g.memory_bytes / units::kGiB, g.peak_fp32 / t, g.peak_tf32 / t, g.peak_fp16 / t,
                g.peak_bf16 / t, g.peak_fp8 > 0 ? fp8 : "-", g.hbm_bandwidth / units::kGB, eff,
                attention, g.kernel_launch_s / units::kMicro);
  }
}

void print_clusters() {
  // A link: line rate, NCCL's achieved fraction of it where stated, latency.
  auto link = [](const scenario::LinkSpec& l, char* out, std::size_t size) {
    if (l.efficiency != 1.0) {
      std::snprintf(out, size, "%g x%g (%g)", l.bandwidth / units::kGB, l.efficiency,
                    l.latency / units::kMicro);
    } else {
      std::snprintf(out, size, "%g (%g)", l.bandwidth / units::kGB, l.latency / units::kMicro);
    }
  };
  std::printf("%-24s %6s %-14s %22s %22s\n", "cluster", "GPUs", "gpu", "intra GB/s x eff (us)",
              "inter GB/s x eff (us)");
  for (const auto& name : scenario::preset_names(PresetKind::cluster)) {
    const auto c =
        scenario::parse_cluster(scenario::resolve_preset(PresetKind::cluster, name, name), name);
    char gpus[32], intra[32], inter[32];
    std::snprintf(gpus, sizeof gpus, "%dx%d", c.nodes, c.gpus_per_node);
    link(c.intra_node, intra, sizeof intra);
    const bool has_inter = scenario::preset(PresetKind::cluster, name, name).contains("inter_node");
    link(c.inter_node, inter, sizeof inter);
    std::printf("%-24s %6s %-14s %22s %22s%s\n", name.c_str(), gpus, c.gpu.name.c_str(), intra,
                has_inter ? inter : "-",
                c.nvlink_domain_gpus > 0
                    ? ("  NVLink domain " + std::to_string(c.nvlink_domain_gpus) + " GPUs").c_str()
                    : "");
  }
}

PresetKind parse_kind(const std::string& kind) {
  if (kind == "models" || kind == "model") return PresetKind::model;
  if (kind == "gpus" || kind == "gpu") return PresetKind::gpu;
  if (kind == "clusters" || kind == "cluster") return PresetKind::cluster;
  throw SpecError("presets", "unknown kind '" + kind + "'; valid: models, gpus, clusters");
}

int run(const Options& o) {
  const PresetKind kinds[] = {PresetKind::model, PresetKind::gpu, PresetKind::cluster};
  if (!o.name.empty()) {
    const PresetKind kind = parse_kind(o.kind);
    nlohmann::json j = scenario::preset(kind, o.name, o.name);
    if (kind == PresetKind::model) {
      const auto m = scenario::parse_model(scenario::resolve_preset(kind, o.name, o.name), o.name);
      j["total_params"] = scenario::total_params(m);
      if (m.moe) j["active_params"] = scenario::active_params(m);
      if (m.mtp_layers > 0) j["mtp_params"] = scenario::mtp_params(m);
    }
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  if (o.json) {
    nlohmann::json out = nlohmann::json::object();
    const char* keys[] = {"models", "gpus", "clusters"};
    for (int i = 0; i < 3; ++i) {
      if (!o.kind.empty() && parse_kind(o.kind) != kinds[i]) continue;
      for (const auto& name : scenario::preset_names(kinds[i])) {
        out[keys[i]][name] = scenario::preset(kinds[i], name, name);
      }
    }
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  const bool all = o.kind.empty();
  const PresetKind kind = all ? PresetKind::model : parse_kind(o.kind);
  if (all || kind == PresetKind::model) print_models();
  if (all) std::printf("\n");
  if (all || kind == PresetKind::gpu) print_gpus();
  if (all) std::printf("\n");
  if (all || kind == PresetKind::cluster) print_clusters();
  if (all) {
    std::printf(
        "\nOne in full: stratagem presets models gpt2. Use one in a scenario by name "
        "(\"model\": \"llama2-7b\") or override keys ({\"preset\": \"dgx-a100-80gb\", "
        "\"nodes\": 2}).\n");
  }
  return 0;
}

Registration reg{{"presets", "List the model, GPU and cluster presets with their key figures", 45,
                  [](CLI::App& sub) {
                    auto o = std::make_shared<Options>();
                    sub.add_option("kind", o->kind, "models, gpus or clusters (default: all)");
                    sub.add_option("name", o->name, "One preset to show in full");
                    sub.add_flag("--json", o->json, "Print the presets as JSON");
                    return std::function<int()>([o] { return run(*o); });
                  }}};

}  // namespace
}  // namespace stratagem::cli
