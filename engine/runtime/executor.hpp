#pragma once
// The plan executor of the real runtime: one per worker, running its own rank's ops of an
// unfolded StepPlan with real tensors, once per training step. It never looks at the
// strategy's name; what it does follows from the ops:
//  * compute ops run model units forward, backward, recompute, the optimizer and the fp16
//    overflow check, synchronously on the executing thread, in compute-stream order;
//  * collectives go to the Communicator as soon as they head their stream and their deps are
//    done (async), and are waited for only by the ops that depend on them, so a DDP bucket's
//    all-reduce overlaps the rest of the backward. A rank issues its collectives in op-id
//    order, the order every member of a group emits them in, as stream-ordered backends
//    (NCCL, our Gloo) require;
//  * transfers are posted when their deps are done, tagged with the plan's transfer index.
// Every op's start and end, and the bytes per tensor class, are recorded for the RunResult.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/plan/plan.hpp"
#include "engine/result/result.hpp"
#include "engine/comm/communicator.hpp"
#include "engine/runtime/data.hpp"
#include "engine/runtime/executor_state.hpp"
#include "engine/runtime/loss_scaler.hpp"
#include "engine/runtime/model_units.hpp"

namespace stratagem::runtime {

struct ExecutorOptions {
  OptimizerConfig optimizer;
  std::uint64_t seed = 1234;  ///< initial weights (data has its own source)
  /// No op finishing for this long ends the step with a RuntimeError naming what is waiting.
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  /// Called as each op starts (publish progress for hang reports).
  std::function<void(const plan::Op&)> on_op_start;
  /// Fault injection for tests: at these steps this rank writes an inf into its first local
  /// gradient before the fp16 overflow check.
  std::vector<std::int64_t> inject_inf_steps;
};

/// An op of a tensor-parallel chain: the chain's first compute piece, and whether it ends it.
struct TpChainOp {
  plan::OpId piece = plan::kNoOp;
  bool last = false;
};

struct StepOutcome {
  double loss_sum = 0;    ///< sum of the micro-batch mean losses this rank's head computed
  int loss_terms = 0;     ///< micro-batches whose loss this rank computed
  bool skipped = false;   ///< fp16 overflow: the optimizer step was skipped
  double loss_scale = 1;  ///< the scale this step ran with
  double seconds = 0;
  double tp_bytes = 0;  ///< bytes its tensor-parallel collectives carried (the plan's measure)
  result::RankResult trace;  ///< spans and memory of this step
};

/// "op 57 (all_reduce grad_sync on dp(stage 0) units [1,3))": an op for messages.
std::string describe_op(const plan::StepPlan& plan, plan::OpId id);

class Executor {
 public:
  /// Builds this rank's model units and states. `plan` must be unfolded (every rank built).
  Executor(const plan::StepPlan& plan, int rank, comm::Communicator& comm, const DataSource& data,
           ExecutorOptions options, c10::Device device);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  /// Runs the plan once: one optimizer step on global step `step`'s batch.
  StepOutcome step(std::int64_t step);

  ModelState& state() { return *state_; }
  const GptUnits& units() const { return *units_; }
  /// The fp16 loss scaler, or nullptr without fp16.
  DynamicLossScaler* scaler() { return scaler_.get(); }
  const plan::StepPlan& plan() const { return plan_; }
  int rank() const { return rank_; }

 private:
  struct Run;  // one step's execution state (executor_run.hpp)

  const plan::StepPlan& plan_;
  int rank_;
  comm::Communicator& comm_;
  const DataSource& data_;
  ExecutorOptions options_;
  c10::Device device_;
  std::unique_ptr<GptUnits> units_;
  std::unique_ptr<ModelState> state_;
  std::unique_ptr<DynamicLossScaler> scaler_;
  std::unordered_map<plan::OpId, TpChainOp> tp_piece_;  ///< index_tp_chains (executor_run.hpp)
};

}  // namespace stratagem::runtime
