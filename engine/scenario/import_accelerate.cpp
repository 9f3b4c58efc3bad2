// accelerate's config.yaml → Imported (engine/scenario/import_common.hpp), for `stratagem import`
// and `stratagem launch --config_file`. Every config `accelerate config` writes is read; what
// either command cannot honour is named in one warning line (AccelerateWarnings; the key lists
// are in import_accelerate_keys.cpp), contradictions stay located errors.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include "engine/scenario/error.hpp"
#include "engine/scenario/import.hpp"
#include "engine/scenario/import_common.hpp"
#include "engine/scenario/json_reader.hpp"
#include "engine/scenario/presets.hpp"

namespace stratagem::scenario {

using namespace import_detail;

namespace {

class YamlFile {
 public:
  explicit YamlFile(std::string file) : file_(std::move(file)) {
    std::ifstream in(file_, std::ios::binary);
    if (!in) throw SpecError(file_, "cannot open file");
    std::stringstream text;
    text << in.rdbuf();
    std::vector<YAML::Node> documents;
    try {
      documents = YAML::LoadAll(text.str());
    } catch (const YAML::Exception& e) {
      throw SpecError(
          file_ + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1),
          "invalid YAML: " + e.msg);
    }
    if (documents.size() > 1) {
      // accelerate's load_config_from_file reads one document; silently taking the first of
      // several would drop the rest.
      const YAML::Mark m = documents[1].Mark();
      throw SpecError(m.is_null() ? file_
                                  : file_ + ":" + std::to_string(m.line + 1) + ":" +
                                        std::to_string(m.column + 1),
                      "a second YAML document (after '---'): an accelerate config is one "
                      "document, and " +
                          std::to_string(documents.size()) + " were found; keep the one you mean");
    }
    if (!documents.empty()) root_ = documents.front();
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

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// Torch's ShardingStrategy by name (any case, as accelerate reads it) or by its number 1..5,
// in Stratagem's names. HYBRID_SHARD_ZERO2 (ZeRO-2 inside a node, replicated across) is
// modelled as SHARD_GRAD_OP over all ranks, which it is on one machine.
std::string fsdp_strategy(const YamlFile& y, const YAML::Node& node, const std::string& path,
                          AccelerateWarnings& w) {
  static const std::vector<std::string> names = {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD",
                                                 "HYBRID_SHARD", "HYBRID_SHARD_ZERO2"};
  const std::string where = y.where(node, path);
  std::string name = upper(node.Scalar());
  if (!name.empty() && std::isdigit(static_cast<unsigned char>(name[0]))) {
    name = names[static_cast<std::size_t>(parse_integer(where, name, 1, 5) - 1)];
  }
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    std::string msg = "unknown value '" + node.Scalar() + "'";
    const std::string hint = closest(name, {names.begin(), names.begin() + 4});
    if (!hint.empty()) msg += " (did you mean '" + hint + "'?)";
    // HYBRID_SHARD_ZERO2 (5) is accepted but not listed: it runs as another strategy.
    msg += "; valid: FULL_SHARD (1), SHARD_GRAD_OP (2), NO_SHARD (3), HYBRID_SHARD (4)";
    throw SpecError(where, msg);
  }
  if (name == "HYBRID_SHARD_ZERO2") {
    w.both.push_back(path + " (HYBRID_SHARD_ZERO2 as SHARD_GRAD_OP)");
    return "SHARD_GRAD_OP";
  }
  return name == "NO_SHARD" ? "none" : name;
}

void read_fsdp(const YamlFile& y, const YAML::Node& fsdp, Imported& out, AccelerateWarnings& w) {
  const auto path = [](const char* key) { return std::string("fsdp_config.") + key; };
  const char* by_name = "fsdp_sharding_strategy";
  const char* reshard = "fsdp_reshard_after_forward";
  const bool has_name = y.scalar(fsdp, by_name, path(by_name)).has_value();
  const bool has_reshard = y.scalar(fsdp, reshard, path(reshard)).has_value();
  out.sharding = "FULL_SHARD";  // accelerate's default
  if (y.integer(fsdp, "fsdp_version", path("fsdp_version"), 1, 2).value_or(1) == 2) {
    // FSDP2: fsdp_reshard_after_forward true is FULL_SHARD, false SHARD_GRAD_OP.
    if (!y.boolean(fsdp, reshard, path(reshard)).value_or(true)) out.sharding = "SHARD_GRAD_OP";
    if (has_reshard) w.sharding_key = path(reshard);
    if (has_name) w.both.push_back(path(by_name) + " (FSDP2 follows " + reshard + ")");
  } else {
    // FSDP1: the strategy under fsdp_sharding_strategy (older accelerate) or
    // fsdp_reshard_after_forward (what `accelerate config` writes now); true/false there reads
    // as in FSDP2.
    std::optional<std::string> named, resharded;
    if (has_name) named = fsdp_strategy(y, fsdp[by_name], path(by_name), w);
    if (has_reshard) {
      bool b = false;
      resharded = YAML::convert<bool>::decode(fsdp[reshard], b)
                      ? std::string(b ? "FULL_SHARD" : "SHARD_GRAD_OP")
                      : fsdp_strategy(y, fsdp[reshard], path(reshard), w);
    }
    if (named && resharded && *named != *resharded) {
      throw SpecError(y.where(fsdp[reshard], path(reshard)),
                      "'" + fsdp[reshard].Scalar() + "' disagrees with fsdp_sharding_strategy '" +
                          fsdp[by_name].Scalar() + "'; keep one");
    }
    if (named || resharded) out.sharding = named ? *named : *resharded;
    if (has_name || has_reshard) w.sharding_key = path(has_name ? by_name : reshard);
  }
  if (y.boolean(fsdp, "fsdp_offload_params", path("fsdp_offload_params")).value_or(false)) {
    w.launch_only.push_back(path("fsdp_offload_params"));
    if (out.sharding == "none") {
      w.import_only.push_back(path("fsdp_offload_params") + " (no offload with NO_SHARD)");
    } else {
      out.offload = "cpu";
      out.notes.push_back(
          "fsdp_offload_params: true is modelled as the optimizer states and master weights on "
          "the CPU; the parameters themselves stay on the GPU in this model");
    }
  }
  if (y.boolean(fsdp, "fsdp_activation_checkpointing", path("fsdp_activation_checkpointing"))
          .value_or(false)) {
    out.recompute = "full";
    w.launch_only.push_back(path("fsdp_activation_checkpointing"));
  }
  // The Accelerator gathers each unit when it runs: no prefetch, backward or forward.
  for (const char* key : {"fsdp_backward_prefetch", "fsdp_backward_prefetch_policy"}) {
    if (const auto p = y.scalar(fsdp, key, path(key))) {
      const std::string v = pick(y.where(fsdp[key], path(key)), upper(*p),
                                 {"BACKWARD_PRE", "BACKWARD_POST", "NO_PREFETCH"});
      out.prefetch = v == "NO_PREFETCH" ? 0 : 1;
      if (*out.prefetch == 1) w.launch_only.push_back(path(key));
    }
  }
  if (y.boolean(fsdp, "fsdp_forward_prefetch", path("fsdp_forward_prefetch")).value_or(false)) {
    w.launch_only.push_back(path("fsdp_forward_prefetch"));
    if (out.prefetch == 0) {
      w.import_only.push_back(path("fsdp_forward_prefetch") + " (prefetch is off: NO_PREFETCH)");
    }
  }
  if (const auto p = y.scalar(fsdp, "fsdp_auto_wrap_policy", path("fsdp_auto_wrap_policy"))) {
    pick(y.where(fsdp["fsdp_auto_wrap_policy"], path("fsdp_auto_wrap_policy")), upper(*p),
         {"TRANSFORMER_BASED_WRAP", "SIZE_BASED_WRAP", "NO_WRAP"});
  }
}

void read_accelerate_deepspeed(const YamlFile& y, const YAML::Node& ds, Imported& out,
                               AccelerateWarnings& w) {
  const auto path = [](const char* key) { return std::string("deepspeed_config.") + key; };
  out.stack = "deepspeed";
  // A separate DeepSpeed JSON replaces the inline keys (accelerate ignores them then).
  if (const auto file = y.scalar(ds, "deepspeed_config_file", path("deepspeed_config_file"))) {
    std::filesystem::path json(*file);
    if (json.is_relative()) json = std::filesystem::path(y.file()).parent_path() / json;
    const DeepSpeedFile ds_file = read_deepspeed_file(json.string());
    for (const std::string& note : ds_file.notes) {
      w.both.push_back("deepspeed_config_file " + json.filename().string() + ": " + note);
    }
    Imported inner = read_deepspeed(json.string(), ds_file.config);
    inner.origin = out.origin + " with " + inner.origin;
    inner.num_processes = out.num_processes;
    inner.num_machines = out.num_machines;
    const std::string applies = " (the deepspeed_config_file applies)";
    if (inner.precision.empty()) {
      inner.precision = out.precision;  // "auto": accelerate's
    } else if (y.scalar(y.root(), "mixed_precision", "mixed_precision") &&
               inner.precision != out.precision) {
      w.both.push_back("mixed_precision (the deepspeed_config_file's " + inner.precision +
                       " applies)");
    }
    if (!inner.grad_accum) {
      inner.grad_accum = out.grad_accum;
    } else if (out.grad_accum && *out.grad_accum != *inner.grad_accum) {
      w.both.push_back("gradient_accumulation_steps (the deepspeed_config_file's " +
                       std::to_string(*inner.grad_accum) + " applies)");
    }
    for (const char* key : {"zero_stage", "offload_optimizer_device", "offload_param_device",
                            "gradient_accumulation_steps", "gradient_clipping"}) {
      if (ds[key].IsDefined() && !ds[key].IsNull()) w.both.push_back(path(key) + applies);
    }
    w.sharding_key = path("deepspeed_config_file");
    if (inner.offload != "none") {
      w.launch_only.push_back(path("deepspeed_config_file") +
                              " (zero_optimization.offload_optimizer)");
    }
    out = std::move(inner);
    return;
  }
  const auto stage = y.integer(ds, "zero_stage", path("zero_stage"), 0, 3);
  static const char* stages[] = {"none", "zero1", "zero2", "zero3"};
  out.sharding = stages[stage.value_or(2)];  // accelerate's default stage is 2
  if (stage) w.sharding_key = path("zero_stage");
  // NVMe offload (ZeRO-Infinity) keeps the GPU's memory as CPU offload does; its speed is not
  // modelled. The Accelerator offloads nothing.
  if (const auto device =
          y.scalar(ds, "offload_optimizer_device", path("offload_optimizer_device"))) {
    const std::string where =
        y.where(ds["offload_optimizer_device"], path("offload_optimizer_device"));
    const std::string d = pick(where, *device, {"none", "cpu", "nvme"});
    if (d != "none") {
      out.offload = "cpu";
      w.launch_only.push_back(path("offload_optimizer_device"));
    }
    if (d == "nvme") w.import_only.push_back(path("offload_optimizer_device") + " (nvme as cpu)");
  }
  if (const auto device = y.scalar(ds, "offload_param_device", path("offload_param_device"))) {
    if (*device != "none") {
      out.notes.push_back("offload_param_device: " + *device +
                          " is not modelled (parameters stay on the GPU)");
      w.both.push_back(path("offload_param_device"));
    }
  }
  if (const auto ga = y.integer(ds, "gradient_accumulation_steps",
                                path("gradient_accumulation_steps"), 1, 1 << 24)) {
    out.grad_accum = static_cast<int>(*ga);
  }
  if (accelerate_value_set(ds["gradient_clipping"])) w.both.push_back(path("gradient_clipping"));
}

// distributed_type MEGATRON_LM: megatron_lm_config as `accelerate config` writes it. The keys
// read here; the others are sorted by scan_accelerate_keys.
void read_megatron(const YamlFile& y, const YAML::Node& m, Imported& out, AccelerateWarnings& w) {
  const auto path = [](const char* key) { return std::string("megatron_lm_config.") + key; };
  out.stack = "megatron";
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
    w.launch_only.push_back(path("megatron_lm_recompute_activations"));
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
      w.both.push_back(path("megatron_lm_gradient_clipping"));
    }
  }
}

