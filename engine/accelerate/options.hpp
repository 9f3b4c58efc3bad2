#pragma once
// How an Accelerator trains: the strategy, precision and accumulation that `stratagem launch`
// passes down as STRATAGEM_* variables (from its flags or an accelerate YAML), overridable in
// code:
//
//   auto options = stratagem::accelerate::AcceleratorOptions::from_env();
//   options.mixed_precision = stratagem::scenario::Precision::bf16;
//   stratagem::accelerate::Accelerator acc(options);
//
// Variables (all optional): STRATAGEM_SHARDING (ddp | zero1 | zero2 | FULL_SHARD |
// SHARD_GRAD_OP), STRATAGEM_MIXED_PRECISION (no | fp16 | bf16), STRATAGEM_CPU (1),
// STRATAGEM_GRADIENT_ACCUMULATION_STEPS, STRATAGEM_BUCKET_MB, STRATAGEM_FSDP_WRAP_CLS
// (comma-separated type names), STRATAGEM_FSDP_MIN_NUM_PARAMS, STRATAGEM_SPLIT_BATCHES (1),
// STRATAGEM_EVEN_BATCHES (0 | 1), STRATAGEM_SEED, STRATAGEM_LOG_WITH (jsonl | csv | all),
// STRATAGEM_PROJECT_DIR, STRATAGEM_DEBUG (1: LibTorch's warnings shown), STRATAGEM_TIMEOUT
// (seconds), STRATAGEM_PIPELINE_STAGES, STRATAGEM_PIPELINE_SCHEDULE (gpipe | 1f1b),
// STRATAGEM_PIPELINE_MICRO_BATCHES, STRATAGEM_TP_SIZE. A bad value throws SpecError naming the
// variable.
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/accelerate/tensor_parallel.hpp"
#include "engine/scenario/strategy.hpp"

namespace stratagem::accelerate {

struct AcceleratorOptions {
  scenario::Sharding sharding = scenario::Sharding::none;  ///< none = DDP (NO_SHARD)
  scenario::Precision mixed_precision = scenario::Precision::no;
  scenario::LossScaleSpec loss_scale;  ///< fp16 dynamic loss scaling (DeepSpeed's defaults)
  bool cpu = false;                ///< CPU and Gloo even when a GPU is present
  int gradient_accumulation_steps = 1;
  double bucket_mb = 25;  ///< DDP / ZeRO gradient bucket size (PyTorch's bucket_cap_mb)
  /// FSDP wrap policy: every submodule whose type name (the class name, as in
  /// fsdp_transformer_layer_cls_to_wrap) is listed becomes a unit; else, with
  /// fsdp_min_num_params > 0, every submodule of at least that many parameters whose children
  /// are all smaller (size-based wrap); parameters in no unit form the root unit.
  std::vector<std::string> fsdp_wrap_cls;
  std::int64_t fsdp_min_num_params = 0;
  /// The data loader's batch size is the global one, split over the processes (accelerate's
  /// split_batches); else each process takes a whole batch (global = batch × processes).
  bool split_batches = false;
  /// Pad every loader so each process gets as many samples (Accelerate's even_batches).
  bool even_batches = true;
  /// set_seed(seed) when the Accelerator starts (torch's generators), and the shuffling seed
  /// of every prepared loader; unset: neither is touched.
  std::optional<std::uint64_t> seed;
  std::string log_with;            ///< init_trackers' default ("" = jsonl)
  std::string project_dir = ".";   ///< where init_trackers writes
  bool debug = false;              ///< LibTorch's own warnings (profiler, allocator) shown
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  int pipeline_stages = 1;  ///< > 1: prepare() splits a torch::nn::Sequential over processes
  scenario::Schedule pipeline_schedule = scenario::Schedule::one_f_one_b;
  int pipeline_micro_batches = 0;  ///< 0: as many as stages
  /// Tensor parallelism (tensor_parallel.hpp): processes per TP group (consecutive ranks, as
  /// Megatron-LM numbers them), the rest data-parallel over the ranks of equal TP index;
  /// `tp_plan` names the ParallelLinear layers to shard (set it in code).
  int tp_size = 1;
  TpPlan tp_plan;
  /// Profile the first two forwards (FLOPs, allocations per unit) for export_scenario().
  bool measure_model = true;

  /// The options `stratagem launch` set for this process (defaults where unset).
  static AcceleratorOptions from_env();
  /// The same from a given variable map (tests).
  static AcceleratorOptions from_vars(const std::map<std::string, std::string>& vars);
};

}  // namespace stratagem::accelerate
