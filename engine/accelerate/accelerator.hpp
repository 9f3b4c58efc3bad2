#pragma once
// stratagem::accelerate::Accelerator: HuggingFace Accelerate for LibTorch programs. A
// single-device training loop becomes a distributed one with two changed lines:
//
//   stratagem::accelerate::Accelerator acc;            // launcher environment + configuration
//   auto [model, optimizer, loader] = acc.prepare(net, adam, data);
//   for (int epoch = 0; epoch < 3; ++epoch) {
//     for (auto& batch : *loader) {
//       auto guard = acc.accumulate(model);             // no sync until the last micro-step
//       optimizer->zero_grad();
//       auto loss = criterion(model->forward(batch.data), batch.target);
//       acc.backward(loss);                             // replaces loss.backward()
//       optimizer->step();
//     }
//     acc.print("epoch ", epoch, " loss ", loss.item<float>());  // main process only
//   }
//
// Started by `stratagem launch --num_processes N -- ./train` (or torchrun, Slurm, mpirun), each
// process finds its rank, device (CUDA + NCCL, or CPU + Gloo with --cpu or without a GPU) and
// the strategy in STRATAGEM_* variables (options.hpp). Run alone, it is a one-process job.
//
// Strategies (data_parallel.hpp): DDP with bucketed all-reduce overlapped with backward,
// ZeRO-1/2 and FSDP FULL_SHARD / SHARD_GRAD_OP with the user's optimizer rebuilt over each
// rank's shard; mixed precision bf16 (autocast) and fp16 (DeepSpeed's dynamic loss scaler);
// a torch::nn::Sequential split into pipeline stages (pipeline.hpp). State: save_state /
// load_state (crash-safe, checkpoint_io.hpp). Observability: trace() is a RunResult that
// `stratagem view` shows; export_scenario() a scenario `stratagem sim` runs on any cluster.
#include <chrono>
#include <functional>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "engine/accelerate/checkpointable.hpp"
#include "engine/accelerate/data_loader.hpp"
#include "engine/accelerate/guards.hpp"
#include "engine/accelerate/measure.hpp"
#include "engine/accelerate/options.hpp"
#include "engine/accelerate/pipeline.hpp"
#include "engine/accelerate/scheduler.hpp"
#include "engine/accelerate/trace.hpp"
#include "engine/result/result.hpp"
#include "engine/comm/communicator.hpp"
#include "engine/launch/dist_env.hpp"
#include "engine/runtime/loss_scaler.hpp"

namespace stratagem::accelerate {

class Accelerator;
class DataParallel;
class Trackers;

/// The optimizer prepare() returns: step() and zero_grad() as the user's, with the strategy
/// underneath (sharded update and all-gather, fp16 unscale and skip, accumulation). Keep it
/// as this type (auto): zero_grad() is not virtual in LibTorch.
class AcceleratedOptimizer : public torch::optim::Optimizer {
 public:
  AcceleratedOptimizer(Accelerator& acc, std::shared_ptr<torch::optim::Optimizer> user);
  /// Steps on a sync step (the last micro-step of an accumulation); else nothing.
  at::Tensor step(LossClosure closure = nullptr) override;
  /// Clears gradients on a sync step; kept during accumulation.
  void zero_grad();
  /// The optimizer this process steps: the user's (DDP) or the one over its shards.
  torch::optim::Optimizer& inner();
  /// The optimizer given to prepare().
  torch::optim::Optimizer& original() { return *user_; }
  /// Makes this wrapper's and the original's learning rates agree: a rate changed on one
  /// (by a scheduler built on it) since the last sync wins. Called before each step.
  void sync_learning_rates();
  /// The rates as at prepare() (schedulers' replay).
  void reset_learning_rates();

 private:
  Accelerator& acc_;
  std::shared_ptr<torch::optim::Optimizer> user_;
  std::vector<double> synced_lrs_, initial_lrs_;
};

/// Returned by accumulate(): marks one micro-step (see Accelerator::accumulate).
class [[nodiscard]] AccumulateGuard {
 public:
  explicit AccumulateGuard(Accelerator& acc);
  ~AccumulateGuard();
  AccumulateGuard(const AccumulateGuard&) = delete;
  AccumulateGuard& operator=(const AccumulateGuard&) = delete;