struct Read {
  Imported in;
  AccelerateWarnings w;
  std::string type;  ///< distributed_type
};

Read read_accelerate(const YamlFile& y) {
  const YAML::Node& root = y.root();
  Read r;
  Imported& out = r.in;
  out.origin = "accelerate config " + y.file();
  if (const auto n = y.integer(root, "num_processes", "num_processes", 1, 1 << 20)) {
    out.num_processes = static_cast<int>(*n);
  }
  if (const auto n = y.integer(root, "num_machines", "num_machines", 1, 1 << 16)) {
    out.num_machines = static_cast<int>(*n);
  }
  out.cpu = y.boolean(root, "use_cpu", "use_cpu").value_or(false);
  // fp8 is kept here; import_accelerate and launch_config decide what runs it.
  if (const auto mp = y.scalar(root, "mixed_precision", "mixed_precision")) {
    out.precision = pick(y.where(root["mixed_precision"], "mixed_precision"), *mp,
                         {"no", "fp16", "bf16", "fp8"});
  } else if (y.boolean(root, "fp16", "fp16").value_or(false)) {
    out.precision = "fp16";  // accelerate before 0.8 wrote `fp16: true`
  }
  if (const auto ga = y.integer(root, "gradient_accumulation_steps", "gradient_accumulation_steps",
                                1, 1 << 24)) {
    out.grad_accum = static_cast<int>(*ga);
  }
  const auto type = y.scalar(root, "distributed_type", "distributed_type").value_or("NO");
  const std::string where = y.where(root["distributed_type"], "distributed_type");
  r.type = pick(where, type, {"NO", "MULTI_GPU", "MULTI_CPU", "FSDP", "DEEPSPEED", "MEGATRON_LM"});
  if (r.type == "NO") {
    out.num_processes = 1;
  } else if (r.type == "MULTI_CPU") {
    out.cpu = true;
  } else if (r.type == "FSDP") {
    read_fsdp(y, y.section("fsdp_config"), out, r.w);
  } else if (r.type == "DEEPSPEED") {
    read_accelerate_deepspeed(y, y.section("deepspeed_config"), out, r.w);
  } else if (r.type == "MEGATRON_LM") {
    // No megatron_lm_config section: Megatron-LM's defaults, tp 1 and pp 1.
    read_megatron(y, y.section("megatron_lm_config"), out, r.w);
  }
  scan_accelerate_keys(root, r.type, r.w);
  return r;
}

