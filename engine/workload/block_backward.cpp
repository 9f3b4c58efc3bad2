// One block's backward graph per stack: autograd's formulas for eager ops, the frameworks' own
// backward kernels for fused ones (block_graphs.hpp).
#include "engine/workload/block_graphs.hpp"

#include "engine/workload/units.hpp"

namespace stratagem::workload {

int BlockGraphs::linear_backward(const std::string& name, int dy, double rows, double n, double k,
                                 double in_bytes_saved, double count) {
  using scenario::Fp8Recipe;
  int g = dy, g_wgrad = dy;
  if (x_.fp8) {
    const Quantized q = quantize(b_, name + " output grad", dy, count * rows * n, false);
    g = q.first;
    g_wgrad = q.second >= 0 ? q.second : q.first;
  }
  const int w = b_.tensor(count * k * n, x_.fp8 ? 1.0 : x_.e, true);
  const int dx_raw = t(b_, count * rows * k, x_.e);
  b_.gemm(name + " dgrad", rows, k, n, x_.dtype, g, w, dx_raw, count);
  const int dx = rescale(name + " dgrad", dx_raw, count * rows * k, x_.e);
  int xin = t(b_, count * rows * k, in_bytes_saved);
  if (x_.fp8 && eager() && x_.recipe != Fp8Recipe::tensorwise) {
    // torchao casts the kept bf16 input (rowwise: its transpose) for the wgrad GEMM.
    const int cast = t(b_, count * rows * k,
                       x_.recipe == Fp8Recipe::mxfp8 ? scenario::kBlockScaledFp8Bytes : 1.0);
    b_.op(name + (x_.recipe == Fp8Recipe::mxfp8 ? " input: cast dim1 to mxfp8"
                                                : " input: cast transpose to fp8 rowwise"),
          {xin}, {cast});
    xin = cast;
  }
  const double dw_bytes = megatron() ? 8.0 : x_.e;
  const int dw_raw = t(b_, count * k * n, dw_bytes);
  b_.gemm(name + " wgrad", n, k, rows, x_.dtype, g_wgrad, xin, dw_raw, count);
  b_.weight_gradient();
  rescale(name + " wgrad", dw_raw, count * k * n, dw_bytes);
  return dx;
}

int BlockGraphs::rescale(const std::string& name, int raw, double elements, double bytes) {
  if (!x_.fp8 || x_.recipe != scenario::Fp8Recipe::rowwise) return raw;
  const int out = t(b_, elements, bytes);
  b_.op(name + ": rescale (rowwise scales)", {raw}, {out});
  return out;
}

int BlockGraphs::accumulate(const std::string& name, int a, int b, double elements, double bytes) {
  const int out = t(b_, elements, bytes);
  b_.op(name, {a, b}, {out});
  return out;
}

int BlockGraphs::norm_backward(const std::string& name, int g, double rows_in, double width) {
  const double rows = rows_in < 0 ? x_.nr : rows_in, h = width < 0 ? x_.h : width, e = x_.e;
  const int x = t(b_, rows * h, e), rstd = t(b_, rows, 4), w = b_.tensor(h, e, true);
  const int dx = t(b_, rows * h, e), dw = t(b_, h, 4);
  if (!eager() || !x_.rms) {
    b_.op(name + " backward", {g, x, rstd, w}, {dx, dw});
    if (!megatron()) {
      const int dw2 = t(b_, h, 4);
      b_.op(name + " backward: weight grad", {g, x, rstd}, {dw2});
    }
    return dx;
  }
  // Saved by the eager forward: the fp32 input and the cast normalized output; under
  // compile the partitioner recomputes them from x and rstd inside the fused kernel.
  int xf = -1, yb = -1;
  if (compile_) {
    xf = x;
    if (e != 4) {
      xf = t(b_, rows * h, 4);
      b_.op(name + ": recompute to fp32", {x}, {xf});
    }
    const int y = t(b_, rows * h, 4);
    b_.op(name + ": recompute mul rstd", {xf, rstd}, {y});
    yb = y;
    if (e != 4) {
      yb = t(b_, rows * h, e);
      b_.op(name + ": recompute type_as", {y}, {yb});
    }
  } else {
    xf = e != 4 ? t(b_, rows * h, 4) : x;
    yb = e != 4 ? t(b_, rows * h, e) : t(b_, rows * h, 4);
  }
  // out = yb · w
  const int dyb = t(b_, rows * h, e), gy = t(b_, rows * h, e);
  b_.op(name + ": mul backward (grad·w)", {g, w}, {dyb});
  b_.op(name + ": mul backward (grad·normed)", {g, yb}, {gy});
  b_.op(name + ": sum to weight", {gy}, {dw});
  // yb = y.type_as(x)
  int dy = dyb;
  if (e != 4) {
    dy = t(b_, rows * h, 4);
    b_.op(name + ": type_as backward", {dyb}, {dy});
  }
  // y = xf · rstd
  const int dxf1 = t(b_, rows * h, 4), gx = t(b_, rows * h, 4), dr = t(b_, rows, 4);
  b_.op(name + ": mul backward (grad·rstd)", {dy, rstd}, {dxf1});
  b_.op(name + ": mul backward (grad·x)", {dy, xf}, {gx});
  b_.op(name + ": sum over hidden", {gx}, {dr});
  // rstd = rsqrt(mean(p) + eps); mean's backward expands its gradient over the row.
  const int da = t(b_, rows, 4), dp = t(b_, rows * h, 4);
  b_.op(name + ": rsqrt backward", {dr, rstd}, {da});
  b_.op(name + ": mean backward (expand)", {da}, {dp});
  // p = xf² : pow_backward = grad · 2 · xf¹ (xf.pow(1) is a copy, then two multiplies)
  const int x1 = t(b_, rows * h, 4), x2 = t(b_, rows * h, 4), dxf2 = t(b_, rows * h, 4);
  b_.op(name + ": pow backward (pow 1)", {xf}, {x1});
  b_.op(name + ": pow backward (·2)", {x1}, {x2});
  b_.op(name + ": pow backward (·grad)", {dp, x2}, {dxf2});
  const int dxf = accumulate(name + ": accumulate grad", dxf1, dxf2, rows * h, 4);
  if (e == 4) return dxf;
  b_.op(name + ": to fp32 backward", {dxf}, {dx});
  return dx;
}

int BlockGraphs::rope_backward(const std::string& name, int g, double width) {
  const double el = x_.n * width, e = x_.e;
  const int freqs = b_.tensor(x_.seq * x_.d, 4, true);
  if (megatron()) {
    const int out = t(b_, el, e);
    b_.op(name + " backward (TE fused RoPE)", {g, freqs}, {out});
    return out;
  }
  if (legacy()) {
    // out = x·cos + rotate_half(x)·sin: grad·cos and grad·sin; cat's backward slices
    // grad·sin (views), neg's backward negates one half, chunk's backward joins the halves
    // into x's gradient (a cat), which is summed with grad·cos.
    const int gc = t(b_, el, e), gs = t(b_, el, e);
    b_.op(name + ": mul cos backward", {g, freqs}, {gc});
    b_.op(name + ": mul sin backward", {g, freqs}, {gs});
    const int s1 = t(b_, el / 2, e), s2 = t(b_, el / 2, e), gneg = t(b_, el / 2, e);
    b_.op(name + ": neg backward", {s1}, {gneg});
    const int grot = t(b_, el, e);
    b_.op(name + ": chunk backward", {s2, gneg}, {grot});
    return accumulate(name + ": accumulate grad", gc, grot, el, e);
  }
  return complex_rope(
      b_, g, el, freqs,
      {name + ": type_as backward", name + ": complex mul backward", name + ": float backward"});
}

void BlockGraphs::backward() {
  const Shape& x = x_;
  const double e = x.e;
  const double saved_in = x.fp8 ? (megatron() ? 1.0 : e) : e;
  const int gout = t(b_, x.nr * x.h, e);  // the block output's gradient
  const int dh1 = x.moe_block ? moe_backward(gout) : mlp_backward(gout);
  b_.part(kAttentionPart);
  // --- attention
  int gy = dh1;
  if (x.sp) gy = t(b_, x.n * x.h, e);
  int dout = linear_backward(megatron() ? "linear_proj"
                             : eager()  ? "wo"
                                        : "dense",
                             gy, x.n, x.h, x.q, e);
  if (eager() || legacy()) {
    // The output's layout change has no kernel in autograd; the attention backward makes
    // its incoming gradient contiguous (a copy).
    const int c = t(b_, x.n * x.q, e);
    b_.op("attention grad contiguous", {dout}, {c});
    dout = c;
  }
  const double rep = x.kv > 0 ? x.q / x.kv : 1.0;
  const bool repeated = rep > 1 && (eager() || legacy());
  const double kv_read = repeated ? x.q : x.kv;
  int dq = t(b_, x.n * x.q, e), dk = t(b_, x.n * kv_read, e), dv = t(b_, x.n * kv_read, e);
  if (x.flash) {
    Kernel a;
    a.name = megatron() ? "core_attention backward (TE fused attention)"
                        : "scaled_dot_product_attention backward";
    a.flops = kFlashBackwardRatio * 4.0 * x.n * x.seq * x.q * (x.causal ? 0.5 : 1.0);
    a.dtype = x.fp8 ? DType::bf16 : x.dtype;
    a.head_dim = x.d;
    a.seq = x.seq;
    a.causal = x.causal;
    a.backward = true;
    const int q = t(b_, x.n * x.q, e), k = t(b_, x.n * kv_read, e), v = t(b_, x.n * kv_read, e);
    const int o = t(b_, x.n * x.q, e), lse = t(b_, x.n * x.heads, 4);
    b_.attention(a, {dout, q, k, v, o, lse}, {dq, dk, dv});
  } else {
    const double sc = x.n * x.heads * x.seq;
    const DType dt = x.dtype == DType::fp8 ? DType::bf16 : x.dtype;
    const int probs = t(b_, sc, e), v = t(b_, x.n * kv_read, e), q = t(b_, x.n * x.q, e),
              k = t(b_, x.n * kv_read, e);
    const int dprobs = t(b_, sc, e);
    b_.gemm("probs·v dgrad (probs)", x.n * x.heads, x.seq, x.d, dt, dout, v, dprobs);
    b_.gemm("probs·v dgrad (v)", x.seq, x.d, x.n * x.heads, dt, probs, dout, dv);
    const int dscores = t(b_, sc, e);
    if (eager()) {
      const int d32 = t(b_, sc, 4), dsm = t(b_, sc, 4);
      b_.op("softmax to dtype backward", {dprobs}, {d32});
      b_.op("softmax backward", {d32, probs}, {dsm});
      b_.op("scale backward", {dsm}, {dscores});
    } else {
      b_.op("fused scale-mask-softmax backward", {dprobs, probs}, {dscores});
    }
    b_.gemm("q·kᵀ dgrad (q)", x.n * x.heads, x.d, x.seq, dt, dscores, k, dq);
    b_.gemm("q·kᵀ dgrad (k)", x.seq, x.d, x.n * x.heads, dt, dscores, q, dk);
  }
  if (repeated) {
    // repeat_kv's backward: the repeated heads' gradients summed back into each group.
    const int dk1 = t(b_, x.n * x.kv, e), dv1 = t(b_, x.n * x.kv, e);
    b_.op("repeat_kv k backward (sum)", {dk}, {dk1});
    b_.op("repeat_kv v backward (sum)", {dv}, {dv1});
    dk = dk1;
    dv = dv1;
  }
  if (legacy() && x.flash) {
    const int dq2 = t(b_, x.n * x.q, e), dk2 = t(b_, x.n * x.kv, e), dv2 = t(b_, x.n * x.kv, e);
    b_.op("q grad from flash layout", {dq}, {dq2});
    b_.op("k grad from flash layout", {dk}, {dk2});
    b_.op("v grad from flash layout", {dv}, {dv2});
    dq = dq2;
    dk = dk2;
    dv = dv2;
  }
  if (x.rotary) {
    dq = rope_backward("rope q", dq, x.q);
    dk = rope_backward("rope k", dk, x.kv);
  }
  if (x.qk_norm) {
    dq = head_norm_backward(megatron() ? "q_layernorm" : "q_norm", dq, x.q);
    dk = head_norm_backward(megatron() ? "k_layernorm" : "k_norm", dk, x.kv);
  }
  int dxn = -1;
  if (eager()) {
    const int d1 = linear_backward("wq", dq, x.n, x.q, x.h, saved_in);
    const int d2 = linear_backward("wk", dk, x.n, x.kv, x.h, saved_in);
    const int d3 = linear_backward("wv", dv, x.n, x.kv, x.h, saved_in);
    const int d12 = accumulate("accumulate grad (wq, wk)", d1, d2, x.n * x.h, e);
    dxn = accumulate("accumulate grad (wv)", d12, d3, x.n * x.h, e);
  } else {
    // q, k and v gradients land in one tensor: Megatron's split is a view, so the three
    // are written into the fused QKV gradient (Megatron-Core: torch.split's backward, one
    // cat kernel).
    const int dqkv = t(b_, x.n * (x.q + 2 * x.kv), e);
    b_.op("qkv grad cat", {dq, dk, dv}, {dqkv});
    dxn = linear_backward(megatron() ? "linear_qkv" : "query_key_value", dqkv, x.n, x.q + 2 * x.kv,
                          x.h, saved_in);
  }
  if (x.sp) dxn = t(b_, x.nr * x.h, e);
  const int dxn_in = norm_backward(megatron() ? "input_layernorm" : "attention_norm", dxn);
  const int dx = accumulate("accumulate grad (residual)", dh1, dxn_in, x.nr * x.h, e);
  b_.keep(dx);
}

int BlockGraphs::mlp_backward(int gout) {
  const Shape& x = x_;
  const double e = x.e;
  const double saved_in = x.fp8 ? (megatron() ? 1.0 : e) : e;
  // --- MLP (the residual add passes the gradient through unchanged)
  int gz = gout;
  if (x.sp) gz = t(b_, x.n * x.h, e);  // all-gathered by the plan
  const int dact = linear_backward(eager()      ? (x.swiglu ? "w2" : "fc2")
                                   : megatron() ? "linear_fc2"
                                                : "dense_4h_to_h",
                                   gz, x.n, x.h, x.f, saved_in);
  int dhn = -1;
  if (x.swiglu) {
    const int a = t(b_, x.n * x.f, e), b = t(b_, x.n * x.f, e);
    if (eager()) {
      int s = -1;
      if (compile_) {
        s = t(b_, x.n * x.f, e);
        b_.op("recompute silu", {a}, {s});
        const int m = t(b_, x.n * x.f, e);
        b_.op("recompute mul", {s, b}, {m});  // the wgrad GEMM of w2 reads it
        b_.keep(m);
      } else {
        s = t(b_, x.n * x.f, e);
      }
      const int ds = t(b_, x.n * x.f, e), db = t(b_, x.n * x.f, e), da = t(b_, x.n * x.f, e);
      b_.op("mul backward (grad·w3 out)", {dact, b}, {ds});
      b_.op("mul backward (grad·silu)", {dact, s}, {db});
      b_.op("silu backward", {ds, a}, {da});
      const int d1 = linear_backward("w1", da, x.n, x.f, x.h, saved_in);
      const int d3 = linear_backward("w3", db, x.n, x.f, x.h, saved_in);
      dhn = accumulate("accumulate grad (w1, w3)", d1, d3, x.n * x.h, e);
    } else {
      const int dfc1 = t(b_, x.n * 2 * x.f, e);
      if (megatron()) {
        // bias_swiglu_impl's backward (swiglu_back): one kernel.
        const int fc1 = t(b_, x.n * 2 * x.f, e);
        b_.op("swiglu backward (fused)", {dact, fc1}, {dfc1});
      } else {
        const int s = t(b_, x.n * x.f, e), ds = t(b_, x.n * x.f, e);
        b_.op("mul backward (grad·up)", {dact, b}, {ds});
        const int db = t(b_, x.n * x.f, e);
        b_.op("mul backward (grad·silu)", {dact, s}, {db});
        const int da = t(b_, x.n * x.f, e);
        b_.op("silu backward", {ds, a}, {da});
        // chunk's backward writes both halves into one gradient tensor.
        b_.op("chunk backward", {da, db}, {dfc1});
      }
      dhn = linear_backward(megatron() ? "linear_fc1" : "dense_h_to_4h", dfc1, x.n, 2 * x.f, x.h,
                            saved_in);
    }
  } else {
    const int a = t(b_, x.n * x.f, e), da = t(b_, x.n * x.f, e);
    b_.op(eager() ? "gelu backward" : "bias-gelu backward (fused)", {dact, a}, {da});
    dhn = linear_backward(eager()      ? "fc1"
                          : megatron() ? "linear_fc1"
                                       : "dense_h_to_4h",
                          da, x.n, x.f, x.h, saved_in);
  }
  if (x.sp) dhn = t(b_, x.nr * x.h, e);  // reduce-scattered by the plan
  const int dh1n = norm_backward(megatron() ? "pre_mlp_layernorm" : "ffn_norm", dhn);
  return accumulate("accumulate grad (residual)", gout, dh1n, x.nr * x.h, e);
}

int BlockGraphs::head_norm_backward(const std::string& name, int g, double width) {
  return norm_backward(name, g, x_.n * width / x_.d, x_.d);
}

}  // namespace stratagem::workload