 private:
  Accelerator& acc_;
};

/// Where export_scenario() puts the model.
struct ExportOptions {
  std::string cluster = "dgx-a100-80gb";  ///< cluster preset
  int nodes = 1;
  int gpus_per_node = 8;
  std::int64_t seq_len = 1;  ///< tokens per sample (1 for non-sequence models)
  std::string name;          ///< scenario name; default "<model> (measured)"
};

class Accelerator {
 public:
  explicit Accelerator(AcceleratorOptions options = AcceleratorOptions::from_env());
  ~Accelerator();
  Accelerator(const Accelerator&) = delete;
  Accelerator& operator=(const Accelerator&) = delete;

  // ---- prepare -----------------------------------------------------------------------
  /// Moves the model to device(), broadcasts rank 0's weights, lays out the strategy's flat
  /// buffers and hooks, wraps the optimizer and shards the loader. `model` is any module
  /// holder (TORCH_MODULE type) or shared_ptr to a module; it is returned unchanged (same
  /// object), the optimizer as AcceleratedOptimizer, the loader sharded in place.
  template <typename Model, typename Dataset>
  std::tuple<Model, std::shared_ptr<AcceleratedOptimizer>, std::shared_ptr<DataLoader<Dataset>>>
  prepare(Model model, std::shared_ptr<torch::optim::Optimizer> optimizer,
          std::shared_ptr<DataLoader<Dataset>> loader) {
    prepare_model(*model, std::move(optimizer), model_name(model));
    prepare_data_loader(*loader);
    return {model, optimizer_, loader};
  }
  template <typename Model>
  std::tuple<Model, std::shared_ptr<AcceleratedOptimizer>> prepare(
      Model model, std::shared_ptr<torch::optim::Optimizer> optimizer) {
    prepare_model(*model, std::move(optimizer), model_name(model));
    return {model, optimizer_};
  }
  /// The same with a learning-rate scheduler (built on `optimizer` or the returned one).
  template <typename Model, typename Dataset>
  std::tuple<Model, std::shared_ptr<AcceleratedOptimizer>, std::shared_ptr<DataLoader<Dataset>>,
             std::shared_ptr<AcceleratedScheduler>>
  prepare(Model model, std::shared_ptr<torch::optim::Optimizer> optimizer,
          std::shared_ptr<DataLoader<Dataset>> loader,
          std::shared_ptr<torch::optim::LRScheduler> scheduler) {
    prepare_model(*model, std::move(optimizer), model_name(model));
    prepare_data_loader(*loader);
    return {model, optimizer_, loader, prepare_scheduler(std::move(scheduler))};
  }
  /// Shards a loader over the processes (evaluation loaders too). Prepare each loader once;
  /// save_state records each one's position under `name` (default: its preparation order),
  /// so a resumed run may prepare named loaders in any order.
  void prepare_data_loader(DataLoaderBase& loader, const std::string& name = "");
  /// A scheduler stepped with the optimizer (scheduler.hpp); saved by save_state.
  std::shared_ptr<AcceleratedScheduler> prepare_scheduler(
      std::shared_ptr<torch::optim::LRScheduler> scheduler);
  /// prepare() returns the user's own object, so unwrapping is the identity (kept for
  /// Accelerate's API). Under FSDP its parameters may be freed shards between steps: use
  /// get_state_dict() for the full weights.
  template <typename Model>
  Model unwrap_model(Model model) const {
    return model;
  }
  /// Collective. The full parameters and buffers by name (gathered from the shards under
  /// ZeRO/FSDP), on the CPU, on every process: what to save or evaluate with.
  std::vector<std::pair<std::string, at::Tensor>> get_state_dict();
  /// Drops every prepared object (model strategy, optimizer, loaders, schedulers) so that
  /// prepare() can run again, e.g. with another batch size; the model keeps full weights.
  void free_memory();
  /// Pipeline parallelism (pipeline_stages = number of processes): splits `model` into
  /// stages (pipeline.hpp). Every process reads the whole batch; train with train_batch().
  template <typename Dataset>
  std::tuple<torch::nn::Sequential, std::shared_ptr<AcceleratedOptimizer>,
             std::shared_ptr<DataLoader<Dataset>>>
  prepare_pipeline(torch::nn::Sequential model, std::shared_ptr<torch::optim::Optimizer> optimizer,
                   std::shared_ptr<DataLoader<Dataset>> loader) {
    prepare_pipeline_model(model, std::move(optimizer));
    // Every stage of a pipeline reads the same batches (the first its data, the last its
    // targets); the pipelines of data parallelism read their own shards.
    loader->shard(pipeline_replica(), pipeline_replicas(), options_.split_batches,
                  options_.even_batches, &observer_);
    add_loader(*loader, "");
    return {model, optimizer_, loader};
  }
  /// Pipeline: forward and backward of every micro-batch of (data, target) through the
  /// stages (DeepSpeed's train_batch without the step); returns the batch's mean loss on
  /// every process. Call optimizer->step() after it.
  double train_batch(const at::Tensor& data, const at::Tensor& target, const LossFn& loss_fn);

