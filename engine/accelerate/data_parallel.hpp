#pragma once
// The model states of a prepared model under one data-parallel strategy, and the work around
// a user's backward and optimizer step:
//  - DDP (Sharding::none): gradients live in flat buckets (the parameters' .grad are views),
//    filled in reverse parameter order up to bucket_mb; each bucket's all-reduce starts from
//    an autograd hook as soon as its last gradient is accumulated, overlapping the rest of
//    the backward. The user's own optimizer steps on the averaged gradients.
//  - ZeRO-1: the same resident gradients, reduce-scattered per bucket; each rank steps an
//    optimizer of the user's type and options over its shard, then all-gathers the buckets.
//  - ZeRO-2: gradients are staged per bucket only for one backward and freed once
//    reduce-scattered; only the gradient shard stays.
//  - FSDP (FULL_SHARD, SHARD_GRAD_OP): one flat group per unit of the wrap policy, staged
//    gradients reduce-scattered per unit, optimizer on shards. FULL_SHARD frees a unit's
//    gathered parameters as soon as its gradients are done in backward, SHARD_GRAD_OP after
//    the backward; both gather them again after the optimizer step (LibTorch modules have no
//    forward pre-hooks, so the gather for the next forward is issued there). FULL_SHARD units
//    that are elements of a torch::nn::Sequential (anywhere in the model) are also freed
//    during the forward: their Sequential entry is replaced by a wrapper that gathers the unit
//    if needed, runs it, frees it, and hooks its output so the unit is gathered again just
//    before its backward — PyTorch FSDP's pre-forward / post-forward / pre-backward.
// Every shard update equals the matching slice of the full update: the optimizers are
// element-wise, and the padding stays zero.
#include <array>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include "engine/accelerate/flat_group.hpp"
#include "engine/accelerate/options.hpp"
#include "engine/accelerate/trace.hpp"
#include "engine/accelerate/work_watcher.hpp"

namespace stratagem::accelerate {

class DataParallel {
 public:
  /// Data parallelism over `group` of `comm` (empty: every process), e.g. one pipeline
  /// stage's replicas.
  DataParallel(torch::nn::Module& model, std::shared_ptr<torch::optim::Optimizer> user_optimizer,
               comm::Communicator& comm, Tracer& tracer, const AcceleratorOptions& options,
               c10::Device device, comm::GroupSpec group = {});
  /// The model may be gone by then (declared after the Accelerator): touches only itself.
  ~DataParallel();
  /// free_memory(): hands the model back as it was given (FSDP's Sequential entries
  /// unwrapped, gradient hooks inert); the object is destroyed next.
  void release();
  /// Collective (FSDP): gathers the units a FULL_SHARD forward left freed (they stay
  /// gathered until their next forward).
  void gather_units();

  /// Before loss.backward(): `sync` is false on accumulation micro-steps (no communication).
  void before_backward(bool sync);
  /// After loss.backward(): on a sync step, launches what the hooks did not, waits for every
  /// collective and averages, so the optimizer reads the global mean gradient.
  void after_backward();
  /// fp16: whether any rank's gradients hold an inf or nan (collective).
  bool found_inf();
  /// Multiplies the gradients the optimizer will read by `factor` (1 / loss scale).
  void scale_grads(double factor);
  /// Gradient clipping (gradients.cpp), over the gradients the optimizer will read: this
  /// rank's share of sum |g|^p — its shard, or under DDP the full gradients / group size, so
  /// that the sum over the group is the model's — or, for p = inf, its max |g|.
  double grad_norm_part(double p) const;
  /// Clamps those gradients to [-value, value] (element-wise, so shards clamp alone).
  void clamp_grads(double value);
  /// A gradient hook fired outside before_backward / after_backward: someone ran a plain
  /// loss.backward() on the prepared model. Reading it clears it.
  bool take_stray_backward();
  /// The optimizer step (user's or sharded) and, for sharded strategies, the all-gather.
  void step();
  /// After a skipped step: FSDP gathers the parameters back for the next forward.
  void skip_step();
  void zero_grad();

  /// The optimizer whose state is this rank's: the user's (DDP) or the one over shards.
  torch::optim::Optimizer& stepping_optimizer();
  /// Model states this rank saves and loads: full parameters (DDP) or shards, and buffers.
  std::vector<std::pair<std::string, at::Tensor>> state_tensors();
  /// After load: all-gathers the loaded shards into the parameters.
  void after_load();
  /// Bytes per tensor class now (params, grads, optimizer, gathered_params, comm_buckets).
  std::array<double, plan::kTensorClassCount> memory() const;
  const std::vector<FlatGroup>& groups() const { return groups_; }
  /// FULL_SHARD units in a Sequential (the forward wrapper's calls).
  void gather_unit(std::size_t g);
  void after_unit_forward(std::size_t g, const at::Tensor& output);
  bool sharded() const { return sharded_; }
  /// FSDP (FULL_SHARD / SHARD_GRAD_OP): groups() are the wrap policy's units.
  bool fsdp() const { return fsdp_; }

 private:
  void build_buckets(torch::nn::Module& model);
  void build_units(torch::nn::Module& model);
  void wrap_sequential_units(torch::nn::Module& model);
  void on_grad(std::size_t g, std::size_t i);
  void launch(std::size_t g);
  void gather_all();
  int param_group_of(const at::Tensor& p) const;

  torch::nn::Module& model_;
  std::shared_ptr<torch::optim::Optimizer> user_;
  std::unique_ptr<torch::optim::Optimizer> inner_;  ///< sharded strategies
  comm::Communicator& comm_;
  comm::GroupSpec group_;
  Tracer& tracer_;
  const AcceleratorOptions& options_;
  c10::Device device_;
  scenario::Sharding sharding_;
  bool sharded_ = false, staged_ = false, fsdp_ = false;
  int world_ = 1, rank_ = 0;
  std::vector<FlatGroup> groups_;
  std::vector<std::shared_ptr<void>> hooks_;  ///< keep the grad accumulators alive
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  ///< false once destroyed
  bool sync_ = true;
  bool in_backward_ = false, stray_backward_ = false;
  std::unique_ptr<WorkWatcher> watcher_;
};

/// An optimizer of `like`'s type (Adam, AdamW, SGD, RMSprop, Adagrad) with its options, over
/// `groups` (each with its options). SpecError for other types.
std::unique_ptr<torch::optim::Optimizer> make_optimizer_like(
    const torch::optim::Optimizer& like, std::vector<torch::optim::OptimizerParamGroup> groups);

}  // namespace stratagem::accelerate
