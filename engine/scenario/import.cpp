// What both importers share: message helpers and the scenario builder (flags, the cluster rule,
// the parallel layout). The readers: import_accelerate.cpp (YAML), import_deepspeed.cpp (JSON).
#include <algorithm>
#include <filesystem>

#include "engine/scenario/error.hpp"
#include "engine/scenario/import_common.hpp"
#include "engine/scenario/json_reader.hpp"
#include "engine/scenario/presets.hpp"
#include "engine/scenario/scenario.hpp"

namespace stratagem::scenario::import_detail {

std::string join(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

void unknown_value(const std::string& where, const std::string& value,
                   const std::vector<std::string>& valid, const std::string& why) {
  std::string msg = "unknown value '" + value + "'";
  if (!why.empty()) msg = "'" + value + "' " + why;
  const std::string hint = closest(value, valid);
  if (why.empty() && !hint.empty()) msg += " (did you mean '" + hint + "'?)";
  throw SpecError(where, msg + "; valid: " + join(valid));
}

std::string pick(const std::string& where, const std::string& value,
                 const std::vector<std::string>& valid) {
  for (const auto& v : valid) {
    if (v == value) return value;
  }
  unknown_value(where, value, valid);
}

std::int64_t parse_integer(const std::string& where, const std::string& text, std::int64_t min,
                           std::int64_t max) {
  std::size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size()) {
    throw SpecError(where, "expected an integer or 'auto', got '" + text + "'");
  }
  if (value < min || value > max) {
    throw SpecError(where, "must be in [" + std::to_string(min) + ", " + std::to_string(max) +
                               "], got " + text);
  }
  return value;
}

nlohmann::json build_scenario(const Imported& in, const ImportOptions& o, const std::string& file) {
  preset(PresetKind::model, o.model, "--model");  // a clear error before anything else
  std::string cluster_name = o.cluster;
  if (cluster_name.empty()) cluster_name = in.cpu ? "laptop-cpu" : "dgx-a100-80gb";
  const nlohmann::json& cluster_preset = preset(PresetKind::cluster, cluster_name, "--cluster");

  // Each tensor- and pipeline-parallel group of tp × pp GPUs is one data-parallel rank: the
  // batch arithmetic counts those ranks, the cluster all GPUs.
  const int model_parallel = in.tp * in.pp;
  const std::string ranks = model_parallel == 1 ? "GPUs" : "data-parallel ranks";
  int machines = o.num_machines > 0 ? o.num_machines : in.num_machines.value_or(0);
  int processes = o.num_processes > 0 ? o.num_processes : in.num_processes.value_or(0);
  const int micro = o.micro_batch_size > 0 ? o.micro_batch_size : in.micro_batch.value_or(1);
  std::optional<int> accum = o.grad_accum > 0 ? std::optional<int>(o.grad_accum) : in.grad_accum;
  if (processes == 0 && in.train_batch && accum) {
    // DeepSpeed: train_batch_size = micro × accumulation × data-parallel ranks.
    const std::int64_t per_rank = std::int64_t{micro} * *accum;
    if (*in.train_batch % per_rank != 0) {
      throw SpecError(in.train_batch_where,
                      std::to_string(*in.train_batch) +
                          " is not a multiple of train_micro_batch_size_per_gpu × "
                          "gradient_accumulation_steps = " +
                          std::to_string(per_rank));
    }
    processes = static_cast<int>(*in.train_batch / per_rank) * model_parallel;
  }
  if (machines == 0) machines = processes > 0 ? 1 : cluster_preset.value("nodes", 1);
  if (processes == 0) processes = machines * cluster_preset.value("gpus_per_node", 1);
  if (processes % machines != 0) {
    throw SpecError(file + ": num_processes", std::to_string(processes) +
                                                  " processes do not split evenly over " +
                                                  std::to_string(machines) + " machines");
  }
  const int per_machine = processes / machines;
  if (o.cluster.empty() && !in.cpu && per_machine > 8) {
    throw SpecError(file + ": num_processes",
                    std::to_string(per_machine) +
                        " GPUs per machine exceed a DGX's 8; pass --cluster with a preset "
                        "(see `stratagem presets clusters`) or set num_machines");
  }
  if (processes % in.tp != 0) {
    throw SpecError(in.tp_where.empty() ? file + ": num_processes" : in.tp_where,
                    "tp = " + std::to_string(in.tp) + " does not divide the " +
                        std::to_string(processes) +
                        " processes (dp = processes / (tp × pp) must be whole)");
  }
  if (processes % model_parallel != 0) {
    throw SpecError(in.pp_where.empty() ? file + ": num_processes" : in.pp_where,
                    "tp × pp = " + std::to_string(in.tp) + " × " + std::to_string(in.pp) + " = " +
                        std::to_string(model_parallel) + " does not divide the " +
                        std::to_string(processes) +
                        " processes (dp = processes / (tp × pp) must be whole)");
  }
  const int dp = processes / model_parallel;
  if (!accum) {
    accum = 1;
    if (in.train_batch) {
      const std::int64_t per_step = std::int64_t{micro} * dp;
      if (*in.train_batch % per_step != 0) {
        throw SpecError(in.train_batch_where, std::to_string(*in.train_batch) +
                                                  " is not a multiple of micro batch × " + ranks +
                                                  " = " + std::to_string(per_step));
      }
      accum = static_cast<int>(*in.train_batch / per_step);
    }
  }
  const std::int64_t global = std::int64_t{micro} * *accum * dp;
  if (in.train_batch && *in.train_batch != global) {
    throw SpecError(in.train_batch_where, std::to_string(*in.train_batch) +
                                              " ≠ train_micro_batch_size_per_gpu × "
                                              "gradient_accumulation_steps × " +
                                              ranks + " = " + std::to_string(micro) + " × " +
                                              std::to_string(*accum) + " × " + std::to_string(dp) +
                                              " = " + std::to_string(global));
  }

  std::string precision = in.precision.empty() ? "no" : in.precision;
  if (!o.mixed_precision.empty()) {
    precision = pick("--mixed_precision", o.mixed_precision, {"no", "fp16", "bf16"});
  }
  nlohmann::json strategy = {{"dp", dp},
                             {"pp", in.pp},
                             {"micro_batch_size", micro},
                             {"grad_accum", *accum},
                             {"sharding", in.sharding},
                             {"mixed_precision", precision},
                             {"recompute", in.recompute},
                             {"offload_optimizer", in.offload}};
  if (in.tp > 1) strategy["tp"] = in.tp;
  if (in.sequence_parallel) strategy["sequence_parallel"] = true;
  // Megatron-LM's default; its interleaved schedule needs virtual stages no config here names.
  if (in.pp > 1) strategy["schedule"] = "1f1b";
  if (precision == "fp16") strategy.update(in.loss_scale);
  if (in.prefetch) strategy["prefetch"] = *in.prefetch;
  if (!in.optimizer.empty()) strategy["optimizer"] = in.optimizer;
  if (!in.stack.empty()) strategy["stack"] = in.stack;

  nlohmann::json cluster = {
      {"preset", cluster_name}, {"nodes", machines}, {"gpus_per_node", per_machine}};
  if (!o.gpu.empty()) {
    preset(PresetKind::gpu, o.gpu, "--gpu");
    cluster["gpu"] = o.gpu;
  }
  std::string description = "Imported from " + in.origin + "; cluster " + cluster_name + " with " +
                            std::to_string(machines) + " × " + std::to_string(per_machine) +
                            (o.cluster.empty() ? " (picked by process count)" : "") + ".";
  if (model_parallel > 1) {
    description += " Layout dp × tp × pp = " + std::to_string(dp) + " × " + std::to_string(in.tp) +
                   " × " + std::to_string(in.pp) + ".";
  }
  for (const auto& note : in.notes) description += " Note: " + note + ".";
  std::int64_t seq_len = o.seq_len;
  if (seq_len <= 0) {
    constexpr std::int64_t kDefaultSeqLen = 2048;
    const ModelSpec m =
        parse_model(resolve_preset(PresetKind::model, o.model, "--model"), "--model");
    seq_len = kDefaultSeqLen;
    if (m.positions == PositionKind::learned && m.max_positions > 0) {
      seq_len = std::min(seq_len, m.max_positions);
    }
  }
  nlohmann::json scenario = {
      {"name", o.model + " from " + std::filesystem::path(file).filename().string()},
      {"description", description},
      {"model", o.model},
      {"cluster", cluster},
      {"strategy", strategy},
      {"training", {{"seq_len", seq_len}, {"global_batch", global}}}};
  try {
    parse_scenario(scenario, file);
  } catch (const SpecError& e) {
    // A value the file set (tp that does not divide the heads, ...) is reported at its key.
    std::string where = file;
    for (const auto& [key, at] : in.key_where) {
      if (e.path() == key) where = at;
    }
    throw SpecError(where, std::string("the imported scenario is invalid: ") + e.what());
  }
  return scenario;
}

}  // namespace stratagem::scenario::import_detail
