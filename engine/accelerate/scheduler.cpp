#include "engine/accelerate/scheduler.hpp"

#include "engine/accelerate/accelerator.hpp"

namespace stratagem::accelerate {

AcceleratedScheduler::AcceleratedScheduler(Accelerator& acc,
                                           std::shared_ptr<torch::optim::LRScheduler> scheduler,
                                           int steps_per_optimizer_step)
    : acc_(acc), scheduler_(std::move(scheduler)), per_step_(steps_per_optimizer_step) {}

void AcceleratedScheduler::step() {
  // Accelerate's AcceleratedScheduler.step: nothing on accumulation micro-steps or after an
  // overflowed fp16 step, else once per replica.
  if (!acc_.sync_ || !acc_.stepped_since_sync_ || acc_.optimizer_step_was_skipped()) return;
  for (int i = 0; i < per_step_; ++i) scheduler_->step();
  steps_ += per_step_;
  acc_.optimizer_->sync_learning_rates();
}

void AcceleratedScheduler::replay(std::int64_t steps) {
  for (std::int64_t i = 0; i < steps; ++i) scheduler_->step();
  steps_ = steps;
  acc_.optimizer_->sync_learning_rates();
}

}  // namespace stratagem::accelerate
