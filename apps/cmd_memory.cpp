// `stratagem memory <scenario> [--json]`: what each rank holds at its peak, per tensor class,
// per pipeline stage, against the GPU's memory (engine/memory).
// `stratagem memory --params 7.5e9 --gpus 64 --zero 2 [...]`: the ZeRO paper's model states
// of one rank, without a scenario file.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "apps/command.hpp"
#include "apps/scenario_loading.hpp"
#include "engine/memory/memory.hpp"
#include "engine/scenario/error.hpp"
#include "engine/scenario/expert_mesh.hpp"
#include "engine/scenario/parallel_dims.hpp"
#include "engine/scenario/presets.hpp"
#include "engine/scenario/units.hpp"

namespace stratagem::cli {
namespace {

using plan::TensorClass;

struct Options {
  std::string scenario;
  bool json = false;
  std::string params;           // quick form, "7.5e9" or "7.5B"
  std::string gpus_text = "1";  // parsed here, so a bad value is one clear line
  std::string zero_text = "0";
  int gpus = 1;
  int zero = 0;
  std::string mixed_precision = "bf16";
  std::string optimizer = "adamw";
  std::string gpu = "a100-80gb";
  std::string master_weights = "true";
  std::string offload_optimizer = "none";
};

double gib(double bytes) {
  return bytes / units::kGiB;
}
double gb(double bytes) {
  return bytes / units::kGB;
}

// "1.558e9": parameter counts as engineers quote them.
std::string count_text(double x) {
  if (x <= 0) return "0";
  const int exponent = static_cast<int>(std::floor(std::log10(x)));
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.4ge%d", x / std::pow(10.0, exponent), exponent);
  return buf;
}

// Parameter counts with an optional K/M/B/T suffix ("7b", "175B", "7.5e9").
double parse_count(const std::string& text, const std::string& path) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    throw SpecError(path, "expected a number such as 7.5e9 or 7B, got '" + text + "'");
  }
  const std::string suffix = text.substr(used);
  double scale = 1;
  if (suffix == "k" || suffix == "K")
    scale = 1e3;
  else if (suffix == "m" || suffix == "M")
    scale = 1e6;
  else if (suffix == "b" || suffix == "B")
    scale = 1e9;
  else if (suffix == "t" || suffix == "T")
    scale = 1e12;
  else if (!suffix.empty()) {
    throw SpecError(path, "unknown suffix '" + suffix + "' in '" + text + "' (use K, M, B or T)");
  }
  value *= scale;
  if (!(value > 0) || !std::isfinite(value)) {
    throw SpecError(path, "the parameter count must be positive, got '" + text + "'");
  }
  return value;
}

// A stage's ranks are contiguous in the mesh's order: from its first to the next stage's first.
std::string ranks_text(int stage, const scenario::StrategySpec& st) {
  const scenario::MeshShape mesh = scenario::mesh_shape(st);
  const int first = mesh.rank_of(stage, 0), last = mesh.rank_of(stage + 1, 0) - 1;
  return first == last ? "rank " + std::to_string(first)
                       : "ranks " + std::to_string(first) + "-" + std::to_string(last);
}

std::string precision_text(const scenario::StrategySpec& st) {
  std::string out = scenario::to_string(st.precision);
  if (st.precision == scenario::Precision::no) return "fp32 (mixed_precision no)";
  out += scenario::has_master_weights(st) ? " with fp32 master weights" : " without master weights";
  return out;
}

// Why a class holds what it does, for the table's notes column.
std::string note(TensorClass c, const scenario::Scenario& s, const memory::RankMemory& r) {
  const auto& st = s.strategy;
  // MoE: the routed experts' share over the expert-data-parallel group.
  const std::string shard =
      " /" + std::to_string(r.shards) +
      (s.model.moe ? " (experts /" + std::to_string(scenario::expert_mesh(st).edp) + ")" : "");
  const bool offload = st.offload_optimizer == scenario::Offload::cpu;
  switch (c) {
    case TensorClass::params:
      return scenario::shards_parameters(st.sharding) ? "sharded" + shard : "full copy";
    case TensorClass::grads:
      return scenario::shards_gradients(st.sharding) ? "sharded" + shard : "full copy";
    case TensorClass::optimizer:
    case TensorClass::master_weights:
      if (c == TensorClass::master_weights && !scenario::has_master_weights(st)) return "none";
      if (offload) return "offloaded to host";
      return scenario::shards_optimizer(st.sharding) ? "sharded" + shard : "full copy";
    case TensorClass::activations: {
      const std::string unit = st.chunks > 1 ? " chunk-micro-batches" : " micro-batches";
      return "up to " + std::to_string(r.max_in_flight) + " of " +
             std::to_string(s.micro_batches() * st.chunks) + unit + " in flight";
    }
    case TensorClass::gathered_params:
      return scenario::shards_parameters(st.sharding)
                 ? "units gathered at the peak (prefetch " + std::to_string(st.prefetch) + ")"
                 : "";
    case TensorClass::comm_buckets:
      return scenario::shards_gradients(st.sharding) ? "unsharded grads awaiting reduce-scatter"
                                                     : "";
    case TensorClass::loss_scale:
      return st.precision == scenario::Precision::fp16 ? "fp16 scale + found-inf flag, 8 bytes"
                                                       : "";
    case TensorClass::fp8_weights:
      if (st.precision != scenario::Precision::fp8) return "";
      return scenario::shards_parameters(st.sharding)
                 ? "amax history + scales (fp8 weights are cast per gathered unit)"
                 : "fp8 weight + transpose per linear layer, amax history + scales";
    case TensorClass::count:
      break;
  }
  return "";
}

