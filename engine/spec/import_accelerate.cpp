// accelerate's config.yaml → Imported (engine/spec/import_common.hpp), for `stratagem import`
// and `stratagem launch --config_file`.
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include "engine/spec/error.hpp"
#include "engine/spec/import.hpp"
#include "engine/spec/import_common.hpp"
#include "engine/spec/json_reader.hpp"

namespace stratagem::spec {

using namespace import_detail;

namespace {

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
  /// The top-level mapping under `key`; an empty one when it is absent or not a mapping.
  YAML::Node section(const std::string& key) const {
    const YAML::Node node = root_[key];
    return node.IsDefined() && node.IsMap() ? node : YAML::Node(YAML::NodeType::Map);
  }
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

  /// A number in [min, max], or nullopt when absent.
  std::optional<double> number(const YAML::Node& parent, const std::string& key,
                               const std::string& key_path, double min, double max) const {
    const auto text = scalar(parent, key, key_path);
    if (!text) return std::nullopt;
    double value = 0;
    if (!YAML::convert<double>::decode(parent[key], value) || !(value >= min && value <= max)) {
      throw SpecError(where(parent[key], key_path), "expected a number in [" + format(min) + ", " +
                                                        format(max) + "], got '" + *text + "'");
    }
    return value;
  }

 private:
  static std::string format(double v) {
    std::ostringstream out;
    out << v;
    return out.str();
  }

  std::string file_;
  YAML::Node root_;
};

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

// distributed_type MEGATRON_LM: megatron_lm_config as `accelerate config` writes it. Keys not
// named here are ignored, as in fsdp_config.
void read_megatron(const YamlFile& y, const YAML::Node& m, Imported& out) {
  const auto path = [](const char* key) { return std::string("megatron_lm_config.") + key; };
  const auto at = [&](const char* key) { return y.where(m[key], path(key)); };
  if (const auto tp =
          y.integer(m, "megatron_lm_tp_degree", path("megatron_lm_tp_degree"), 1, 1 << 10)) {
    out.tp = static_cast<int>(*tp);
    out.tp_where = at("megatron_lm_tp_degree");
    out.key_where.emplace_back("strategy.tp", out.tp_where);
  }
  if (const auto pp =
          y.integer(m, "megatron_lm_pp_degree", path("megatron_lm_pp_degree"), 1, 1 << 16)) {
    out.pp = static_cast<int>(*pp);
    out.pp_where = at("megatron_lm_pp_degree");
    out.key_where.emplace_back("strategy.pp", out.pp_where);
  }
  // Megatron-LM accumulates gradients over its micro-batches (per pipeline, per step).
  if (const auto n = y.integer(m, "megatron_lm_num_micro_batches",
                               path("megatron_lm_num_micro_batches"), 1, 1 << 24)) {
    if (out.grad_accum && *out.grad_accum != *n) {
      throw SpecError(at("megatron_lm_num_micro_batches"),
                      std::to_string(*n) + " disagrees with gradient_accumulation_steps " +
                          std::to_string(*out.grad_accum) +
                          " (Megatron-LM accumulates over its micro-batches); keep one");
    }
    out.grad_accum = static_cast<int>(*n);
    out.key_where.emplace_back("strategy.grad_accum", at("megatron_lm_num_micro_batches"));
  }
  if (y.boolean(m, "megatron_lm_sequence_parallelism", path("megatron_lm_sequence_parallelism"))
          .value_or(false)) {
    if (out.tp > 1) {
      out.sequence_parallel = true;
      out.key_where.emplace_back("strategy.sequence_parallel",
                                 at("megatron_lm_sequence_parallelism"));
    } else {
      out.notes.push_back(
          "megatron_lm_sequence_parallelism is off with tp = 1, as Megatron-LM turns it off");
    }
  }
  // --recompute-activations is Megatron's selective recomputation (the attention core).
  if (y.boolean(m, "megatron_lm_recompute_activations", path("megatron_lm_recompute_activations"))
          .value_or(false)) {
    out.recompute = "selective";
  }
  // The distributed optimizer shards the optimizer states over the data-parallel ranks: ZeRO-1.
  if (y.boolean(m, "megatron_lm_use_distributed_optimizer",
                path("megatron_lm_use_distributed_optimizer"))
          .value_or(false)) {
    out.sharding = "zero1";
  }
  if (const auto clip = y.number(m, "megatron_lm_gradient_clipping",
                                 path("megatron_lm_gradient_clipping"), 0, 1e30)) {
    if (*clip > 0) {
      out.notes.push_back(
          "megatron_lm_gradient_clipping: " + m["megatron_lm_gradient_clipping"].Scalar() +
          " is not modelled (clipping by the global norm costs one scalar "
          "all-reduce per step)");
    }
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
  const std::string t =
      pick(where, type, {"NO", "MULTI_GPU", "MULTI_CPU", "FSDP", "DEEPSPEED", "MEGATRON_LM"});
  if (t == "NO") {
    out.num_processes = 1;
  } else if (t == "MULTI_CPU") {
    out.cpu = true;
  } else if (t == "FSDP") {
    read_fsdp(y, y.section("fsdp_config"), out);
  } else if (t == "DEEPSPEED") {
    read_accelerate_deepspeed(y, y.section("deepspeed_config"), out);
  } else if (t == "MEGATRON_LM") {
    // No megatron_lm_config section: Megatron-LM's defaults, tp 1 and pp 1.
    read_megatron(y, y.section("megatron_lm_config"), out);
  }
  return out;
}

// Runs `read` on the config; a yaml-cpp exception from a node access a reader did not guard
// still becomes one located line, never yaml-cpp's own text.
template <class Read>
auto yaml_errors_located(const std::string& yaml_file, Read&& read) -> decltype(read()) {
  try {
    return read();
  } catch (const YAML::Exception& e) {
    throw SpecError(yaml_file, std::string("cannot read this accelerate config: ") + e.what());
  }
}

AccelerateLaunchConfig launch_config(const std::string& yaml_file) {
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
  if (in.tp > 1) {
    throw SpecError(in.tp_where, "the Accelerator runs no tensor parallelism; tp = " +
                                     std::to_string(in.tp) + " is for `stratagem import` only");
  }
  if (in.pp > 1) {
    throw SpecError(in.pp_where,
                    "the Accelerator's pipelines come from --pipeline_stages, not from the config "
                    "file; pp = " +
                        std::to_string(in.pp) + " is for `stratagem import` only");
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
  const YAML::Node fsdp = y.section("fsdp_config");
  if (fsdp.size() > 0) {
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
    if (cls.IsDefined() && cls.IsSequence()) {  // absent (size-based or no wrap policy): none
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

}  // namespace

nlohmann::json import_accelerate(const std::string& yaml_file, const ImportOptions& options) {
  return yaml_errors_located(yaml_file, [&] {
    const YamlFile yaml(yaml_file);
    return build_scenario(read_accelerate(yaml), options, yaml_file);
  });
}

AccelerateLaunchConfig read_accelerate_launch_config(const std::string& yaml_file) {
  return yaml_errors_located(yaml_file, [&] { return launch_config(yaml_file); });
}

}  // namespace stratagem::spec
