#pragma once
// Turns what users already have into a scenario: an accelerate config (YAML) or a DeepSpeed
// config (JSON). The model and cluster come from flags, since neither file names them.
//
// Flags win over the file (as `accelerate launch` flags win over its config file), and fill in
// what the file leaves out or sets to "auto". The cluster, when not given, is picked by the
// process count: CPU runs (`use_cpu: true`, `MULTI_CPU`) get `laptop-cpu`; GPU runs get
// `dgx-a100-80gb` with nodes = num_machines and gpus_per_node = num_processes / num_machines
// (at most 8, a DGX's GPUs; more per machine needs --cluster). With --cluster, that preset's
// nodes and gpus_per_node are overridden the same way; a DeepSpeed config with no process count
// and no train_batch_size to derive it from uses all GPUs of the chosen cluster.
//
// Tensor and pipeline parallelism come from accelerate's MEGATRON_LM megatron_lm_config and
// DeepSpeed's AutoTP tensor_parallel block; dp = processes / (tp × pp), and the batch
// arithmetic (global batch, train_batch_size) counts data-parallel ranks, not GPUs.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace stratagem::scenario {

struct ImportOptions {
  std::string model = "llama2-7b";  ///< model preset
  std::string cluster;              ///< cluster preset; "" picks by process count (see above)
  std::string gpu;                  ///< GPU preset override ("" keeps the cluster's)
  std::int64_t seq_len = 0;         ///< 0: 2048, or the model's learned positions if fewer
  int micro_batch_size = 0;         ///< 0: from the file, else 1
  int grad_accum = 0;               ///< 0: from the file, else derived or 1
  int num_processes = 0;            ///< 0: from the file (accelerate) or derived (DeepSpeed)
  int num_machines = 0;             ///< 0: from the file, else 1
  std::string mixed_precision;      ///< "" keeps the file's; else no, fp16 or bf16
};

/// accelerate's config.yaml → scenario JSON (validated by parse_scenario before returning).
/// Malformed YAML throws SpecError "<file>:<line>:<col>"; unknown values name the key path
/// and list the valid ones. Every config `accelerate config` writes imports: what the import
/// cannot model (fsdp_state_dict_type, dynamo_config, fp8 on a GPU without it, ...) and keys
/// accelerate does not know are named in one line, "<file>: not honoured: a, b; unknown keys,
/// ignored: c", put in `*warning` when given ("" when nothing is named).
nlohmann::json import_accelerate(const std::string& yaml_file, const ImportOptions& options,
                                 std::string* warning = nullptr);
/// DeepSpeed's ds_config.json → scenario JSON (validated). Keys written twice (DeepSpeed keeps
/// the last) and null values (read as absent) are named in one line, "<file>: a written twice
/// (2:3 and 7:3; the last applies); b is null (read as absent)", put in `*warning` when given.
nlohmann::json import_deepspeed(const std::string& json_file, const ImportOptions& options,
                                std::string* warning = nullptr);

/// What `stratagem launch --config_file` takes from an accelerate config: the job's shape and
/// the strategy the Accelerator in each process applies (no model or cluster involved). The
/// same reader as import_accelerate, so both accept and reject the same files.
struct AccelerateLaunchConfig {
  std::optional<int> num_processes;
  std::optional<int> num_machines;
  std::optional<int> machine_rank;
  std::optional<std::string> main_process_ip;
  std::optional<int> main_process_port;
  bool cpu = false;
  std::string sharding = "none";  ///< parse_sharding names: none, zero1, FULL_SHARD, ...
  std::string mixed_precision = "no";
  std::optional<int> grad_accum;
  /// fsdp_config.fsdp_transformer_layer_cls_to_wrap (comma-separated or a list).
  std::vector<std::string> fsdp_wrap_cls;
  /// fsdp_config.fsdp_min_num_params (SIZE_BASED_WRAP); 0 = not set.
  std::int64_t fsdp_min_num_params = 0;
  /// One line naming what the Accelerator does not run (activation checkpointing, offload,
  /// prefetch, ZeRO-3 run as FULL_SHARD, ...) and keys accelerate does not know, as
  /// import_accelerate's; "" when nothing is named.
  std::string warning;
};
AccelerateLaunchConfig read_accelerate_launch_config(const std::string& yaml_file);

}  // namespace stratagem::scenario
