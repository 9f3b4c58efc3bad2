#include "engine/spec/import.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include "engine/spec/error.hpp"
#include "engine/spec/json_reader.hpp"
#include "engine/spec/presets.hpp"
#include "engine/spec/scenario.hpp"

namespace stratagem::spec {

namespace {

// What both config formats say about a training run, before flags and the cluster rule.
struct Imported {
  std::string origin;  ///< "accelerate config x.yaml", "DeepSpeed config y.json"
  std::optional<int> num_processes;
  std::optional<int> num_machines;
  bool cpu = false;
  std::string sharding = "none";
  std::string precision = "no";
  nlohmann::json loss_scale = nlohmann::json::object();  ///< fp16 dynamic-scaling keys
  std::optional<int> micro_batch;
  std::optional<int> grad_accum;
  std::optional<std::int64_t> train_batch;  ///< DeepSpeed train_batch_size
  std::string train_batch_where;            ///< where train_batch_size was read, for errors
  std::string recompute = "none";
  std::string offload = "none";
  std::optional<int> prefetch;
  std::string optimizer;  ///< "" keeps the scenario default
  std::vector<std::string> notes;
};

std::string join(const std::vector<std::string>& items, const char* separator = ", ") {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

[[noreturn]] void unknown_value(const std::string& where, const std::string& value,
                                const std::vector<std::string>& valid,
                                const std::string& why = "") {
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

// ---- accelerate (YAML) -------------------------------------------------------------------

class YamlFile {
 public:
  explicit YamlFile(std::string file) : file_(std::move(file)) {
    std::ifstream in(file_, std::ios::binary);
    if (!in) throw SpecError(file_, "cannot open file");
    std::stringstream text;
    text << in.rdbuf();
    try {
      root_ = YAML::Load(text.str());
    } catch (const YAML::Exception& e) {
      throw SpecError(
          file_ + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1),
          "invalid YAML: " + e.msg);
    }
    if (!root_.IsMap()) throw SpecError(file_, "expected a YAML mapping of accelerate settings");
  }

  const YAML::Node& root() const { return root_; }
  const std::string& file() const { return file_; }

  /// "file:line:col: key.path" for a node that exists.
  std::string where(const YAML::Node& node, const std::string& key_path) const {
    if (!node.IsDefined()) return file_ + ": " + key_path;
    const YAML::Mark m = node.Mark();
    if (m.is_null()) return file_ + ": " + key_path;
    return file_ + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1) + ": " +
           key_path;
  }

  /// The scalar under `key`, or nullopt when absent or null.
  std::optional<std::string> scalar(const YAML::Node& parent, const std::string& key,
                                    const std::string& key_path) const {
    const YAML::Node node = parent[key];
    if (!node.IsDefined() || node.IsNull()) return std::nullopt;
    if (!node.IsScalar()) throw SpecError(where(node, key_path), "expected a single value");
    return node.Scalar();
  }

  /// An integer, or nullopt when absent or "auto".
  std::optional<std::int64_t> integer(const YAML::Node& parent, const std::string& key,
                                      const std::string& key_path, std::int64_t min,
                                      std::int64_t max) const {
    const auto text = scalar(parent, key, key_path);
    if (!text || *text == "auto") return std::nullopt;
    return parse_integer(where(parent[key], key_path), *text, min, max);
  }

  std::optional<bool> boolean(const YAML::Node& parent, const std::string& key,
                              const std::string& key_path) const {
    const auto text = scalar(parent, key, key_path);
    if (!text) return std::nullopt;
    bool value = false;
    if (!YAML::convert<bool>::decode(parent[key], value)) {
      throw SpecError(where(parent[key], key_path), "expected true or false, got '" + *text + "'");
    }
    return value;
  }

 private:
  std::string file_;
  YAML::Node root_;
};

Imported read_deepspeed(const std::string& file, const nlohmann::json& config);

void read_fsdp(const YamlFile& y, const YAML::Node& fsdp, Imported& out) {
  // accelerate writes the strategy by name (newer) or by its number (older: 1..5, in the order
  // of torch's ShardingStrategy enum). FSDP2 (fsdp_version: 2) has reshard_after_forward
  // instead: true is FULL_SHARD, false SHARD_GRAD_OP.
  const auto version = y.integer(fsdp, "fsdp_version", "fsdp_config.fsdp_version", 1, 2);
  if (version && *version == 2) {
    const auto reshard =
        y.boolean(fsdp, "fsdp_reshard_after_forward", "fsdp_config.fsdp_reshard_after_forward");
    out.sharding = reshard.value_or(true) ? "FULL_SHARD" : "SHARD_GRAD_OP";
  } else if (const auto s =
                 y.scalar(fsdp, "fsdp_sharding_strategy", "fsdp_config.fsdp_sharding_strategy")) {
    static const std::vector<std::string> names = {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD",
                                                   "HYBRID_SHARD", "HYBRID_SHARD_ZERO2"};
    const std::vector<std::string> valid = {"FULL_SHARD (1)", "SHARD_GRAD_OP (2)", "NO_SHARD (3)",
                                            "HYBRID_SHARD (4)"};
    const std::string where =
        y.where(fsdp["fsdp_sharding_strategy"], "fsdp_config.fsdp_sharding_strategy");
    std::string name = *s;
    if (!s->empty() && std::isdigit(static_cast<unsigned char>((*s)[0]))) {
      const auto n = parse_integer(where, *s, 1, 5);
      name = names[static_cast<std::size_t>(n - 1)];
    }
    if (name == "HYBRID_SHARD_ZERO2") {
      unknown_value(where, name, valid,
                    "(ZeRO-2 inside a node, replicated across) is not modelled");
    }
    if (name != "FULL_SHARD" && name != "SHARD_GRAD_OP" && name != "NO_SHARD" &&
        name != "HYBRID_SHARD") {
      std::string msg = "unknown value '" + name + "'";
      const std::string hint = closest(name, {names.begin(), names.begin() + 4});
      if (!hint.empty()) msg += " (did you mean '" + hint + "'?)";
      throw SpecError(where, msg + "; valid: " + join(valid));
    }
    if (name == "NO_SHARD") name = "none";
    out.sharding = name;
  } else {
    out.sharding = "FULL_SHARD";  // accelerate's default
  }
  if (y.boolean(fsdp, "fsdp_offload_params", "fsdp_config.fsdp_offload_params").value_or(false)) {
    out.offload = "cpu";
    out.notes.push_back(
        "fsdp_offload_params: true is modelled as the optimizer states and master weights on "
        "the CPU; the parameters themselves stay on the GPU in this model");
  }
  if (y.boolean(fsdp, "fsdp_activation_checkpointing", "fsdp_config.fsdp_activation_checkpointing")
          .value_or(false)) {
    out.recompute = "full";
  }
  for (const char* key : {"fsdp_backward_prefetch", "fsdp_backward_prefetch_policy"}) {
    const std::string path = std::string("fsdp_config.") + key;
    if (const auto p = y.scalar(fsdp, key, path)) {
      const std::string v =
          pick(y.where(fsdp[key], path), *p, {"BACKWARD_PRE", "BACKWARD_POST", "NO_PREFETCH"});
      out.prefetch = v == "NO_PREFETCH" ? 0 : 1;
    }
  }
}

void read_accelerate_deepspeed(const YamlFile& y, const YAML::Node& ds, Imported& out) {
  // A separate DeepSpeed JSON replaces the inline keys (accelerate ignores them then).
  if (const auto file =
          y.scalar(ds, "deepspeed_config_file", "deepspeed_config.deepspeed_config_file")) {
    std::filesystem::path path(*file);
    if (path.is_relative()) path = std::filesystem::path(y.file()).parent_path() / path;
    Imported inner = read_deepspeed(path.string(), read_json_file(path.string()));
    inner.origin = out.origin + " with " + inner.origin;
    inner.num_processes = out.num_processes;
    inner.num_machines = out.num_machines;
    if (inner.precision.empty()) inner.precision = out.precision;  // "auto": accelerate's
    out = std::move(inner);
    return;
  }
  const auto stage = y.integer(ds, "zero_stage", "deepspeed_config.zero_stage", 0, 3);
  static const char* stages[] = {"none", "zero1", "zero2", "zero3"};
  out.sharding = stages[stage.value_or(2)];  // accelerate's default stage is 2
  if (const auto device =
          y.scalar(ds, "offload_optimizer_device", "deepspeed_config.offload_optimizer_device")) {
    const std::string where =
        y.where(ds["offload_optimizer_device"], "deepspeed_config.offload_optimizer_device");
    if (*device == "nvme")
      unknown_value(where, *device, {"none", "cpu"}, "(NVMe offload) is not modelled");
    out.offload = pick(where, *device, {"none", "cpu"});
  }
  if (const auto device =
          y.scalar(ds, "offload_param_device", "deepspeed_config.offload_param_device")) {
    if (*device != "none") {
      out.notes.push_back("offload_param_device: " + *device +
                          " is not modelled (parameters stay on the GPU)");
    }
  }
  if (const auto ga = y.integer(ds, "gradient_accumulation_steps",
                                "deepspeed_config.gradient_accumulation_steps", 1, 1 << 24)) {
    out.grad_accum = static_cast<int>(*ga);
  }
}

Imported read_accelerate(const YamlFile& y) {
  const YAML::Node& root = y.root();
  Imported out;
  out.origin = "accelerate config " + y.file();
  if (const auto n = y.integer(root, "num_processes", "num_processes", 1, 1 << 20)) {
    out.num_processes = static_cast<int>(*n);
  }
  if (const auto n = y.integer(root, "num_machines", "num_machines", 1, 1 << 16)) {
    out.num_machines = static_cast<int>(*n);
  }
  out.cpu = y.boolean(root, "use_cpu", "use_cpu").value_or(false);
  if (const auto mp = y.scalar(root, "mixed_precision", "mixed_precision")) {
    const std::string where = y.where(root["mixed_precision"], "mixed_precision");
    if (*mp == "fp8") unknown_value(where, *mp, {"no", "fp16", "bf16"}, "is not modelled");
    out.precision = pick(where, *mp, {"no", "fp16", "bf16"});
  }
  if (const auto ga = y.integer(root, "gradient_accumulation_steps", "gradient_accumulation_steps",
                                1, 1 << 24)) {
    out.grad_accum = static_cast<int>(*ga);
  }
  const auto type = y.scalar(root, "distributed_type", "distributed_type").value_or("NO");
  const std::string where = y.where(root["distributed_type"], "distributed_type");
  const std::string t = pick(where, type, {"NO", "MULTI_GPU", "MULTI_CPU", "FSDP", "DEEPSPEED"});
  if (t == "NO") {
    out.num_processes = 1;
  } else if (t == "MULTI_CPU") {
    out.cpu = true;
  } else if (t == "FSDP") {
    read_fsdp(y,
              root["fsdp_config"].IsMap() ? root["fsdp_config"] : YAML::Node(YAML::NodeType::Map),
              out);
  } else if (t == "DEEPSPEED") {
    read_accelerate_deepspeed(y,
                              root["deepspeed_config"].IsMap() ? root["deepspeed_config"]
                                                               : YAML::Node(YAML::NodeType::Map),
                              out);
  }
  return out;
}

// ---- DeepSpeed (JSON) --------------------------------------------------------------------

/// An integer, or nullopt when absent or "auto".
std::optional<std::int64_t> json_int(const nlohmann::json& parent, const char* key,
                                     const std::string& where, std::int64_t min, std::int64_t max) {
  auto it = parent.find(key);
  if (it == parent.end() || it->is_null()) return std::nullopt;
  if (it->is_string() && it->get<std::string>() == "auto") return std::nullopt;
  if (!it->is_number_integer()) {
    throw SpecError(where, "expected an integer or \"auto\", got " + it->dump());
  }
  const auto v = it->get<std::int64_t>();
  if (v < min || v > max) {
    throw SpecError(where, "must be in [" + std::to_string(min) + ", " + std::to_string(max) +
                               "], got " + std::to_string(v));
  }
  return v;
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

Imported read_deepspeed(const std::string& file, const nlohmann::json& config) {
  if (!config.is_object()) throw SpecError(file, "expected a JSON object (a DeepSpeed config)");
  Imported out;
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
      const std::string device = off->value("device", std::string("none"));
      if (device == "nvme")
        unknown_value(where, device, {"none", "cpu"}, "(NVMe offload) is not modelled");
      out.offload = pick(where, device, {"none", "cpu"});
    }
    if (auto off = zero->find("offload_param"); off != zero->end() && off->is_object()) {
      const std::string device = off->value("device", std::string("none"));
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
    const std::string type = opt->value("type", std::string("AdamW"));
    const std::string where = at("optimizer.type");
    const std::string t = pick(where, type, {"Adam", "AdamW", "SGD"});
    out.optimizer = t == "Adam" ? "adam" : t == "AdamW" ? "adamw" : "sgd";
  }
  return out;
}

// ---- common: flags, the cluster rule, the scenario ----------------------------------------

nlohmann::json build_scenario(const Imported& in, const ImportOptions& o, const std::string& file) {
  preset(PresetKind::model, o.model, "--model");  // a clear error before anything else
  std::string cluster_name = o.cluster;
  if (cluster_name.empty()) cluster_name = in.cpu ? "laptop-cpu" : "dgx-a100-80gb";
  const nlohmann::json& cluster_preset = preset(PresetKind::cluster, cluster_name, "--cluster");

  int machines = o.num_machines > 0 ? o.num_machines : in.num_machines.value_or(0);
  int processes = o.num_processes > 0 ? o.num_processes : in.num_processes.value_or(0);
  const int micro = o.micro_batch_size > 0 ? o.micro_batch_size : in.micro_batch.value_or(1);
  std::optional<int> accum = o.grad_accum > 0 ? std::optional<int>(o.grad_accum) : in.grad_accum;
  if (processes == 0 && in.train_batch && accum) {
    // DeepSpeed: train_batch_size = micro × accumulation × world size.
    const std::int64_t per_rank = std::int64_t{micro} * *accum;
    if (*in.train_batch % per_rank != 0) {
      throw SpecError(in.train_batch_where,
                      std::to_string(*in.train_batch) +
                          " is not a multiple of train_micro_batch_size_per_gpu × "
                          "gradient_accumulation_steps = " +
                          std::to_string(per_rank));
    }
    processes = static_cast<int>(*in.train_batch / per_rank);
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
  if (!accum) {
    accum = 1;
    if (in.train_batch) {
      const std::int64_t per_step = std::int64_t{micro} * processes;
      if (*in.train_batch % per_step != 0) {
        throw SpecError(in.train_batch_where, std::to_string(*in.train_batch) +
                                                  " is not a multiple of micro batch × "
                                                  "GPUs = " +
                                                  std::to_string(per_step));
      }
      accum = static_cast<int>(*in.train_batch / per_step);
    }
  }
  const std::int64_t global = std::int64_t{micro} * *accum * processes;
  if (in.train_batch && *in.train_batch != global) {
    throw SpecError(in.train_batch_where,
                    std::to_string(*in.train_batch) +
                        " ≠ train_micro_batch_size_per_gpu × "
                        "gradient_accumulation_steps × GPUs = " +
                        std::to_string(micro) + " × " + std::to_string(*accum) + " × " +
                        std::to_string(processes) + " = " + std::to_string(global));
  }

  std::string precision = in.precision.empty() ? "no" : in.precision;
  if (!o.mixed_precision.empty()) {
    precision = pick("--mixed_precision", o.mixed_precision, {"no", "fp16", "bf16"});
  }
  nlohmann::json strategy = {{"dp", processes},           {"pp", 1},
                             {"micro_batch_size", micro}, {"grad_accum", *accum},
                             {"sharding", in.sharding},   {"mixed_precision", precision},
                             {"recompute", in.recompute}, {"offload_optimizer", in.offload}};
  if (precision == "fp16") strategy.update(in.loss_scale);
  if (in.prefetch) strategy["prefetch"] = *in.prefetch;
  if (!in.optimizer.empty()) strategy["optimizer"] = in.optimizer;

  nlohmann::json cluster = {
      {"preset", cluster_name}, {"nodes", machines}, {"gpus_per_node", per_machine}};
  if (!o.gpu.empty()) {
    preset(PresetKind::gpu, o.gpu, "--gpu");
    cluster["gpu"] = o.gpu;
  }
  std::string description = "Imported from " + in.origin + "; cluster " + cluster_name + " with " +
                            std::to_string(machines) + " × " + std::to_string(per_machine) +
                            (o.cluster.empty() ? " (picked by process count)" : "") + ".";
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
    throw SpecError(file, std::string("the imported scenario is invalid: ") + e.what());
  }
  return scenario;
}

}  // namespace

nlohmann::json import_accelerate(const std::string& yaml_file, const ImportOptions& options) {
  const YamlFile yaml(yaml_file);
  return build_scenario(read_accelerate(yaml), options, yaml_file);
}

AccelerateLaunchConfig read_accelerate_launch_config(const std::string& yaml_file) {
  const YamlFile y(yaml_file);
  const Imported in = read_accelerate(y);
  const YAML::Node& root = y.root();
  AccelerateLaunchConfig c;
  c.num_processes = in.num_processes;
  c.num_machines = in.num_machines;
  c.cpu = in.cpu;
  c.sharding = in.sharding;
  if (c.sharding == "zero3" || c.sharding == "HYBRID_SHARD") {
    throw SpecError(y.where(root["distributed_type"], "distributed_type"),
                    "the Accelerator runs ZeRO-1/2, FULL_SHARD and SHARD_GRAD_OP; '" + c.sharding +
                        "' is not available (use FULL_SHARD for ZeRO-3)");
  }
  c.mixed_precision = in.precision.empty() ? "no" : in.precision;
  c.grad_accum = in.grad_accum;
  if (const auto r = y.integer(root, "machine_rank", "machine_rank", 0, 1 << 16)) {
    c.machine_rank = static_cast<int>(*r);
  }
  c.main_process_ip = y.scalar(root, "main_process_ip", "main_process_ip");
  if (const auto p = y.integer(root, "main_process_port", "main_process_port", 0, 65535)) {
    c.main_process_port = static_cast<int>(*p);
  }
  const YAML::Node fsdp = root["fsdp_config"];
  if (fsdp.IsMap()) {
    const YAML::Node cls = fsdp["fsdp_transformer_layer_cls_to_wrap"];
    const std::string path = "fsdp_config.fsdp_transformer_layer_cls_to_wrap";
    auto add = [&c](const std::string& text) {
      std::stringstream parts(text);
      std::string name;
      while (std::getline(parts, name, ',')) {
        name.erase(0, name.find_first_not_of(' '));
        name.erase(name.find_last_not_of(' ') + 1);
        if (!name.empty()) c.fsdp_wrap_cls.push_back(name);
      }
    };
    if (cls.IsSequence()) {
      for (const auto& item : cls) {
        if (!item.IsScalar()) throw SpecError(y.where(item, path), "expected a class name");
        add(item.Scalar());
      }
    } else if (const auto text = y.scalar(fsdp, "fsdp_transformer_layer_cls_to_wrap", path)) {
      add(*text);
    }
    if (const auto n = y.integer(fsdp, "fsdp_min_num_params", "fsdp_config.fsdp_min_num_params", 0,
                                 std::int64_t{1} << 50)) {
      c.fsdp_min_num_params = *n;
    }
  }
  return c;
}

nlohmann::json import_deepspeed(const std::string& json_file, const ImportOptions& options) {
  return build_scenario(read_deepspeed(json_file, read_json_file(json_file)), options, json_file);
}

}  // namespace stratagem::spec
