#include "engine/scenario/strategy_rewrite.hpp"

#include "engine/scenario/error.hpp"

namespace stratagem::scenario {

std::optional<std::int64_t> grad_accum_for(std::int64_t global_batch, int micro_batch_size,
                                           int dp) {
  const std::int64_t per_accum = std::int64_t{micro_batch_size} * dp;
  if (per_accum <= 0 || global_batch % per_accum != 0) return std::nullopt;
  return global_batch / per_accum;
}

std::int64_t require_grad_accum(std::int64_t global_batch, int micro_batch_size, int dp) {
  if (const auto m = grad_accum_for(global_batch, micro_batch_size, dp)) return *m;
  throw SpecError("training.global_batch", std::to_string(global_batch) +
                                               " is not a multiple of micro_batch_size × dp = " +
                                               std::to_string(std::int64_t{micro_batch_size} * dp));
}

std::int64_t global_batch_of(int micro_batch_size, int micro_batches, int dp) {
  return static_cast<std::int64_t>(micro_batch_size) * micro_batches * dp;
}

bool sequence_parallel_allowed(int tp) {
  return tp > 1;
}

bool default_sequence_parallel(int tp, std::int64_t seq_len) {
  return sequence_parallel_allowed(tp) && seq_len % tp == 0;
}

bool fp8_all_gather_allowed(Precision precision, Sharding sharding) {
  return precision == Precision::fp8 && shards_parameters(sharding);
}

bool async_tp_allowed(const StrategySpec& s) {
  StrategySpec on = s;
  on.async_tp = true;
  const StackRefusal why = stack_refusal(on);
  return !why || why.key != "async_tp";
}

bool optimizer_offload_allowed(Sharding sharding) {
  return shards_optimizer(sharding);
}

}  // namespace stratagem::scenario
