#include "engine/memory/model_states.hpp"

#include <string>

#include "engine/scenario/error.hpp"

namespace stratagem::memory {

ModelStates model_states(double params, int shards, const scenario::StrategySpec& strategy) {
  const double n = shards;
  const double c = scenario::compute_param_bytes(strategy.precision);
  const scenario::Sharding sharding = strategy.sharding;
  ModelStates m;
  m.params_bytes = scenario::shards_parameters(sharding) ? c * params / n : c * params;
  m.grads_bytes = scenario::shards_gradients(sharding) ? c * params / n : c * params;
  const double optimizer_share = scenario::shards_optimizer(sharding) ? params / n : params;
  const double optimizer =
      scenario::optimizer_state_bytes_per_param(strategy.optimizer) * optimizer_share;
  const double master =
      scenario::has_master_weights(strategy) ? kMasterBytesPerParam * optimizer_share : 0.0;
  if (strategy.offload_optimizer == scenario::Offload::cpu) {
    // ZeRO-Offload keeps the fp32 optimizer step on the CPU: states and master copy move.
    m.host_bytes = optimizer + master;
  } else {
    m.optimizer_bytes = optimizer;
    m.master_weights_bytes = master;
  }
  m.loss_scale_bytes = strategy.precision == scenario::Precision::fp16 ? kLossScaleBytes : 0.0;
  return m;
}

scenario::Sharding sharding_of_zero_stage(int zero_stage) {
  switch (zero_stage) {
    case 0:
      return scenario::Sharding::none;
    case 1:
      return scenario::Sharding::zero1;
    case 2:
      return scenario::Sharding::zero2;
    case 3:
      return scenario::Sharding::zero3;
    default:
      break;
  }
  throw SpecError("--zero", "ZeRO stage must be 0, 1, 2 or 3, got " + std::to_string(zero_stage));
}

ModelStates zero_model_states(double params, int shards, int zero_stage,
                              const scenario::StrategySpec& strategy) {
  scenario::StrategySpec s = strategy;
  s.sharding = sharding_of_zero_stage(zero_stage);
  return model_states(params, shards, s);
}

int shard_group_size(const scenario::Scenario& scenario) {
  if (scenario.strategy.sharding == scenario::Sharding::fsdp_hybrid_shard) {
    // The data-parallel ranks of one tensor-parallel index inside a node.
    return scenario.cluster.gpus_per_node / scenario.strategy.tp;
  }
  // Every data-parallel rank with its context-parallel peers (dp × cp) holds a shard.
  return scenario.strategy.dp * scenario.strategy.cp;
}

}  // namespace stratagem::memory