// The name of the GPU build_scenario's cluster rule will pick when it has no fp8 peak;
// nullopt when it has one.
std::optional<std::string> gpu_without_fp8(const ImportOptions& o, bool cpu) {
  try {
    std::string cluster = o.cluster;
    if (cluster.empty()) cluster = cpu ? "laptop-cpu" : "dgx-a100-80gb";
    const nlohmann::json gpu = o.gpu.empty()
                                   ? preset(PresetKind::cluster, cluster, "--cluster").at("gpu")
                                   : nlohmann::json(o.gpu);
    const nlohmann::json spec = resolve_preset(PresetKind::gpu, gpu, "--gpu");
    if (spec.contains("peak_tflops") && spec.at("peak_tflops").contains("fp8")) {
      return std::nullopt;
    }
    return gpu.is_string() ? gpu.get<std::string>() : std::string("the cluster's GPU");
  } catch (const std::exception&) {
    return std::string("the cluster's GPU");  // build_scenario reports the unknown preset
  }
}

// Runs `read` on the config; a yaml-cpp exception from a node access a reader did not guard
// still becomes one located line, never yaml-cpp's own text.
template <class F>
auto yaml_errors_located(const std::string& yaml_file, F&& read) -> decltype(read()) {
  try {
    return read();
  } catch (const YAML::Exception& e) {
    throw SpecError(yaml_file, std::string("cannot read this accelerate config: ") + e.what());
  }
}

