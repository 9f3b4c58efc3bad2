#pragma once
// fp16 dynamic loss scaling with DeepSpeed's semantics (deepspeed/runtime/fp16/loss_scaler.py,
// DynamicLossScaler): start at 2^initial_scale_power; on an overflow (inf/nan in any rank's
// gradients) skip the step and, once `hysteresis` overflows have used up the delay, halve the
// scale (never below min_loss_scale); after `loss_scale_window` steps since the last
// overflow, double it. The hysteresis counter is restored only by a window's doubling
// (consecutive_hysteresis false, DeepSpeed's default).
#include <cstdint>

#include "engine/scenario/strategy.hpp"

namespace stratagem::runtime {

class DynamicLossScaler {
 public:
  /// The scaler's whole state, for checkpoints.
  struct State {
    double scale = 1;
    std::int64_t iteration = 0;  ///< steps seen (skipped ones included)
    std::int64_t last_overflow_iteration = -1;
    int hysteresis_left = 1;
  };

  explicit DynamicLossScaler(const scenario::LossScaleSpec& spec);

  double scale() const { return state_.scale; }
  /// Records one step's outcome and adjusts the scale. The caller skips the optimizer step
  /// when `overflow` is true.
  void update(bool overflow);

  const State& state() const { return state_; }
  void restore(const State& s) { state_ = s; }

 private:
  scenario::LossScaleSpec spec_;
  State state_;
};

}  // namespace stratagem::runtime
