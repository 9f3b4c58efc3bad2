#pragma once
// Tensor parallelism for users' own modules, as PyTorch's parallelize_module with
// ColwiseParallel / RowwiseParallel and Megatron-LM's ColumnParallelLinear /
// RowParallelLinear. A ParallelLinear is a drop-in for torch::nn::Linear (same options, same
// parameters, same forward) until the Accelerator shards it by the plan it was given
// (AcceleratorOptions::tp_plan: module path → style):
//   colwise  keeps output rows [r·out/tp, (r+1)·out/tp) of the weight and bias; the input is
//            replicated, the output is the rank's slice of the features (Shard(-1), as
//            ColwiseParallel's local output); backward all-reduces the input's gradient over
//            the TP group (Megatron's f)
//   rowwise  keeps input columns [r·in/tp, (r+1)·in/tp); the input is the rank's slice of the
//            features (a colwise layer's output), the partial products are all-reduced and
//            the whole bias added after (Megatron's g; backward: identity)
// A colwise layer followed, through element-wise work, by a rowwise one (an MLP's in and
// out, attention's QKV and projection with the heads split) computes exactly the
// unsharded model. LibTorch modules have no forward hooks, so the layers to shard must be
// ParallelLinear (parallelize_module refuses a plain torch::nn::Linear naming its path).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "engine/comm/communicator.hpp"

namespace stratagem::accelerate {

enum class TpStyle { colwise, rowwise };

/// Module paths as named_modules() spells them ("blocks.0.mlp.fc_in") and their style.
using TpPlan = std::vector<std::pair<std::string, TpStyle>>;

/// The TP group a sharded layer communicates over: its members and this rank's position.
struct TpGroup {
  comm::Communicator* comm = nullptr;
  comm::GroupSpec group;
  int size = 1;
  int index = 0;
};

class ParallelLinearImpl : public torch::nn::Cloneable<ParallelLinearImpl> {
 public:
  ParallelLinearImpl(std::int64_t in_features, std::int64_t out_features)
      : ParallelLinearImpl(torch::nn::LinearOptions(in_features, out_features)) {}
  explicit ParallelLinearImpl(const torch::nn::LinearOptions& options);
  /// As torch::nn::Linear (Kaiming-uniform weight, uniform bias); unshards.
  void reset() override;
  void reset_parameters();
  torch::Tensor forward(const torch::Tensor& input);
  void pretty_print(std::ostream& stream) const override;

  /// Keeps this rank's slice of the weight and bias (set_data: the optimizer's handles stay
  /// valid). Throws SpecError naming `path` when tp does not divide the split dimension.
  void shard(TpStyle style, const TpGroup& group, const std::string& path);
  bool sharded() const { return sharded_; }
  TpStyle style() const { return style_; }
  /// The whole weight and bias (an all-gather over the TP group when sharded; collective).
  std::vector<std::pair<std::string, torch::Tensor>> full_parameters() const;

  torch::nn::LinearOptions options;
  torch::Tensor weight, bias;

 private:
  bool sharded_ = false;
  TpStyle style_ = TpStyle::colwise;
  TpGroup group_;
};
TORCH_MODULE(ParallelLinear);

/// Shards every module `plan` names (ParallelLinear only). One SpecError (path "tp_plan")
/// naming the entry for a path that names no module, a module that is not a ParallelLinear,
/// or a dimension tp does not divide.
void parallelize_module(torch::nn::Module& model, const TpPlan& plan, const TpGroup& group);

}  // namespace stratagem::accelerate