std::string gib_text(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", gib(bytes));
  return buf;
}

// One table row: class, value, and a note when there is one (no trailing blanks).
void row(const std::string& name, const std::string& value, const std::string& text) {
  std::printf("  %-16s %10s%s%s\n", name.c_str(), value.c_str(), text.empty() ? "" : "  ",
              text.c_str());
}

void print_report(const scenario::Scenario& s, const memory::MemoryReport& report) {
  const auto& st = s.strategy;
  std::printf("%s\n", s.name.c_str());
  const std::string tp_text =
      (st.tp > 1 ? " x tp " + std::to_string(st.tp) + (st.sequence_parallel ? " (SP)" : "")
                 : std::string()) +
      (st.cp > 1 ? " x cp " + std::to_string(st.cp) : std::string()) +
      (st.ep * st.etp > 1 ? " (experts: ep " + std::to_string(st.ep) +
                                (st.etp > 1 ? " x etp " + std::to_string(st.etp) : "") + ")"
                          : std::string());
  std::printf("  model %s, %s params; %d node%s x %d %s; dp %d%s x pp %d, %s", s.model.name.c_str(),
              count_text(scenario::total_params(s.model)).c_str(), s.cluster.nodes,
              s.cluster.nodes == 1 ? "" : "s", s.cluster.gpus_per_node, s.cluster.gpu.name.c_str(),
              st.dp, tp_text.c_str(), st.pp, scenario::to_string(st.schedule));
  if (st.chunks > 1) std::printf(" (%d chunks)", st.chunks);
  std::printf("; %d micro-batch%s of %d x %lld tokens\n", s.micro_batches(),
              s.micro_batches() == 1 ? "" : "es", st.micro_batch_size,
              static_cast<long long>(s.training.seq_len));
  const bool moot = st.recompute == scenario::Recompute::selective &&
                    scenario::effective_recompute(st) == scenario::Recompute::none;
  std::printf("  sharding %s; %s; %s; recompute %s%s; %s attention\n",
              scenario::to_string(st.sharding), precision_text(st).c_str(),
              scenario::to_string(st.optimizer), scenario::to_string(st.recompute),
              moot ? " (saves nothing with flash attention)" : "",
              scenario::to_string(st.attention));
  std::printf("Peak memory per rank, GiB (1 GiB = 2^30 bytes):\n");
  for (const memory::RankMemory& r : report.stages) {
    std::printf("\nstage %d (%s): %s params on the stage%s\n", r.stage,
                ranks_text(r.stage, st).c_str(), count_text(r.stage_params).c_str(),
                st.tp > 1 ? " per tensor-parallel rank (every tp index holds an equal shard)" : "");
    row("class", "GiB", "note");
    for (int c = 0; c < plan::kTensorClassCount; ++c) {
      const auto cls = static_cast<TensorClass>(c);
      row(plan::to_string(cls), gib_text(r.bytes[c]), note(cls, s, r));
    }
    row("total (peak)", gib_text(r.peak_bytes), r.fits ? "fits" : "DOES NOT FIT");
    row("capacity", gib_text(r.capacity_bytes), s.cluster.gpu.name);
    row("headroom", gib_text(r.headroom_bytes()), "");
    if (r.host_bytes > 0) {
      row("host", gib_text(r.host_bytes), "optimizer + master weights in CPU memory");
    }
  }
  const memory::RankMemory& worst = report.worst();
  std::printf("\n");
  if (report.fits) {
    std::printf(
        "fits: every rank fits in %.2f GiB; the largest peak is %.2f GiB (%.0f%%) on "
        "stage %d\n",
        gib(report.capacity_bytes), gib(worst.peak_bytes),
        100.0 * worst.peak_bytes / report.capacity_bytes, worst.stage);
  } else {
    int short_stages = 0;
    for (const auto& r : report.stages) short_stages += r.fits ? 0 : 1;
    std::printf(
        "short by %.2f GiB: stage %d (%s) needs %.2f GiB, one %s has %.2f GiB "
        "(%d of %d stages do not fit)\n",
        gib(worst.peak_bytes - worst.capacity_bytes), worst.stage,
        ranks_text(worst.stage, st).c_str(), gib(worst.peak_bytes), s.cluster.gpu.name.c_str(),
        gib(worst.capacity_bytes), short_stages, st.pp);
  }
}