// The wrap policy as accelerate applies it: TRANSFORMER_BASED_WRAP wraps the listed classes,
// SIZE_BASED_WRAP by fsdp_min_num_params (accelerate's default 1e8), NO_WRAP nothing (one unit);
// no policy (older configs) takes whichever is given.
void read_wrap(const YamlFile& y, AccelerateLaunchConfig& c, AccelerateWarnings& w) {
  const YAML::Node fsdp = y.section("fsdp_config");
  const std::string policy = upper(
      y.scalar(fsdp, "fsdp_auto_wrap_policy", "fsdp_config.fsdp_auto_wrap_policy").value_or(""));
  if (policy == "NO_WRAP") return;
  if (policy != "SIZE_BASED_WRAP") {
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
    if (cls.IsDefined() && cls.IsSequence()) {
      for (const auto& item : cls) {
        if (!item.IsScalar()) throw SpecError(y.where(item, path), "expected a class name");
        add(item.Scalar());
      }
    } else if (const auto text = y.scalar(fsdp, "fsdp_transformer_layer_cls_to_wrap", path)) {
      add(*text);
    }
    if (policy == "TRANSFORMER_BASED_WRAP" && c.fsdp_wrap_cls.empty()) {
      // accelerate would take the model's _no_split_modules, a Transformers attribute.
      w.launch_only.push_back(
          "fsdp_config.fsdp_auto_wrap_policy (no fsdp_transformer_layer_cls_to_wrap: the model "
          "is one unit)");
    }
  }
  if (policy != "TRANSFORMER_BASED_WRAP") {
    const auto n = y.integer(fsdp, "fsdp_min_num_params", "fsdp_config.fsdp_min_num_params", 0,
                             std::int64_t{1} << 50);
    c.fsdp_min_num_params = n.value_or(policy == "SIZE_BASED_WRAP" ? 100000000 : 0);
  }
}

