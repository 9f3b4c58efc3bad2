#pragma once
// One rank's training run: builds the unfolded plan of the scenario, an Executor over the
// given Communicator, and runs the steps: after each, the mean loss over the whole global
// batch is agreed by all ranks (one all-reduce outside the plan, like the loss logging of
// Megatron-LM), checkpoints are written when asked, and the last step's trace is kept for the
// RunResult. Used by `stratagem worker` (one process per rank) and by the tests (one thread
// per rank over the in-process communicator).
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <c10/core/Device.h>

#include "engine/plan/plan.hpp"
#include "engine/result/result.hpp"
#include "engine/comm/communicator.hpp"
#include "engine/runtime/data.hpp"
#include "engine/runtime/executor.hpp"

namespace stratagem::runtime {

struct TrainOptions {
  int steps = 1;          ///< steps to run (counting from the resumed step)
  std::string data_file;  ///< byte-level text; empty: the synthetic language
  OptimizerConfig optimizer;
  c10::Device device = c10::Device(c10::kCPU);
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  std::string save_dir;    ///< empty: no checkpoints
  int save_every = 0;      ///< 0: only after the last step
  std::string resume_dir;  ///< empty: start from the initial weights
  /// Fault injection (tests): rank `inject_inf_rank` puts an inf into its gradients before
  /// the fp16 overflow check of these steps.
  std::vector<std::int64_t> inject_inf_steps;
  int inject_inf_rank = 0;
  /// Fault injection (tests): rank `kill_during_save_rank` ends its process with SIGKILL while
  /// writing the checkpoint of this step, after its shard's temporary file is written and
  /// before it is renamed.
  std::int64_t kill_during_save_step = -1;
  int kill_during_save_rank = 0;
  /// Fault injection (tests): rank `stall_rank` stops (sleeps) before step `stall_at_step`,
  /// so the others' collectives and transfers with it hang.
  std::int64_t stall_at_step = -1;
  int stall_rank = 0;
  /// Called after each step on every rank with (step, mean loss, seconds).
  std::function<void(std::int64_t, double, double)> on_step;
  /// Called as each op starts (progress for hang reports).
  std::function<void(const plan::Op&)> on_op_start;
  /// Called when the rank does something outside the plan ("saving checkpoint step-4").
  std::function<void(const std::string&)> on_activity;
};

struct TrainResult {
  std::int64_t first_step = 0;       ///< the step training started from (after a resume)
  std::vector<double> losses;        ///< per step: mean loss over the global batch
  std::vector<double> step_seconds;  ///< per step, this rank's wall time
  std::vector<double> loss_scales;   ///< fp16: the scale each step ran with
  std::vector<bool> skipped;         ///< fp16: steps whose update was skipped
  std::vector<double> tp_bytes;      ///< per step, bytes this rank's TP collectives carried
  result::RankResult trace;          ///< this rank's last step
};

class Trainer {
 public:
  /// Validates the scenario for the runtime (decoder model, unfolded plan) and builds this
  /// rank's executor; `comm.world_size()` must equal the scenario's dp·pp.
  Trainer(const scenario::Scenario& scenario, comm::Communicator& comm, TrainOptions options);
  ~Trainer();

  TrainResult run();

  const plan::StepPlan& plan() const { return *plan_; }
  Executor& executor() { return *executor_; }
  const DataSource& data() const { return *data_; }

 private:
  double agree_loss(const StepOutcome& out);

  TrainOptions options_;
  comm::Communicator& comm_;
  std::unique_ptr<plan::StepPlan> plan_;
  std::unique_ptr<DataSource> data_;
  std::unique_ptr<Executor> executor_;
};

}  // namespace stratagem::runtime