  // ---- the training step ---------------------------------------------------------------
  /// Replaces loss.backward(): divides by the accumulation steps, multiplies by the fp16 loss
  /// scale, runs backward with the strategy's gradient hooks and, on a sync step, finishes
  /// the gradient collectives so the optimizer reads the global mean gradient.
  void backward(const at::Tensor& loss);
  /// One micro-step of gradient accumulation (gradient_accumulation_steps of them per
  /// optimizer step): no communication and no optimizer step until the last. Also marks the
  /// forward's start for the trace.
  template <typename Model>
  AccumulateGuard accumulate(const Model&) {
    return AccumulateGuard(*this);
  }
  /// Accelerate's GradientState.sync_gradients: after a backward, whether it synced the
  /// gradients (the optimizer steps now); before it, whether it will. A backward syncs on the
  /// last micro-step of each accumulation, on the last batch of the loader being iterated
  /// (leftover micro-batches are stepped, not carried into the next epoch), and never inside
  /// no_sync().
  bool sync_gradients() const;
  /// The loader being iterated just handed out its epoch's last batch.
  bool end_of_dataloader() const;
  /// Backwards inside accumulate locally (DDP's no_sync); see guards.hpp.
  template <typename Model>
  NoSyncGuard no_sync(const Model&) {
    return NoSyncGuard(*this);
  }
  /// The job's mixed precision on (or off) for a scope.
  AutocastGuard autocast(bool enabled = true) { return AutocastGuard(*this, enabled); }
  /// Collective, on a sync step between backward() and the optimizer's step(): scales the
  /// gradients the optimizer will read so their global `norm_type` norm (inf: max) is at most
  /// `max_norm`, over every shard and stage (torch.nn.utils.clip_grad_norm_); under fp16 the
  /// gradients are unscaled first (once per step, as Accelerate's unscale_gradients). Returns
  /// the norm before clipping (inf or nan when an fp16 step overflowed: nothing is clipped
  /// and the step will be skipped).
  double clip_grad_norm_(double max_norm, double norm_type = 2.0);
  /// The same contract, clamping every gradient element to [-value, value].
  void clip_grad_value_(double clip_value);
  /// fp16: the last optimizer step was skipped because some gradient overflowed.
  bool optimizer_step_was_skipped() const { return skipped_; }
  double loss_scale() const;
  std::int64_t optimizer_steps() const { return optimizer_steps_; }

  // ---- processes -------------------------------------------------------------------------
  bool is_main_process() const { return env_.rank == 0; }
  bool is_local_main_process() const { return env_.local_rank == 0; }
  int process_index() const { return env_.rank; }
  int local_process_index() const { return env_.local_rank; }
  int num_processes() const { return env_.world_size; }
  c10::Device device() const { return device_; }
  void wait_for_everyone();
  /// Prints the arguments (streamed) and a newline on the main process only.
  template <typename... Args>
  void print(const Args&... args) const {
    if (!is_main_process()) return;
    std::ostringstream s;
    (s << ... << args);
    std::cout << s.str() << std::endl;
  }
  /// The tensor of every process, concatenated along dim 0 (a scalar becomes one row each);
  /// shapes must match across processes. On device(); the result on every process.
  at::Tensor gather(const at::Tensor& tensor);
  /// Element-wise "sum", "mean" or "max" over processes.
  at::Tensor reduce(const at::Tensor& tensor, const std::string& op = "mean");
  /// gather() for per-sample results of the batch last read from a prepared loader (rows =
  /// that batch's): drops the rows that are even_batches padding duplicates and accepts the
  /// uneven last batches of even_batches=false, so an epoch's gathered rows are the dataset's
  /// samples exactly once. Other tensors are gathered as gather() does.
  at::Tensor gather_for_metrics(const at::Tensor& tensor);