int parse_int(const std::string& text, const std::string& path) {
  std::size_t used = 0;
  int value = 0;
  try {
    value = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size()) {
    throw SpecError(path, "expected a whole number, got '" + text + "'");
  }
  return value;
}

scenario::StrategySpec quick_strategy(Options& o) {
  o.gpus = parse_int(o.gpus_text, "--gpus");
  o.zero = parse_int(o.zero_text, "--zero");
  scenario::StrategySpec st;
  st.sharding = memory::sharding_of_zero_stage(o.zero);
  if (o.mixed_precision == "no")
    st.precision = scenario::Precision::no;
  else if (o.mixed_precision == "fp16")
    st.precision = scenario::Precision::fp16;
  else if (o.mixed_precision == "bf16")
    st.precision = scenario::Precision::bf16;
  else {
    throw SpecError("--mixed_precision",
                    "unknown value '" + o.mixed_precision + "'; valid: no, fp16, bf16");
  }
  if (o.optimizer == "adam")
    st.optimizer = scenario::Optimizer::adam;
  else if (o.optimizer == "adamw")
    st.optimizer = scenario::Optimizer::adamw;
  else if (o.optimizer == "sgd")
    st.optimizer = scenario::Optimizer::sgd;
  else
    throw SpecError("--optimizer", "unknown value '" + o.optimizer + "'; valid: adam, adamw, sgd");
  if (o.master_weights != "true" && o.master_weights != "false") {
    throw SpecError("--master_weights", "expected true or false, got '" + o.master_weights + "'");
  }
  st.master_weights = o.master_weights == "true";
  if (!st.master_weights && st.precision != scenario::Precision::bf16) {
    throw SpecError("--master_weights",
                    "only bf16 training may drop the fp32 master weights (fp16 needs them; "
                    "fp32 has none)");
  }
  if (o.offload_optimizer != "none" && o.offload_optimizer != "cpu") {
    throw SpecError("--offload_optimizer",
                    "unknown value '" + o.offload_optimizer + "'; valid: none, cpu");
  }
  st.offload_optimizer =
      o.offload_optimizer == "cpu" ? scenario::Offload::cpu : scenario::Offload::none;
  if (st.offload_optimizer == scenario::Offload::cpu && o.zero == 0) {
    throw SpecError("--offload_optimizer",
                    "optimizer offload needs --zero 1 or more, as in DeepSpeed");
  }
  if (o.gpus < 1) throw SpecError("--gpus", "must be at least 1, got " + std::to_string(o.gpus));
  return st;
}

// The formula behind one class of the quick form, e.g. "2Ψ/N".
std::string formula(double bytes_per_param, bool sharded) {
  if (bytes_per_param == 0) return "0";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%gΨ%s", bytes_per_param, sharded ? "/N" : "");
  return buf;
}

