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
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <torch/torch.h>

#include "engine/accelerate/data_loader.hpp"
#include "engine/accelerate/measure.hpp"
#include "engine/accelerate/options.hpp"
#include "engine/accelerate/pipeline.hpp"
#include "engine/accelerate/trace.hpp"
#include "engine/result/result.hpp"
#include "engine/comm/communicator.hpp"
#include "engine/launch/dist_env.hpp"
#include "engine/runtime/loss_scaler.hpp"

namespace stratagem::accelerate {

class Accelerator;
class DataParallel;

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

 private:
  Accelerator& acc_;
  std::shared_ptr<torch::optim::Optimizer> user_;
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
  void prepare_data_loader(DataLoaderBase& loader);
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
    loader->shard(pipeline_replica(), pipeline_replicas(), options_.split_batches);
    add_loader(*loader);
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
  /// True when the coming backward is the last of an accumulation (gradients get synced).
  bool sync_gradients() const;
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

  // ---- state, trace, export ----------------------------------------------------------------
  /// Collective. Writes DIR/checkpoint-<optimizer steps>/rank-<r>.ckpt (model states this
  /// process owns, optimizer state, loss scaler, RNG, data position) and manifest.json last:
  /// a crash while saving leaves the previous checkpoint the newest complete one.
  void save_state(const std::string& dir);
  /// Collective. Loads the newest complete checkpoint in DIR; SpecError when there is none or
  /// it was written by another number of processes or strategy.
  void load_state(const std::string& dir);
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
  runtime::Communicator& communicator() { return *comm_; }
  const runtime::DistEnv& dist_env() const { return env_; }
  Tracer& tracer() { return tracer_; }

 private:
  friend class AcceleratedOptimizer;
  friend class AccumulateGuard;
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
  spec::Scenario scenario(const ExportOptions* where) const;

  AcceleratorOptions options_;
  runtime::DistEnv env_;
  c10::Device device_;
  std::unique_ptr<runtime::Communicator> comm_;
  Tracer tracer_;
  std::unique_ptr<runtime::DynamicLossScaler> scaler_;
  torch::nn::Module* model_ = nullptr;
  std::string model_name_;
  std::unique_ptr<DataParallel> dp_;
  std::unique_ptr<Pipeline> pipeline_;
  std::unique_ptr<runtime::Communicator> solo_;  ///< a one-process world: the stage's own
  AcceleratorOptions stage_options_;
  std::shared_ptr<AcceleratedOptimizer> optimizer_;
  /// The loaders prepared, in order; save_state records each one's position, and the first
  /// (the training loader, by convention) sizes the samples per step.
  std::vector<DataLoaderBase*> loaders_;
  DataLoaderBase* loader_ = nullptr;
  void add_loader(DataLoaderBase& loader);
  std::int64_t micro_step_ = 0;  ///< backwards so far
  bool sync_ = true;             ///< the last backward synced gradients
  bool skipped_ = false;
  std::int64_t optimizer_steps_ = 0;
  double mark_s_ = 0;           ///< the current forward's start (trace)
  ModelMeasurer measurer_;
  std::optional<spec::MeasuredModel> measured_;  ///< gather_measurement()'s
  std::vector<double> losses_;  ///< per optimizer step, this process's summed micro-step losses
  double step_loss_ = 0;
  std::int64_t samples_per_step_ = 0;
};

}  // namespace stratagem::accelerate