  // ---- trackers (trackers.hpp) -------------------------------------------------------------
  /// Main process: opens the trackers of `log_with` ("jsonl", "csv", "all"; default
  /// STRATAGEM_LOG_WITH, else jsonl) under <project_dir>/<project> (STRATAGEM_PROJECT_DIR,
  /// default ".") and records `config`.
  void init_trackers(const std::string& project, const nlohmann::json& config = {},
                     const std::string& log_with = "");
  /// Main process: one record of `values` (numbers, strings, nested objects) at `step`.
  void log(const nlohmann::json& values, std::int64_t step = -1);
  /// Closes the trackers (Accelerate's end_training).
  void end_training();

  // ---- state, trace, export ----------------------------------------------------------------
  /// Collective. Writes DIR/checkpoint-<optimizer steps>/rank-<r>.ckpt (model states this
  /// process owns, optimizer state, loss scaler, RNG, data position) and manifest.json last:
  /// a crash while saving leaves the previous checkpoint the newest complete one.
  void save_state(const std::string& dir);
  /// Collective. Loads the newest complete checkpoint in DIR; SpecError when there is none or
  /// it was written by another number of processes or strategy.
  void load_state(const std::string& dir);
  /// Adds an object to what save_state / load_state carry (checkpointable.hpp), or a module
  /// (its parameters and buffers; e.g. an EMA model). Register the same ones, in the same
  /// order, before load_state.
  void register_for_checkpointing(Checkpointable& object);
  void register_for_checkpointing(torch::nn::Module& module);
  /// Collective. The last completed optimizer step as a RunResult (executor "real"): every
  /// process's spans and memory, losses per step, the median step time (first step excluded)
  /// and samples/s from it.
  result::RunResult trace();
  /// Collective. trace() written by the main process to `path` (for `stratagem view`).
  void save_trace(const std::string& path);
  /// Collective. The model's measured shape and this job's strategy as a scenario for
  /// `stratagem sim` on the cluster in `options`: parameters, forward FLOPs and activation
  /// bytes per unit (measured.hpp; the processes' mean over the second forward, else the
  /// first), or the quick form (parameters and units) when nothing was measured (pipelines,
  /// STRATAGEM_MEASURE_MODEL=0, no backward yet).
  void export_scenario(const std::string& path, const ExportOptions& options = {});

  const AcceleratorOptions& options() const { return options_; }
  comm::Communicator& communicator() { return *comm_; }
  const launch::DistEnv& dist_env() const { return env_; }
  Tracer& tracer() { return tracer_; }

 private:
  friend class AcceleratedOptimizer;
  friend class AccumulateGuard;
  friend class AcceleratedScheduler;
  friend class NoSyncGuard;
  friend class AutocastGuard;
  template <typename Model>
  static std::string model_name(const Model& model) {
    return readable_name(model->name());
  }
  /// A module's type name without namespaces' noise and TORCH_MODULE's "Impl".
  static std::string readable_name(std::string name);
  void prepare_model(torch::nn::Module& module, std::shared_ptr<torch::optim::Optimizer> optimizer,
                     const std::string& name);
  void prepare_pipeline_model(torch::nn::Sequential model,
                              std::shared_ptr<torch::optim::Optimizer> optimizer);
  int pipeline_replica() const;
  int pipeline_replicas() const;
  void optimizer_step();
  void optimizer_zero_grad();
  void begin_micro_step();
  /// Marks a forward's start (trace) and, while measuring, restarts the op profiler.
  void mark_forward_start();
  /// Bytes per activation element of this job's forward (measurement).
  double activation_element_bytes() const;
  /// Collective: every process's measurement, averaged, into measured_ (or none).
  void gather_measurement();
  void set_autocast(bool on);
  /// Whether the coming backward syncs (the gradient-state rule, without side effects).
  bool next_backward_syncs() const;
  /// Before a backward: whether it syncs, and the accumulation cycle after it.
  bool decide_sync();
  /// fp16: unscales the gradients once per step (clipping, then the step).
  bool unscale_gradients();
  /// The mistakes caught at backward and step (a plain loss.backward(), the original
  /// optimizer stepped, a training step some process has no batch for).
  enum class UsagePoint { backward, optimizer_step };
  void check_usage(UsagePoint at);
  /// load_state: the schedulers' step counts replayed (scheduler.hpp).
  void restore_schedulers(const nlohmann::json& header);
  scenario::Scenario scenario(const ExportOptions* where) const;

