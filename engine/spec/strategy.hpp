#pragma once
// How a model is trained on a cluster: parallelism, schedule, sharding, precision.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/spec/cluster.hpp"
#include "engine/spec/model.hpp"

namespace stratagem::spec {

enum class Schedule { gpipe, one_f_one_b, interleaved };
/// ZeRO stages and FSDP sharding strategies. FSDP's NO_SHARD is `none` (DDP).
enum class Sharding {
  none,
  zero1,
  zero2,
  zero3,
  fsdp_full_shard,
  fsdp_shard_grad_op,
  fsdp_hybrid_shard
};
enum class Precision { no, fp16, bf16 };
enum class Optimizer { adam, adamw, sgd };
enum class Offload { none, cpu };

const char* to_string(Schedule s);
const char* to_string(Sharding s);
const char* to_string(Precision p);
const char* to_string(Optimizer o);
const char* to_string(Recompute r);

/// Parses the names the scenario format and the CLI accept (zero2, FULL_SHARD, ddp, ...).
Sharding parse_sharding(const std::string& name, const std::string& path);

bool shards_optimizer(Sharding s);   ///< ZeRO-1 and up, every FSDP sharding
bool shards_gradients(Sharding s);   ///< ZeRO-2 and up, every FSDP sharding
bool shards_parameters(Sharding s);  ///< ZeRO-3, FULL_SHARD, SHARD_GRAD_OP, HYBRID_SHARD
/// ZeRO-3 / FULL_SHARD / HYBRID_SHARD free gathered parameters after each unit's forward and
/// gather again for backward; SHARD_GRAD_OP keeps them from forward to backward.
bool reshards_after_forward(Sharding s);

/// DeepSpeed's dynamic loss-scale keys (fp16 only).
struct LossScaleSpec {
  int initial_scale_power = 16;
  int loss_scale_window = 1000;
  int hysteresis = 2;
  double min_loss_scale = 1;
};

/// The most micro-batches per optimizer step (per pipeline) a scenario may have, given or
/// derived from the global batch: each is a forward and a backward of every unit in the plan.
inline constexpr int kMaxMicroBatches = 1 << 16;

struct StrategySpec {
  int dp = 1;
  int pp = 1;
  int tp = 1;                      ///< tensor-parallel degree (Megatron-LM)
  bool sequence_parallel = false;  ///< Megatron-LM sequence parallelism (needs tp > 1)
  Schedule schedule = Schedule::one_f_one_b;
  int chunks = 1;  ///< virtual stages per rank (interleaved)
  int micro_batch_size = 1;
  int grad_accum = 1;  ///< micro-batches per optimizer step per pipeline
  Sharding sharding = Sharding::none;
  Precision precision = Precision::no;
  LossScaleSpec loss_scale;
  Recompute recompute = Recompute::none;
  double bucket_mb = 25;  ///< DDP bucket_cap_mb (MiB)
  Optimizer optimizer = Optimizer::adamw;
  bool master_weights = true;  ///< fp32 master copy under fp16/bf16 (bf16 may turn it off)
  Offload offload_optimizer = Offload::none;
  int prefetch = 1;  ///< ZeRO-3/FSDP: units whose gather may run ahead
};

struct TrainingSpec {
  std::int64_t seq_len = 1024;
  std::int64_t global_batch = 0;
  int steps = 1;
  std::uint64_t seed = 1234;
};

/// Parses the strategy; cross-checks against model, cluster and training are in scenario.
StrategySpec parse_strategy(const nlohmann::json& object, const std::string& path);

/// Bytes per element of parameters and gradients as the model computes with them.
double compute_param_bytes(Precision p);
/// The dtype matrix multiplies run in (fp32 training uses fp32, not tf32).
DType compute_dtype(Precision p);
/// Optimizer-state bytes per parameter, fp32 master copy excluded: Adam 8 (momentum and
/// variance in fp32), SGD with momentum 4.
double optimizer_state_bytes_per_param(Optimizer o);
/// Whether training keeps an fp32 master copy of the parameters: fp16 and bf16 do unless
/// `master_weights` is false (pure bf16); fp32 training does not need one.
bool has_master_weights(const StrategySpec& s);
/// The ZeRO paper's K: optimizer bytes per parameter including the master copy
/// (mixed-precision Adam: 12; fp32 Adam: 8; SGD with momentum: 8 mixed, 4 fp32).
double zero_k(const StrategySpec& s);

nlohmann::json to_json(const StrategySpec& s);

}  // namespace stratagem::spec
