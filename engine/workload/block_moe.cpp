// The MLP half of a mixture-of-experts block (block_graphs.hpp), as the stacks write it:
//   megatron, megatron-legacy  Megatron-Core's MoELayer (megatron/core/transformer/moe/):
//       a TENorm of its own, TopKRouter (router.py: gate GEMM, softmax or sigmoid in fp32,
//       top-k, routing map, load-balancing loss), MoEAlltoAllTokenDispatcher (token_dispatcher.py:
//       TE's fused moe_permute, the dispatch, sort_chunks_by_idxs of the received rows when a
//       rank holds several experts, the reverse for the combine, moe_unpermute), TEGroupedMLP
//       (experts.py: grouped fc1, the routing probabilities applied in the fused weighted
//       SwiGLU, grouped fc2) and SharedExpertMLP (shared_experts.py);
//   pytorch  torchtitan's MoE (torchtitan/models/moe.py): TokenChoiceTopKRouter, the routed
//       copies gathered by sorted indices, GroupedExperts' torch._grouped_mm for w1, w3, w2 with
//       silu and mul between, the outputs scaled by the routing scores and scatter-added back,
//       the shared experts a FeedForward.
// Each grouped GEMM is one launch of `local` experts' products, each `rows` tall: the cost
// model runs the shape at its own (small-M) efficiency.
#include "engine/workload/block_graphs.hpp"