  AcceleratorOptions options_;
  launch::DistEnv env_;
  /// Tensor parallelism: this rank's TP group, and the data-parallel group (ranks of equal TP
  /// index) that gradients, loaders and metrics span; both empty without TP.
  TpGroup tp_;
  comm::GroupSpec dp_group_;
  int dp_size() const { return env_.world_size / options_.tp_size; }
  int dp_index() const { return env_.rank / options_.tp_size; }
  void prepare_tensor_parallel(torch::nn::Module& module);
  c10::Device device_;
  std::unique_ptr<comm::Communicator> comm_;
  Tracer tracer_;
  std::unique_ptr<runtime::DynamicLossScaler> scaler_;
  torch::nn::Module* model_ = nullptr;
  std::string model_name_;
  std::unique_ptr<DataParallel> dp_;
  std::unique_ptr<Pipeline> pipeline_;
  std::unique_ptr<comm::Communicator> solo_;  ///< a one-process world: the stage's own
  AcceleratorOptions stage_options_;
  std::shared_ptr<AcceleratedOptimizer> optimizer_;
  /// The loaders prepared, in order; save_state records each one's position, and the first
  /// (the training loader, by convention) sizes the samples per step.
  std::vector<DataLoaderBase*> loaders_;
  std::vector<std::string> loader_names_;  ///< save_state's key of each
  DataLoaderBase* loader_ = nullptr;
  LoaderObserver observer_;  ///< which loader handed out the last batch
  void add_loader(DataLoaderBase& loader, const std::string& name);
  std::int64_t micro_step_ = 0;  ///< backwards so far
  std::int64_t cycle_ = 0;       ///< micro-steps of the accumulation under way
  bool sync_ = true;             ///< the last backward synced gradients
  bool backward_done_ = false;   ///< a backward ran since the micro-step began
  int no_sync_depth_ = 0;
  bool autocast_on_ = false;
  bool unscaled_ = false;        ///< fp16: this step's gradients are unscaled already
  bool overflow_ = false;        ///< fp16: … and they overflowed
  bool stepped_since_sync_ = true;  ///< the prepared optimizer stepped after the last sync
  bool skipped_ = false;
  std::vector<std::shared_ptr<AcceleratedScheduler>> schedulers_;
  std::vector<std::function<void(torch::serialize::OutputArchive&)>> save_extra_;
  std::vector<std::function<void(torch::serialize::InputArchive&)>> load_extra_;
  std::unique_ptr<Trackers> trackers_;
  std::int64_t optimizer_steps_ = 0;
  double mark_s_ = 0;           ///< the current forward's start (trace)
  ModelMeasurer measurer_;
  std::optional<scenario::MeasuredModel> measured_;  ///< gather_measurement()'s
  std::vector<double> losses_;  ///< per optimizer step, this process's summed micro-step losses
  double step_loss_ = 0;
  std::int64_t samples_per_step_ = 0;
};

/// Seeds torch's generators (CPU and every GPU) and rand(), plus the process index when
/// `device_specific` (accelerate.utils.set_seed). STRATAGEM_SEED does this when the
/// Accelerator starts, and seeds the shuffling of every loader it prepares.
void set_seed(std::uint64_t seed, bool device_specific = false);

}  // namespace stratagem::accelerate
