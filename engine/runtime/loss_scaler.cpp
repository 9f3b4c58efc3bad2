#include "engine/runtime/loss_scaler.hpp"

#include <algorithm>
#include <cmath>

namespace stratagem::runtime {

namespace {
constexpr double kScaleFactor = 2.0;  // DeepSpeed's scale_factor
}

DynamicLossScaler::DynamicLossScaler(const scenario::LossScaleSpec& spec) : spec_(spec) {
  state_.scale = std::ldexp(1.0, spec.initial_scale_power);
  state_.hysteresis_left = spec.hysteresis;
}

void DynamicLossScaler::update(bool overflow) {
  if (overflow) {
    if (spec_.hysteresis == 1 || state_.hysteresis_left == 1) {
      state_.scale = std::max(state_.scale / kScaleFactor, spec_.min_loss_scale);
    } else {
      --state_.hysteresis_left;
    }
    state_.last_overflow_iteration = state_.iteration;
  } else if ((state_.iteration - state_.last_overflow_iteration) % spec_.loss_scale_window == 0) {
    state_.hysteresis_left = spec_.hysteresis;
    state_.scale *= kScaleFactor;
  }
  ++state_.iteration;
}

}  // namespace stratagem::runtime
