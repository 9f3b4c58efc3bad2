// DeepSpeed's ds_config.json → Imported (engine/scenario/import_common.hpp).
#include <algorithm>

#include "engine/scenario/error.hpp"
#include "engine/scenario/import.hpp"
#include "engine/scenario/import_common.hpp"
#include "engine/scenario/json_reader.hpp"

namespace stratagem::scenario {

namespace import_detail {

namespace {

/// An integer, or nullopt when absent or (unless `allow_auto` is false) "auto".
std::optional<std::int64_t> json_int(const nlohmann::json& parent, const char* key,
                                     const std::string& where, std::int64_t min, std::int64_t max,
                                     bool allow_auto = true) {
  auto it = parent.find(key);
  if (it == parent.end() || it->is_null()) return std::nullopt;
  if (allow_auto && it->is_string() && it->get<std::string>() == "auto") return std::nullopt;
  if (!it->is_number_integer()) {
    throw SpecError(where, std::string("expected an integer") + (allow_auto ? " or \"auto\"" : "") +
                               ", got " + it->dump());
  }
  const auto v = it->get<std::int64_t>();
  if (v < min || v > max) {
    throw SpecError(where, "must be in [" + std::to_string(min) + ", " + std::to_string(max) +
                               "], got " + std::to_string(v));
  }
  return v;
}

/// A string under `key`, `fallback` when absent or null; another type is an error naming it.
std::string json_string(const nlohmann::json& parent, const char* key, const std::string& where,
                        const std::string& fallback) {
  auto it = parent.find(key);
  if (it == parent.end() || it->is_null()) return fallback;
  if (!it->is_string()) {
    std::string got = it->dump();
    if (got.size() > 40) got = got.substr(0, 40) + "…";
    throw SpecError(where, "expected a string, got " + got);
  }
  return it->get<std::string>();
}

/// `enabled` of a section: true, false, or nullopt for "auto" / absent.
std::optional<bool> json_enabled(const nlohmann::json& config, const char* section,
                                 const std::string& file) {
  auto it = config.find(section);
  if (it == config.end() || !it->is_object()) return std::nullopt;
  auto e = it->find("enabled");
  if (e == it->end() || (e->is_string() && e->get<std::string>() == "auto")) return std::nullopt;
  if (!e->is_boolean()) {
    throw SpecError(file + ": " + section + ".enabled",
                    "expected true, false or \"auto\", got " + e->dump());
  }
  return e->get<bool>();
}

// AutoTP training (DeepSpeed >= 0.16.4): "tensor_parallel": {"autotp_size": N}; older configs
// write "tp_size" there. autotp_size 0, DeepSpeed's default, means AutoTP is off. AutoTP has
// no sequence parallelism of Megatron's kind, so sequence_parallel stays false.
void read_tensor_parallel(const nlohmann::json& config, const std::string& file, Imported& out) {
  auto section = config.find("tensor_parallel");
  if (section == config.end() || section->is_null()) return;
  if (!section->is_object()) {
    throw SpecError(file + ": tensor_parallel",
                    "expected an object such as {\"autotp_size\": 4}, got " + section->dump());
  }
  const std::string autotp_where = file + ": tensor_parallel.autotp_size";
  const std::string tp_size_where = file + ": tensor_parallel.tp_size";
  const auto autotp = json_int(*section, "autotp_size", autotp_where, 0, 1 << 10, false);
  const auto tp_size = json_int(*section, "tp_size", tp_size_where, 1, 1 << 10, false);
  const auto degree = [](std::int64_t n) { return static_cast<int>(std::max<std::int64_t>(n, 1)); };
  if (autotp && tp_size && degree(*autotp) != *tp_size) {
    throw SpecError(autotp_where, std::to_string(*autotp) +
                                      " disagrees with tensor_parallel.tp_size " +
                                      std::to_string(*tp_size) +
                                      " (the older name of the same degree); keep one");
  }
  if (autotp) {
    out.tp = degree(*autotp);
    out.tp_where = autotp_where;
  } else if (tp_size) {
    out.tp = static_cast<int>(*tp_size);
    out.tp_where = tp_size_where;
  }
  if (!out.tp_where.empty()) out.key_where.emplace_back("strategy.tp", out.tp_where);
}

}  // namespace

Imported read_deepspeed(const std::string& file, const nlohmann::json& config) {
  if (!config.is_object()) throw SpecError(file, "expected a JSON object (a DeepSpeed config)");
  Imported out;
  out.stack = "deepspeed";
  out.origin = "DeepSpeed config " + file;
  auto at = [&](const std::string& key) { return file + ": " + key; };
  if (auto n = json_int(config, "train_micro_batch_size_per_gpu",
                        at("train_micro_batch_size_per_gpu"), 1, 1 << 24)) {
    out.micro_batch = static_cast<int>(*n);
  }
  if (auto n = json_int(config, "gradient_accumulation_steps", at("gradient_accumulation_steps"), 1,
                        1 << 24)) {
    out.grad_accum = static_cast<int>(*n);
  }
  out.train_batch =
      json_int(config, "train_batch_size", at("train_batch_size"), 1, std::int64_t{1} << 40);
  out.train_batch_where = at("train_batch_size");
  if (auto zero = config.find("zero_optimization"); zero != config.end() && zero->is_object()) {
    const auto stage = json_int(*zero, "stage", at("zero_optimization.stage"), 0, 3);
    static const char* stages[] = {"none", "zero1", "zero2", "zero3"};
    out.sharding = stages[stage.value_or(0)];
    if (auto off = zero->find("offload_optimizer"); off != zero->end() && off->is_object()) {
      const std::string where = at("zero_optimization.offload_optimizer.device");
      const std::string device = json_string(*off, "device", where, "none");
      if (device == "nvme")
        unknown_value(where, device, {"none", "cpu"}, "(NVMe offload) is not modelled");
      out.offload = pick(where, device, {"none", "cpu"});
    }
    if (auto off = zero->find("offload_param"); off != zero->end() && off->is_object()) {
      const std::string device =
          json_string(*off, "device", at("zero_optimization.offload_param.device"), "none");
      if (device != "none") {
        out.notes.push_back("offload_param.device " + device +
                            " is not modelled (parameters stay on the GPU)");
      }
    }
  }
  const auto fp16 = json_enabled(config, "fp16", file);
  auto bf16 = json_enabled(config, "bf16", file);
  if (!bf16) bf16 = json_enabled(config, "bfloat16", file);  // the older name
  if (fp16.value_or(false) && bf16.value_or(false)) {
    throw SpecError(at("bf16.enabled"), "fp16 and bf16 are both enabled; enable one");
  }
  if (fp16.value_or(false)) {
    out.precision = "fp16";
  } else if (bf16.value_or(false)) {
    out.precision = "bf16";
  } else if (!fp16 && !bf16) {
    out.precision = "";  // both "auto" or absent: the --mixed_precision flag decides
  }
  // The dynamic loss-scale keys apply whenever training ends up in fp16 (enabled or "auto").
  if (auto section = config.find("fp16");
      section != config.end() && section->is_object() && fp16.value_or(true)) {
    if (auto scale = section->find("loss_scale");
        scale != section->end() && scale->is_number() && scale->get<double>() != 0) {
      throw SpecError(at("fp16.loss_scale"), "static loss scaling (" + scale->dump() +
                                                 ") is not modelled; valid: 0 (dynamic scaling)");
    }
    for (const char* key : {"initial_scale_power", "loss_scale_window", "hysteresis"}) {
      if (auto v = json_int(*section, key, at(std::string("fp16.") + key), 0, 1 << 30)) {
        out.loss_scale[key] = *v;
      }
    }
    if (auto v = section->find("min_loss_scale"); v != section->end() && v->is_number()) {
      out.loss_scale["min_loss_scale"] = v->get<double>();
    }
  }
  if (auto opt = config.find("optimizer"); opt != config.end() && opt->is_object()) {
    const std::string where = at("optimizer.type");
    const std::string type = json_string(*opt, "type", where, "AdamW");
    const std::string t = pick(where, type, {"Adam", "AdamW", "SGD"});
    out.optimizer = t == "Adam" ? "adam" : t == "AdamW" ? "adamw" : "sgd";
  }
  read_tensor_parallel(config, file, out);
  return out;
}

namespace {

// Paths of the null values under `j` ("offload_optimizer.device").
void null_paths(const nlohmann::json& j, const std::string& path, std::vector<std::string>& out) {
  if (j.is_null()) {
    out.push_back(path);
  } else if (j.is_object()) {
    for (const auto& [key, value] : j.items()) {
      null_paths(value, path.empty() ? key : path + "." + key, out);
    }
  } else if (j.is_array()) {
    for (std::size_t i = 0; i < j.size(); ++i) {
      null_paths(j[i], path + "[" + std::to_string(i) + "]", out);
    }
  }
}

}  // namespace

DeepSpeedFile read_deepspeed_file(const std::string& file) {
  DeepSpeedFile out;
  std::vector<DuplicateKey> duplicates;
  out.config = read_json_file(file, &duplicates);
  // DeepSpeed (Python's json) keeps the last of a key written twice, and reads a null as the
  // key's default: the import does as DeepSpeed, and says so.
  for (const DuplicateKey& d : duplicates) {
    out.notes.push_back((d.path.empty() ? d.key : d.path + "." + d.key) + " written twice (" +
                        d.first_at + " and " + d.at + "; the last applies)");
  }
  std::vector<std::string> nulls;
  null_paths(out.config, "", nulls);
  for (const std::string& n : nulls) out.notes.push_back(n + " is null (read as absent)");
  return out;
}

}  // namespace import_detail

nlohmann::json import_deepspeed(const std::string& json_file, const ImportOptions& options,
                                std::string* warning) {
  using namespace import_detail;
  const DeepSpeedFile file = read_deepspeed_file(json_file);
  if (warning) *warning = file.notes.empty() ? "" : json_file + ": " + join(file.notes, "; ");
  return build_scenario(read_deepspeed(json_file, file.config), options, json_file);
}

}  // namespace stratagem::scenario
