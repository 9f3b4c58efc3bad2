#pragma once
// The model states one rank holds while executing its plan: parameters (full or a shard),
// gradients (full, or a shard plus staged unsharded gradients), the optimizer's states and
// fp32 master weights in the opt space, gathered parameters of sharded units, and the fp16
// loss-scale tensors. The layout comes from executor_layout.hpp; initial values from the
// model's deterministic per-unit initialisation, so every strategy starts from the same
// weights. The optimizer (AdamW, Adam, SGD with momentum) follows torch.optim's update
// formulas element-wise, so a shard's update equals the matching slice of a full update.
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <ATen/Tensor.h>

#include "engine/plan/plan.hpp"
#include "engine/runtime/executor_layout.hpp"
#include "engine/runtime/model_units.hpp"

namespace stratagem::runtime {

struct OptimizerConfig {
  scenario::Optimizer kind = scenario::Optimizer::adamw;
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
  double momentum = 0.9;  ///< SGD
  /// torch.optim's defaults for `kind` (AdamW weight decay 0.01, Adam 0, SGD momentum 0.9),
  /// with learning rate `lr`.
  static OptimizerConfig defaults(scenario::Optimizer kind, double lr);
};

class ModelState {
 public:
  ModelState(const plan::StepPlan& plan, int rank, const GptUnits& units, std::uint64_t seed,
             const OptimizerConfig& optimizer, c10::Device device);

  const RankLayout& layout() const { return layout_; }
  int segment_index(int unit) const { return layout_.segment_of_unit[unit]; }

  // ---- parameters ---------------------------------------------------------------------
  /// Unit `unit`'s full flat parameters: a view of the resident buffer, or of its gathered
  /// copy when parameters are sharded (RuntimeError if not gathered now).
  at::Tensor unit_params(int unit) const;
  /// The rank's shard of a segment's parameters (what a parameter all-gather sends).
  at::Tensor params_shard(int segment) const;
  /// The segment's full parameters in the resident buffer (unsharded parameters only).
  at::Tensor params_full(int segment) const;
  /// A fresh buffer a parameter all-gather of `segment` writes into.
  at::Tensor new_gather_buffer(int segment) const;
  /// Makes a completed gather the segment's gathered parameters; counts one holder.
  void hold_gathered(int segment, at::Tensor gathered);
  /// Drops one holder; the gathered copy is freed when none is left. Views taken earlier
  /// (saved by autograd) see the data of the next gather, as FSDP's resized storage does.
  void release_gathered(int segment);
  bool gathered(int segment) const { return holders_[segment] > 0; }

  // ---- gradients ----------------------------------------------------------------------
  void zero_grads();
  /// Adds `grad` (flat, `grad.numel()` elements) at element `offset` of unit `unit`'s
  /// gradient: into the staged buffer of its segment when gradients are staged, else into
  /// the resident full gradients.
  void add_grad(int unit, std::int64_t offset, const at::Tensor& grad);
  /// Staged gradients of a segment, handed to its reduce-scatter (zeros if none staged).
  at::Tensor take_staged(int segment);
  /// The segment's resident full gradients (DDP all-reduce, ZeRO-1 reduce-scatter input).
  at::Tensor grads_full(int segment) const;
  at::Tensor new_shard_buffer(int segment) const;
  /// A reduce-scattered shard: accumulated into the resident gradient shard (staged
  /// gradients) or written over the rank's slice of the full gradients (ZeRO-1).
  void apply_reduced_shard(int segment, const at::Tensor& shard);
  /// The resident gradient of a parameter slot of `unit` (full gradients only).
  at::Tensor slot_grad(int unit, const std::string& slot) const;
  /// The parts of the slots' gradients this rank holds — all of each with full gradients,
  /// the part inside its shard when staged — each with its offset into the slots laid end
  /// to end (the sequence-parallel gradient sync's buffer).
  std::vector<std::pair<at::Tensor, std::int64_t>> resident_slot_grads(
      const std::vector<std::pair<int, const ParamSlot*>>& slots) const;

  // ---- fp16 and the optimizer ------------------------------------------------------------
  /// Sets found_inf() to 1 when the gradients the optimizer will read hold an inf or nan.
  void check_overflow();
  at::Tensor found_inf() const { return found_inf_; }
  at::Tensor scale_tensor() const { return scale_; }
  bool overflow() const;
  /// Fault injection for tests: an inf in the first gradient the optimizer reads.
  void inject_inf();
  /// One optimizer step on the opt space with gradients multiplied by `grad_factor`
  /// (1 / loss scale); writes the updated parameters back to their compute dtype.
  void optimizer_step(double grad_factor);
  std::int64_t optimizer_steps() const { return step_count_; }

  // ---- accounting and checkpoints -----------------------------------------------------
  /// Resident bytes per tensor class (what RankInfo::initial predicts) on the device.
  std::array<double, plan::kTensorClassCount> resident_bytes() const;
  double host_bytes() const { return host_bytes_; }
  double gathered_bytes() const;
  double staged_bytes() const;
  /// Everything a checkpoint of this rank must hold, by name.
  std::vector<std::pair<std::string, at::Tensor>> state_tensors();
  void set_optimizer_steps(std::int64_t n) { step_count_ = n; }

 private:
  at::Tensor opt_view(const at::Tensor& t, const Segment& seg) const;
  at::Tensor opt_params(const Segment& seg) const;
  at::Tensor opt_grads(const Segment& seg) const;

  RankLayout layout_;
  const GptUnits& units_;
  OptimizerConfig opt_;
  c10::Device device_;
  c10::Device opt_device_;
  at::ScalarType dtype_;
  bool master_ = false;
  double host_bytes_ = 0;
  at::Tensor params_full_, params_shard_;  ///< one of them, per layout_.params_sharded
  at::Tensor grads_full_, grads_shard_;    ///< one of them, per layout_.grads_staged
  at::Tensor master_weights_;              ///< fp32, opt space
  at::Tensor exp_avg_, exp_avg_sq_;        ///< Adam (opt space); SGD keeps exp_avg_ as momentum
  std::int64_t step_count_ = 0;
  std::vector<at::Tensor> gathered_;  ///< per segment; storage empty when not gathered
  std::vector<int> holders_;
  std::vector<at::Tensor> staged_;  ///< per segment; undefined when nothing staged
  at::Tensor found_inf_, scale_;
};

}  // namespace stratagem::runtime
