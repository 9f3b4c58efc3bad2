// DataParallel's gradient clipping support (Accelerator::clip_grad_norm_ / clip_grad_value_):
// the gradients the optimizer reads are the full averaged ones (DDP) or this rank's shard of
// them (ZeRO, FSDP), flat and zero-padded, so a norm is a sum over flat buffers.
#include <algorithm>
#include <cmath>
#include <limits>

#include <ATen/ATen.h>

#include "engine/accelerate/data_parallel.hpp"

namespace stratagem::accelerate {

double DataParallel::grad_norm_part(double p) const {
  const bool inf_norm = std::isinf(p);
  double total = 0;
  for (const auto& G : groups_) {
    const at::Tensor& g = sharded_ ? G.grad_shard : G.grad;
    if (!g.defined() || g.numel() == 0) continue;
    const at::Tensor a = g.detach().to(at::kDouble).abs();
    if (inf_norm) {
      total = std::max(total, a.max().item<double>());
    } else {
      total += a.pow(p).sum().item<double>();
    }
  }
  // Under DDP every rank of the group holds the same full gradients: each contributes its
  // share, so a sum over the group counts them once.
  if (!sharded_ && !inf_norm) total /= world_;
  return total;
}

void DataParallel::clamp_grads(double value) {
  at::NoGradGuard no_grad;
  for (auto& G : groups_) {
    at::Tensor& g = sharded_ ? G.grad_shard : G.grad;
    if (g.defined()) g.clamp_(-value, value);
  }
}

bool DataParallel::take_stray_backward() {
  const bool stray = stray_backward_;
  stray_backward_ = false;
  return stray;
}

}  // namespace stratagem::accelerate
