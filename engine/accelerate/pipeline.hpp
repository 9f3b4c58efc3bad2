#pragma once
// Pipeline parallelism for a torch::nn::Sequential, like DeepSpeed's PipelineModule: the
// layers are split into as many contiguous stages as processes, balanced by parameter count;
// each process keeps its stage (the other stages' parameters are freed), and a batch is cut
// into micro-batches that flow through the stages with send/recv, in a GPipe (all forwards,
// then all backwards) or 1F1B (warm-up forwards, then one forward one backward) schedule.
// Activations travel with a small header (rank, shape, dtype), so stages need not know each
// other's shapes. Gradients accumulate over the micro-batches in the stage's flat buffers;
// the loss of each micro-batch is divided by their number, so a step equals one over the
// whole batch. With more processes than stages, dp = processes / stages pipelines run side by
// side (DeepSpeed's data-parallel pipelines): process r is stage r / dp of replica r % dp,
// sends to r ± dp, and the replicas of a stage average their gradients (DataParallel over the
// stage's group) before the optimizer step.
#include <functional>
#include <vector>

#include <torch/nn/modules/container/sequential.h>

#include "engine/accelerate/options.hpp"
#include "engine/accelerate/trace.hpp"
#include "engine/comm/communicator.hpp"

namespace stratagem::accelerate {

class ModelMeasurer;

class DataParallel;

using LossFn = std::function<at::Tensor(const at::Tensor& output, const at::Tensor& target)>;

class Pipeline {
 public:
  /// Splits `model` into options.pipeline_stages stages over the communicator's processes
  /// (SpecError when there are more stages than layers, or the processes are not a multiple
  /// of the stages) and frees the parameters of the other stages.
  Pipeline(torch::nn::Sequential model, comm::Communicator& comm, Tracer& tracer,
           const AcceleratorOptions& options, c10::Device device);

  int stage() const { return stage_; }
  int stages() const { return stages_; }
  int replicas() const { return dp_; }
  int replica() const { return replica_; }
  /// The processes holding this stage, one per replica: the data-parallel group.
  comm::GroupSpec stage_group() const;
  /// This process's layers [begin, end) of the Sequential, as a Sequential sharing them.
  torch::nn::Sequential& stage_module() { return stage_module_; }
  std::pair<int, int> layers() const { return {begin_, end_}; }

  /// Forward and backward of every micro-batch of (data, target); gradients accumulate into
  /// `dp`'s buffers, multiplied by `loss_scale` (fp16: the last stage scales its loss before
  /// backward). Returns the batch's mean loss (unscaled), on every process.
  double run(const at::Tensor& data, const at::Tensor& target, const LossFn& loss_fn,
             DataParallel& dp, double loss_scale = 1.0);

  /// Measure the stage's forward of micro-batch 0 (export_scenario) on the first two steps.
  void set_measurer(ModelMeasurer* measurer, double element_bytes) {
    measurer_ = measurer;
    element_bytes_ = element_bytes;
  }

 private:
  void forward(int mb, int micro_batches, const std::vector<at::Tensor>& data,
               const std::vector<at::Tensor>& target, const LossFn& loss_fn);
  void backward(int mb);
  std::uint32_t tag(int mb, int kind) const;

  torch::nn::Sequential model_, stage_module_;
  comm::Communicator& comm_;
  Tracer& tracer_;
  const AcceleratorOptions& options_;
  c10::Device device_;
  int stage_ = 0, stages_ = 1, dp_ = 1, replica_ = 0, begin_ = 0, end_ = 0;
  std::int64_t step_ = 0;
  std::vector<at::Tensor> inputs_, outputs_;
  std::vector<comm::WorkPtr> sends_;
  std::vector<at::Tensor> keep_;  ///< tensors being sent
  double loss_sum_ = 0;
  double loss_scale_ = 1.0;
  ModelMeasurer* measurer_ = nullptr;
  double element_bytes_ = 4;
};

}  // namespace stratagem::accelerate