int run_quick(Options& o) {
  const double params = parse_count(o.params, "--params");
  const scenario::StrategySpec st = quick_strategy(o);
  const scenario::GpuSpec gpu = scenario::parse_gpu(
      scenario::resolve_preset(scenario::PresetKind::gpu, nlohmann::json(o.gpu), "--gpu"), "--gpu");
  const memory::ModelStates m = memory::zero_model_states(params, o.gpus, o.zero, st);
  const double total = m.gpu_bytes() + m.loss_scale_bytes;
  const bool fits = total <= gpu.memory_bytes;
  const double c = scenario::compute_param_bytes(st.precision);
  const double k_s = scenario::optimizer_state_bytes_per_param(st.optimizer);
  const bool offload = st.offload_optimizer == scenario::Offload::cpu;
  const double master = scenario::has_master_weights(st) ? memory::kMasterBytesPerParam : 0.0;
  if (o.json) {
    nlohmann::json j = {{"model_states_only", true},
                        {"params", params},
                        {"gpus", o.gpus},
                        {"zero_stage", o.zero},
                        {"mixed_precision", scenario::to_string(st.precision)},
                        {"optimizer", scenario::to_string(st.optimizer)},
                        {"master_weights", scenario::has_master_weights(st)},
                        {"offload_optimizer", offload ? "cpu" : "none"},
                        {"zero_k", scenario::zero_k(st)},
                        {"classes",
                         {{"params", m.params_bytes},
                          {"grads", m.grads_bytes},
                          {"optimizer", m.optimizer_bytes},
                          {"master_weights", m.master_weights_bytes},
                          {"loss_scale", m.loss_scale_bytes}}},
                        {"host_bytes", m.host_bytes},
                        {"model_states_bytes", m.gpu_bytes()},
                        {"total_bytes", total},
                        {"gpu", o.gpu},
                        {"capacity_bytes", gpu.memory_bytes},
                        {"fits", fits}};
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::printf(
      "Model states of one rank (ZeRO paper): %s params, ZeRO-%d over N = %d GPUs, %s, "
      "%s (K = %g)\n",
      count_text(params).c_str(), o.zero, o.gpus, precision_text(st).c_str(),
      scenario::to_string(st.optimizer), scenario::zero_k(st));
  std::printf(
      "Model states only: activations, gathered parameters and buckets need a scenario "
      "(stratagem memory <scenario>).\n");
  std::printf("  %-16s %10s %10s  %s\n", "class", "GiB", "GB", "formula");
  std::printf("  (1 GiB = 2^30 bytes; 1 GB = 10^9 bytes, as in the ZeRO paper)\n");
  auto row = [](const char* name, double bytes, const std::string& f) {
    std::printf("  %-16s %10.3f %10.3f%s%s\n", name, gib(bytes), gb(bytes), f.empty() ? "" : "  ",
                f.c_str());
  };
  row("params", m.params_bytes, formula(c, o.zero >= 3));
  row("grads", m.grads_bytes, formula(c, o.zero >= 2));
  row("optimizer", m.optimizer_bytes, offload ? "on host" : formula(k_s, o.zero >= 1));
  row("master_weights", m.master_weights_bytes, offload ? "on host" : formula(master, o.zero >= 1));
  if (m.loss_scale_bytes > 0) row("loss_scale", m.loss_scale_bytes, "8 bytes (fp16)");
  row("total", total, "");
  row("capacity", gpu.memory_bytes, o.gpu);
  row("headroom", gpu.memory_bytes - total, "");
  if (offload) row("host", m.host_bytes, formula(k_s + master, true) + " in CPU memory");
  if (fits) {
    std::printf("fits: model states take %.2f GiB of the %.2f GiB of one %s\n", gib(total),
                gib(gpu.memory_bytes), o.gpu.c_str());
  } else {
    std::printf("short by %.2f GiB: model states alone need %.2f GiB, one %s has %.2f GiB\n",
                gib(total - gpu.memory_bytes), gib(total), o.gpu.c_str(), gib(gpu.memory_bytes));
  }
  return 0;
}

Registration reg{
    {"memory", "Peak memory per rank and tensor class, or model states for --params", 30,
     [](CLI::App& sub) {
       auto o = std::make_shared<Options>();
       sub.add_option("scenario", o->scenario, "Scenario file or shipped name");
       sub.add_flag("--json", o->json, "Print JSON (bytes)");
       auto* params = sub.add_option("--params", o->params,
                                     "Quick form: parameter count (7.5e9, 7B), model states only");
       std::vector<CLI::Option*> quick = {
           sub.add_option("--gpus", o->gpus_text, "Quick form: data-parallel GPUs N (default 1)"),
           sub.add_option("--zero", o->zero_text, "Quick form: ZeRO stage 0-3 (default 0)"),
           sub.add_option("--mixed_precision", o->mixed_precision,
                          "Quick form: no, fp16 or bf16 (default bf16)"),
           sub.add_option("--optimizer", o->optimizer, "Quick form: adam, adamw (default) or sgd"),
           sub.add_option("--gpu", o->gpu, "Quick form: GPU preset (default a100-80gb)"),
           sub.add_option("--master_weights", o->master_weights,
                          "Quick form: true or false (bf16 only)"),
           sub.add_option("--offload_optimizer", o->offload_optimizer, "Quick form: none or cpu")};
       return std::function<int()>([o, params, quick] {
         if (params->count() > 0) {
           if (!o->scenario.empty()) {
             throw SpecError("--params", "give a scenario or --params, not both");
           }
           return run_quick(*o);
         }
         for (const CLI::Option* opt : quick) {
           if (opt->count() > 0) {
             throw SpecError(opt->get_name(), "belongs to the quick form: add --params");
           }
         }
         if (o->scenario.empty()) {
           throw SpecError("memory", "give a scenario (file or shipped name) or --params");
         }
         const scenario::Scenario s = cli::load_scenario(o->scenario);
         const memory::MemoryReport report = memory::estimate_memory(s);
         if (o->json) {
           std::cout << memory::to_json(report).dump(2) << "\n";
         } else {
           print_report(s, report);
         }
         return 0;
       });
     }}};

}  // namespace
}  // namespace stratagem::cli
