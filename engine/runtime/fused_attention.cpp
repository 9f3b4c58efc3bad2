#include "engine/runtime/fused_attention.hpp"

#include <limits>

#include <ATen/ATen.h>
#include <torch/autograd.h>

namespace stratagem::runtime {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

at::Tensor masked_scores(const at::Tensor& q, const at::Tensor& k, const at::Tensor& masked,
                         double scale) {
  auto scores = at::matmul(q.to(at::kFloat), k.to(at::kFloat).transpose(-2, -1)) * scale;
  return scores.masked_fill(masked, -std::numeric_limits<double>::infinity());
}

struct FusedAttention : torch::autograd::Function<FusedAttention> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v, const at::Tensor& masked, double scale) {
    const auto scores = masked_scores(q, k, masked, scale);
    const auto lse = at::logsumexp(scores, -1, /*keepdim=*/true);  // fp32, [b, a, s, 1]
    auto out = at::matmul(at::exp(scores - lse), v.to(at::kFloat)).to(v.scalar_type());
    ctx->save_for_backward({q, k, v, out, lse});
    ctx->saved_data["masked"] = masked;
    ctx->saved_data["scale"] = scale;
    return out;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3],
                     &lse = saved[4];
    const at::Tensor masked = ctx->saved_data["masked"].toTensor();
    const double scale = ctx->saved_data["scale"].toDouble();
    const at::Tensor d_out = grads[0].to(at::kFloat);
    const auto p = at::exp(masked_scores(q, k, masked, scale) - lse);
    const auto dv = at::matmul(p.transpose(-2, -1), d_out);
    const auto dp = at::matmul(d_out, v.to(at::kFloat).transpose(-2, -1));
    const auto d = (d_out * out.to(at::kFloat)).sum(-1, /*keepdim=*/true);
    const auto ds = p * (dp - d);
    const auto dq = at::matmul(ds, k.to(at::kFloat)) * scale;
    const auto dk = at::matmul(ds.transpose(-2, -1), q.to(at::kFloat)) * scale;
    return {dq.to(q.scalar_type()), dk.to(k.scalar_type()), dv.to(v.scalar_type()), at::Tensor(),
            at::Tensor()};
  }
};

}  // namespace

at::Tensor fused_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           const at::Tensor& masked, double scale) {
  return FusedAttention::apply(q, k, v, masked, scale);
}

}  // namespace stratagem::runtime
