#pragma once
// A learning-rate scheduler prepared by the Accelerator (Accelerate's AcceleratedScheduler):
// step() steps the user's torch::optim::LRScheduler only after a real optimizer step — not on
// gradient-accumulation micro-steps, not after an fp16 step skipped for overflow — and, as
// Accelerate does without split_batches, once per data-parallel replica (a schedule written
// for one process's number of batches then sees the same samples per learning rate).
// The scheduler may be built on the prepared optimizer or on the original one: either way
// the learning rate it sets is the one the (sharded) optimizer uses.
// State: LibTorch's schedulers have no state_dict, and their step depends only on how often
// they were stepped and the optimizer's learning rates, so save_state records the count and
// the learning rates; load_state sets the initial rates back, replays the count on the fresh
// scheduler and checks that it lands on the saved rates (else restores them with a warning).
#include <cstdint>
#include <memory>
#include <vector>

#include <torch/optim/schedulers/lr_scheduler.h>

namespace stratagem::accelerate {

class Accelerator;

class AcceleratedScheduler {
 public:
  AcceleratedScheduler(Accelerator& acc, std::shared_ptr<torch::optim::LRScheduler> scheduler,
                       int steps_per_optimizer_step);
  /// After optimizer->step(): steps the scheduler when the optimizer really stepped.
  void step();
  torch::optim::LRScheduler& scheduler() { return *scheduler_; }
  /// Times the user's scheduler was stepped (checkpointed).
  std::int64_t steps() const { return steps_; }
  /// load_state: replays `steps` steps on the (fresh) scheduler from the initial rates.
  void replay(std::int64_t steps);

 private:
  Accelerator& acc_;
  std::shared_ptr<torch::optim::LRScheduler> scheduler_;
  int per_step_;
  std::int64_t steps_ = 0;
};

}  // namespace stratagem::accelerate