AccelerateLaunchConfig launch_config(const std::string& yaml_file) {
  const YamlFile y(yaml_file);
  Read r = read_accelerate(y);
  const Imported& in = r.in;
  const YAML::Node& root = y.root();
  AccelerateLaunchConfig c;
  c.num_processes = in.num_processes;
  c.num_machines = in.num_machines;
  c.cpu = in.cpu;
  c.sharding = in.sharding;
  // The Accelerator runs ZeRO-1/2, FULL_SHARD and SHARD_GRAD_OP. ZeRO-3 shards what FULL_SHARD
  // shards; HYBRID_SHARD's per-machine shards become one FULL_SHARD over all ranks.
  if (c.sharding == "zero3" || c.sharding == "HYBRID_SHARD") {
    const std::string key = r.w.sharding_key.empty() ? "distributed_type" : r.w.sharding_key;
    r.w.launch_only.push_back(key + " (" + c.sharding + " runs as FULL_SHARD)");
    c.sharding = "FULL_SHARD";
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
  if (c.mixed_precision == "fp8") {
    c.mixed_precision = "bf16";
    r.w.launch_only.push_back("mixed_precision (fp8 runs as bf16)");
  }
  c.grad_accum = in.grad_accum;
  if (const auto m = y.integer(root, "machine_rank", "machine_rank", 0, 1 << 16)) {
    c.machine_rank = static_cast<int>(*m);
  }
  c.main_process_ip = y.scalar(root, "main_process_ip", "main_process_ip");
  if (const auto p = y.integer(root, "main_process_port", "main_process_port", 0, 65535)) {
    c.main_process_port = static_cast<int>(*p);
  }
  if (r.type == "FSDP") read_wrap(y, c, r.w);
  c.warning = accelerate_warning(y.file(), r.w, true);
  return c;
}

}  // namespace

nlohmann::json import_accelerate(const std::string& yaml_file, const ImportOptions& options,
                                 std::string* warning) {
  return yaml_errors_located(yaml_file, [&] {
    const YamlFile yaml(yaml_file);
    Read r = read_accelerate(yaml);
    // fp8 where the GPU has it (a --mixed_precision flag decides instead), else bf16, whose
    // 16-bit matmuls are what fp8 training falls back to.
    if (r.in.precision == "fp8" && options.mixed_precision.empty()) {
      if (const auto gpu = gpu_without_fp8(options, r.in.cpu)) {
        r.in.precision = "bf16";
        r.w.import_only.push_back("mixed_precision (fp8 as bf16: " + *gpu + " has no fp8)");
      }
    }
    nlohmann::json scenario = build_scenario(r.in, options, yaml_file);
    if (warning) *warning = accelerate_warning(yaml_file, r.w, false);
    return scenario;
  });
}

AccelerateLaunchConfig read_accelerate_launch_config(const std::string& yaml_file) {
  return yaml_errors_located(yaml_file, [&] { return launch_config(yaml_file); });
}

}  // namespace stratagem::scenario