namespace stratagem::workload {

int BlockGraphs::expert_mlp_forward(const std::string& name, int in, double rows, double f,
                                    double count, int probs) {
  const Shape& x = x_;
  const double e = x.e, el = count * rows * f;
  const bool weighted = probs >= 0;
  const int act = t(f_, el, e);
  if (x.swiglu && eager()) {
    const int a = linear(name + " w1", in, rows, f, x.h, false, count);
    const int b = linear(name + " w3", in, rows, f, x.h, false, count);
    const int s = t(f_, el, e);
    f_.op(name + " silu", {a}, {s});
    f_.op(name + " mul", {s, b}, {act});
    save(f_, s);
    f_.keep(a);
    f_.keep(b);
  } else {
    const int a = linear(name + " linear_fc1", in, rows, (x.swiglu ? 2 : 1) * f, x.h, false, count);
    f_.keep(a);
    std::vector<int> ins = {a};
    if (weighted && !eager()) ins.push_back(probs);
    f_.op(name + (x.swiglu ? (weighted && !eager() ? " weighted swiglu (fused)" : " swiglu (fused)")
                           : " gelu"),
          ins, {act});
  }
  save(f_, act);
  if (compile_) f_.keep(act);  // the wgrad GEMM of the last linear reads it
  int out = linear(name + (eager() ? " w2" : " linear_fc2"), act, rows, x.h, f, false, count);
  if (weighted && eager()) {
    // torchtitan multiplies the experts' outputs by the routing scores (kept for their grad).
    f_.keep(out);
    const int scaled = t(f_, count * rows * x.h, e);
    f_.op(name + " scale by routing scores", {out, probs}, {scaled});
    out = scaled;
  }
  return out;
}

int BlockGraphs::expert_mlp_backward(const std::string& name, int dy, double rows, double f,
                                     double count, bool weighted) {
  const Shape& x = x_;
  const double e = x.e, el = count * rows * f;
  const double saved_in = x.fp8 ? (megatron() ? 1.0 : e) : e;
  int g = dy;
  if (weighted && eager()) {
    const int out = t(b_, count * rows * x.h, e), probs = t(b_, count * rows, 4);
    const int dprobs = t(b_, count * rows, 4);
    g = t(b_, count * rows * x.h, e);
    b_.op(name + " scale by routing scores backward", {dy, probs}, {g});
    b_.op(name + " routing scores grad", {dy, out}, {dprobs});
  }
  const int dact =
      linear_backward(name + (eager() ? " w2" : " linear_fc2"), g, rows, x.h, f, saved_in, count);
  if (x.swiglu && eager()) {
    const int a = t(b_, el, e), b = t(b_, el, e);
    const int s = t(b_, el, e);
    if (compile_) b_.op(name + " recompute silu", {a}, {s});
    const int ds = t(b_, el, e), db = t(b_, el, e), da = t(b_, el, e);
    b_.op(name + " mul backward (grad·w3 out)", {dact, b}, {ds});
    b_.op(name + " mul backward (grad·silu)", {dact, s}, {db});
    b_.op(name + " silu backward", {ds, a}, {da});
    const int d1 = linear_backward(name + " w1", da, rows, f, x.h, saved_in, count);
    const int d3 = linear_backward(name + " w3", db, rows, f, x.h, saved_in, count);
    return accumulate(name + " accumulate grad (w1, w3)", d1, d3, count * rows * x.h, e);
  }
  const double width = (x.swiglu ? 2 : 1) * f;
  const int fc1 = t(b_, count * rows * width, e), dfc1 = t(b_, count * rows * width, e);
  std::vector<int> outs = {dfc1};
  if (weighted && !eager()) outs.push_back(t(b_, count * rows, 4));  // the probabilities' grad
  b_.op(name + (x.swiglu ? " swiglu backward (fused)" : " gelu backward"), {dact, fc1}, outs);
  return linear_backward(name + (eager() ? " w1" : " linear_fc1"), dfc1, rows, width, x.h, saved_in,
                         count);
}

int BlockGraphs::moe_forward(int h1) {
  const Shape& x = x_;
  const MoeShape& m = x.moe;
  const double e = x.e, n = x.nr, h = x.h;
  const double rows = m.local * m.rows;             // the rank's expert rows, all local experts
  const DType rdt = x.fp8 ? DType::bf16 : x.dtype;  // the router stays in 16 bits under fp8
  f_.part(kMoePrePart);
  const int hn = norm_forward(megatron() ? "pre_mlp_layernorm" : "ffn_norm", h1, false);
  f_.keep(hn);  // the router's, the shared experts' and the permutation's input
  // --- router: gate GEMM, scores in fp32, top-k
  const int gate = f_.tensor(m.experts * h, e, true);
  const int logits = t(f_, n * m.experts, e);
  f_.gemm(megatron() ? "router" : "gate", n, m.experts, h, rdt, hn, gate, logits);
  const int scores = t(f_, n * m.experts, 4);
  f_.op(m.sigmoid ? "router sigmoid (fp32)" : "router softmax (fp32)", {logits}, {scores});
  f_.keep(scores);
  int select = scores;
  if (m.sigmoid) {
    select = t(f_, n * m.experts, 4);
    f_.op("router add expert bias", {scores}, {select});
  }
  const int top = t(f_, n * m.top_k, 4), index = t(f_, n * m.top_k, 8);
  f_.op("router top-k", {select}, {top, index});
  const int probs = t(f_, n * m.top_k, 4);
  f_.op("router normalize top-k", {top}, {probs});
  f_.keep(index);
  int xp = -1;
  if (eager()) {
    const int order = t(f_, m.routed, 8);
    f_.op("tokens per expert (histc)", {index}, {t(f_, m.experts, 4)});
    f_.op("argsort routed copies", {index}, {order});
    f_.keep(order);
    xp = t(f_, m.routed * h, e);
    f_.op("gather routed copies", {hn, order}, {xp});
  } else {
    const int map = t(f_, n * m.experts, 1);
    f_.op("routing map", {index}, {map});
    if (!m.sigmoid) f_.op("load-balancing loss", {scores, map}, {t(f_, 1, 4)});
    xp = t(f_, m.routed * h, e);
    f_.op("permute (TE moe_permute)", {hn, map}, {xp, t(f_, m.routed, 4)});
  }
  // --- the plan's dispatch moves the copies to their experts' ranks: fresh tensors here
  int xin = m.dispatched ? t(f_, rows * h, e) : xp;
  int pin = t(f_, rows, 4);
  if (m.dispatched && m.local > 1) {
    const int sorted = t(f_, rows * h, e), psorted = t(f_, rows, 4);
    f_.op("sort received rows by expert", {xin, pin}, {sorted, psorted});
    xin = sorted;
    pin = psorted;
  }
  f_.keep(xin);
  f_.keep(pin);
  f_.part(kSharedPart);
  int shared = -1;
  if (m.shared_f > 0) shared = expert_mlp_forward("shared_experts", hn, n, m.shared_f, 1, -1);
  f_.part(kExpertsPart);
  int z = expert_mlp_forward("experts", xin, m.rows, m.f, m.local, pin);
  if (m.dispatched && m.local > 1) {
    const int back = t(f_, rows * h, e);
    f_.op("unsort expert outputs", {z}, {back});
    z = back;
  }
  // --- the plan's combine brings each token's copies home
  f_.part(kMoePostPart);
  const int combined = m.dispatched ? t(f_, m.routed * h, e) : z;
  int y = t(f_, n * h, e);
  f_.op(eager() ? "scatter-add routed copies" : "unpermute (TE moe_unpermute)", {combined}, {y});
  if (shared >= 0) {
    const int sum = t(f_, n * h, e);
    f_.op("add shared experts", {y, shared}, {sum});
    y = sum;
  }
  const int out = t(f_, n * h, e);
  f_.op(eager() ? "residual add" : "bias-dropout-add", {h1, y}, {out});
  f_.keep(out);
  return out;
}

int BlockGraphs::moe_backward(int gout) {
  const Shape& x = x_;
  const MoeShape& m = x.moe;
  const double e = x.e, n = x.nr, h = x.h;
  const double rows = m.local * m.rows;
  const DType rdt = x.fp8 ? DType::bf16 : x.dtype;
  b_.part(kMoePostPart);
  const int dcombined = t(b_, m.routed * h, e);
  b_.op(eager() ? "scatter-add backward (gather)" : "unpermute backward (TE moe_unpermute)", {gout},
        {dcombined});
  // --- the plan's combine backward sends the copies' gradients to the experts' ranks
  b_.part(kExpertsPart);
  int dz = m.dispatched ? t(b_, rows * h, e) : dcombined;
  if (m.dispatched && m.local > 1) {
    const int sorted = t(b_, rows * h, e);
    b_.op("sort output grads by expert", {dz}, {sorted});
    dz = sorted;
  }
  int dxin = expert_mlp_backward("experts", dz, m.rows, m.f, m.local, true);
  if (m.dispatched && m.local > 1) {
    const int back = t(b_, rows * h, e);
    b_.op("unsort input grads", {dxin}, {back});
    dxin = back;
  }
  b_.part(kSharedPart);
  int dshared = -1;
  if (m.shared_f > 0)
    dshared = expert_mlp_backward("shared_experts", gout, n, m.shared_f, 1, false);
  // --- the plan's dispatch backward returns the copies' gradients
  b_.part(kMoePrePart);
  const int dxp = m.dispatched ? t(b_, m.routed * h, e) : dxin;
  const int dperm = t(b_, n * h, e);
  b_.op(eager() ? "gather backward (scatter-add)" : "permute backward (TE moe_unpermute)", {dxp},
        {dperm});
  // The routing probabilities' gradient back through top-k and the score function.
  const int dtop = t(b_, n * m.top_k, 4), dscores = t(b_, n * m.experts, 4);
  b_.op("router top-k backward (scatter)", {dtop}, {dscores});
  const int scores = t(b_, n * m.experts, 4), dlogits = t(b_, n * m.experts, e);
  b_.op(m.sigmoid ? "router sigmoid backward" : "router softmax backward", {dscores, scores},
        {dlogits});
  const int gate = b_.tensor(m.experts * h, e, true), hn = t(b_, n * h, e);
  const int drouter = t(b_, n * h, e);
  b_.gemm(megatron() ? "router dgrad" : "gate dgrad", n, h, m.experts, rdt, dlogits, gate, drouter);
  b_.gemm(megatron() ? "router wgrad" : "gate wgrad", m.experts, h, n, rdt, dlogits, hn,
          t(b_, m.experts * h, megatron() ? 8.0 : e));
  b_.weight_gradient();
  int dhn = accumulate("accumulate grad (router, experts)", dperm, drouter, n * h, e);
  if (dshared >= 0) dhn = accumulate("accumulate grad (shared experts)", dhn, dshared, n * h, e);
  const int dh1n = norm_backward(megatron() ? "pre_mlp_layernorm" : "ffn_norm", dhn);
  return accumulate("accumulate grad (residual)", gout, dh1n, n * h, e);
}

}  // namespace stratagem::workload
