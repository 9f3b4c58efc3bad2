// The keys of an accelerate config, sorted for the warning line of `stratagem import
// --accelerate` and `stratagem launch --config_file` (engine/scenario/import_common.hpp). The lists
// follow what accelerate writes and reads: the top-level keys are the fields of its
// ClusterConfig (commands/config/config_args.py, plus the older `fp16` and `dynamo_backend`
// it still converts), the section keys those of `accelerate launch`'s per-section flags
// (commands/launch.py). import_accelerate.cpp reads the `read` keys and names their
// unhonoured values itself.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/scenario/error.hpp"
#include "engine/scenario/import_common.hpp"

namespace stratagem::scenario::import_detail {

namespace {

enum class Use {
  read,      ///< import_accelerate.cpp reads it (and names what it cannot honour)
  plumbing,  ///< how to start the processes, or nothing a training step depends on
  named,     ///< not honoured: named when set
};

struct Key {
  const char* name;
  Use use;
  const char* unset;  ///< the key's own default besides the generic ones (or nullptr)
};

constexpr Key kTop[] = {
    {"command_file", Use::named, nullptr},
    {"commands", Use::named, nullptr},
    {"compute_environment", Use::named, "LOCAL_MACHINE"},
    {"debug", Use::plumbing, nullptr},
    {"deepspeed_config", Use::read, nullptr},
    {"distributed_type", Use::read, nullptr},
    {"downcast_bf16", Use::named, nullptr},
    {"dynamo_backend", Use::named, nullptr},  // before 0.18: dynamo_config's dynamo_backend
    {"dynamo_config", Use::named, nullptr},
    {"enable_cpu_affinity", Use::named, nullptr},
    {"fp16", Use::read, nullptr},        // before 0.8: mixed_precision fp16
    {"fp8_config", Use::read, nullptr},  // with mixed_precision fp8, which is named
    {"fsdp_config", Use::read, nullptr},
    {"gpu_ids", Use::plumbing, nullptr},
    {"gradient_accumulation_steps", Use::read, nullptr},
    {"machine_rank", Use::read, nullptr},
    {"main_process_ip", Use::read, nullptr},
    {"main_process_port", Use::read, nullptr},
    {"main_training_function", Use::plumbing, nullptr},
    {"megatron_lm_config", Use::read, nullptr},
    {"mixed_precision", Use::read, nullptr},
    {"mpirun_config", Use::plumbing, nullptr},
    {"num_machines", Use::read, nullptr},
    {"num_processes", Use::read, nullptr},
    {"parallelism_config", Use::named, nullptr},
    {"rdzv_backend", Use::plumbing, nullptr},
    {"same_network", Use::plumbing, nullptr},
    {"tpu_env", Use::named, nullptr},
    {"tpu_name", Use::named, nullptr},
    {"tpu_use_cluster", Use::named, nullptr},
    {"tpu_use_sudo", Use::named, nullptr},
    {"tpu_vm", Use::named, nullptr},
    {"tpu_zone", Use::named, nullptr},
    {"use_cpu", Use::read, nullptr},
};

constexpr Key kFsdp[] = {
    {"fsdp_activation_checkpointing", Use::read, nullptr},
    {"fsdp_auto_wrap_policy", Use::read, nullptr},
    {"fsdp_backward_prefetch", Use::read, nullptr},
    {"fsdp_backward_prefetch_policy", Use::read, nullptr},  // the older name
    {"fsdp_cpu_ram_efficient_loading", Use::plumbing, nullptr},
    {"fsdp_forward_prefetch", Use::read, nullptr},
    {"fsdp_ignored_modules", Use::named, nullptr},
    {"fsdp_min_num_params", Use::read, nullptr},
    {"fsdp_offload_params", Use::read, nullptr},
    {"fsdp_reshard_after_forward", Use::read, nullptr},
    {"fsdp_sharding_strategy", Use::read, nullptr},
    {"fsdp_state_dict_type", Use::named, nullptr},
    {"fsdp_sync_module_states", Use::plumbing, nullptr},
    {"fsdp_transformer_layer_cls_to_wrap", Use::read, nullptr},
    {"fsdp_use_orig_params", Use::plumbing, nullptr},
    {"fsdp_version", Use::read, nullptr},
};

constexpr Key kDeepSpeed[] = {
    {"deepspeed_config_file", Use::read, nullptr},
    {"deepspeed_exclusion_filter", Use::plumbing, nullptr},
    {"deepspeed_hostfile", Use::plumbing, nullptr},
    {"deepspeed_inclusion_filter", Use::plumbing, nullptr},
    {"deepspeed_moe_layer_cls_names", Use::named, nullptr},
    {"deepspeed_multinode_launcher", Use::plumbing, nullptr},
    {"gradient_accumulation_steps", Use::read, nullptr},
    {"gradient_clipping", Use::read, nullptr},
    {"offload_optimizer_device", Use::read, nullptr},
    {"offload_optimizer_nvme_path", Use::plumbing, nullptr},
    {"offload_param_device", Use::read, nullptr},
    {"offload_param_nvme_path", Use::plumbing, nullptr},
    {"zero3_init_flag", Use::plumbing, nullptr},
    {"zero3_save_16bit_model", Use::named, nullptr},
    {"zero_stage", Use::read, nullptr},
};

constexpr Key kMegatron[] = {
    {"megatron_lm_attention_backend", Use::named, nullptr},
    {"megatron_lm_attention_dropout", Use::plumbing, nullptr},
    {"megatron_lm_attention_softmax_in_fp32", Use::plumbing, nullptr},
    {"megatron_lm_calculate_per_token_loss", Use::plumbing, nullptr},
    {"megatron_lm_context_parallel_size", Use::named, "1"},
    {"megatron_lm_decoder_last_pipeline_num_layers", Use::named, nullptr},
    {"megatron_lm_eod_mask_loss", Use::plumbing, nullptr},
    {"megatron_lm_expert_model_parallel_size", Use::named, "1"},
    {"megatron_lm_expert_tensor_parallel_size", Use::named, "1"},
    {"megatron_lm_gradient_clipping", Use::read, nullptr},
    {"megatron_lm_hidden_dropout", Use::plumbing, nullptr},
    {"megatron_lm_no_load_optim", Use::plumbing, nullptr},
    {"megatron_lm_no_save_optim", Use::plumbing, nullptr},
    {"megatron_lm_num_micro_batches", Use::read, nullptr},
    {"megatron_lm_optimizer_cpu_offload", Use::named, nullptr},
    {"megatron_lm_overlap_cpu_optimizer_d2h_h2d", Use::named, nullptr},
    {"megatron_lm_pp_degree", Use::read, nullptr},
    {"megatron_lm_recompute_activations", Use::read, nullptr},
    {"megatron_lm_recompute_granularity", Use::named, nullptr},
    {"megatron_lm_recompute_method", Use::named, nullptr},
    {"megatron_lm_recompute_num_layers", Use::named, nullptr},
    {"megatron_lm_sequence_parallelism", Use::read, nullptr},
    {"megatron_lm_tp_degree", Use::read, nullptr},
    {"megatron_lm_use_custom_fsdp", Use::named, nullptr},
    {"megatron_lm_use_distributed_optimizer", Use::read, nullptr},
    {"megatron_lm_use_precision_aware_optimizer", Use::named, nullptr},
    {"megatron_lm_use_rotary_position_embeddings", Use::plumbing, nullptr},
};

template <std::size_t N>
const Key* find_key(const Key (&keys)[N], const std::string& name) {
  for (const Key& k : keys) {
    if (name == k.name) return &k;
  }
  return nullptr;
}

// Whether a key Stratagem does not honour asks for something. dynamo_config: only its backend
// turns dynamo on ('NO' is off). parallelism_config: FSDP2's mesh; a shard size alone is what
// FSDP does anyway, any other size > 1 (replicas, tp, cp) is not.
bool asks(const std::string& name, const YAML::Node& value, const char* unset) {
  if (name == "dynamo_config" && value.IsMap()) {
    return accelerate_value_set(value["dynamo_backend"]);
  }
  if (name == "parallelism_config" && value.IsMap()) {
    for (const auto& kv : value) {
      const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
      const bool size = key.size() > 5 && key.compare(key.size() - 5, 5, "_size") == 0;
      if (size && key != "parallelism_config_dp_shard_size" &&
          accelerate_value_set(kv.second, "1")) {
        return true;
      }
    }
    return false;
  }
  return accelerate_value_set(value, unset);
}

template <std::size_t N>
void scan(const YAML::Node& map, const std::string& prefix, const Key (&keys)[N],
          AccelerateWarnings& w) {
  for (const auto& kv : map) {
    const std::string name = kv.first.IsScalar() ? kv.first.Scalar() : "(a non-scalar key)";
    const Key* k = find_key(keys, name);
    if (!k) {
      w.unknown.push_back(printable(prefix + name, 120));
    } else if (k->use == Use::named && asks(name, kv.second, k->unset)) {
      w.both.push_back(prefix + name);
    }
  }
}

void sort_unique(std::vector<std::string>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

}  // namespace

bool accelerate_value_set(const YAML::Node& value, const char* unset) {
  if (!value.IsDefined() || value.IsNull()) return false;
  if (!value.IsScalar()) return value.size() > 0;
  std::string text = value.Scalar();
  if (unset && text == unset) return false;
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* off : {"", "false", "no", "none", "null", "~", "off"}) {
    if (text == off) return false;
  }
  char* end = nullptr;
  const double number = std::strtod(text.c_str(), &end);
  return !(end != text.c_str() && *end == '\0' && number == 0);
}

void scan_accelerate_keys(const YAML::Node& root, const std::string& distributed_type,
                          AccelerateWarnings& w) {
  scan(root, "", kTop, w);
  std::string section;
  if (distributed_type == "FSDP") section = "fsdp_config";
  if (distributed_type == "DEEPSPEED") section = "deepspeed_config";
  if (distributed_type == "MEGATRON_LM") section = "megatron_lm_config";
  if (section.empty()) return;  // accelerate ignores the sections of other types too
  const YAML::Node node = root[section];
  if (!node.IsDefined() || node.IsNull()) return;
  if (!node.IsMap()) {
    w.both.push_back(section + " (not a mapping)");
  } else if (section == "fsdp_config") {
    scan(node, section + ".", kFsdp, w);
  } else if (section == "deepspeed_config") {
    scan(node, section + ".", kDeepSpeed, w);
  } else {
    scan(node, section + ".", kMegatron, w);
  }
}

std::string accelerate_warning(const std::string& file, const AccelerateWarnings& w, bool launch) {
  std::vector<std::string> named = w.both;
  const std::vector<std::string>& mode = launch ? w.launch_only : w.import_only;
  named.insert(named.end(), mode.begin(), mode.end());
  std::vector<std::string> unknown = w.unknown;
  sort_unique(named);
  sort_unique(unknown);
  if (named.empty() && unknown.empty()) return "";
  std::string line = file + ":";
  if (!named.empty()) line += " not honoured: " + join(named);
  if (!unknown.empty()) {
    line += std::string(named.empty() ? "" : ";") + " unknown keys, ignored: " + join(unknown);
  }
  return line;
}

}  // namespace stratagem::scenario::import_detail
