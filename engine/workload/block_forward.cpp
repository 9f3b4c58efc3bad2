// One block's forward graph per stack (block_graphs.hpp).
#include "engine/workload/block_graphs.hpp"

#include "engine/workload/units.hpp"

namespace stratagem::workload {

int BlockGraphs::norm_forward(const std::string& name, int in, bool fused_into_linear,
                              double rows_in, double width) {
  const double rows = rows_in < 0 ? x_.nr : rows_in, h = width < 0 ? x_.h : width, e = x_.e;
  const int w = f_.tensor(h, e, true);
  const int rstd = t(f_, rows, 4);
  f_.keep(rstd);
  if (!eager() || !x_.rms) {
    // One kernel: Transformer Engine's LayerNormLinear norm (transformer_engine/pytorch/
    // module/layernorm_linear.py, which under fp8 writes the fp8 output and its transpose),
    // apex's FusedLayerNorm/FusedRMSNorm, or ATen's native_layer_norm.
    if (megatron() && x_.fp8 && fused_into_linear) {
      const int out = t(f_, rows * h, 1), transposed = t(f_, rows * h, 1);
      f_.op(name, {in, w}, {out, transposed, rstd});
      f_.keep(transposed);  // the wgrad GEMM's operand
      return out;
    }
    const int out = t(f_, rows * h, e);
    f_.op(name, {in, w}, {out, rstd});
    save(f_, out);
    return out;
  }
  // ATen's composite rms_norm (aten/src/ATen/native/layer_norm.cpp rms_norm_symint, before
  // PyTorch 2.8's fused kernel; HuggingFace's LlamaRMSNorm.forward runs the same ops):
  // upcast, pow(2), mean, add eps, rsqrt, mul, cast back, mul by the weight.
  int xf = in;
  if (e != 4) {
    xf = t(f_, rows * h, 4);
    f_.op(name + ": to fp32", {in}, {xf});
  }
  const int p = t(f_, rows * h, 4), mean = t(f_, rows, 4), a = t(f_, rows, 4);
  f_.op(name + ": pow", {xf}, {p});
  f_.op(name + ": mean", {p}, {mean});
  f_.op(name + ": add eps", {mean}, {a});
  f_.op(name + ": rsqrt", {a}, {rstd});
  const int y = t(f_, rows * h, 4);
  f_.op(name + ": mul rstd", {xf, rstd}, {y});
  int yb = y;
  if (e != 4) {
    yb = t(f_, rows * h, e);
    f_.op(name + ": type_as", {y}, {yb});
  }
  const int out = t(f_, rows * h, e);
  f_.op(name + ": mul weight", {yb, w}, {out});
  save(f_, xf);
  save(f_, yb);
  return out;
}

BlockGraphs::Quantized BlockGraphs::quantize(OpGraph& g, const std::string& name, int in,
                                             double elements, bool forward) {
  using scenario::Fp8Recipe;
  constexpr double kScaled = scenario::kBlockScaledFp8Bytes;
  Quantized q;
  switch (x_.recipe) {
    case Fp8Recipe::tensorwise: {
      const int amax = t(g, 1, 4);
      q.first = t(g, elements, 1);
      g.op(name + ": amax", {in}, {amax});
      g.op(name + ": cast to fp8", {in, amax}, {q.first});
      return q;
    }
    case Fp8Recipe::rowwise: {
      const int tr = t(g, elements, x_.e);
      q.first = t(g, elements, 1);
      g.op(name + ": cast to fp8 rowwise, transpose", {in}, {q.first, tr});
      if (forward) {
        g.keep(tr);  // the wgrad GEMM's operand, cast in backward
      } else {
        q.second = t(g, elements, 1);
        g.op(name + ": cast transpose to fp8 rowwise", {tr}, {q.second});
      }
      return q;
    }
    case Fp8Recipe::blockwise:
    case Fp8Recipe::mxfp8:
      break;
  }
  const bool mx = x_.recipe == Fp8Recipe::mxfp8;
  q.first = t(g, elements, kScaled);
  if (megatron()) {
    const int col = t(g, elements, kScaled);
    g.op(name + (mx ? ": quantize to MXFP8, rowwise and columnwise"
                    : ": quantize 1x128 blocks, rowwise and columnwise"),
         {in}, {q.first, col});
    if (forward) {
      g.keep(col);  // the wgrad GEMM's operand
    } else {
      q.second = col;
    }
    return q;
  }
  g.op(name + ": cast dim0 to mxfp8", {in}, {q.first});
  if (!forward) {
    q.second = t(g, elements, kScaled);
    g.op(name + ": cast dim1 to mxfp8", {in}, {q.second});
  }
  return q;
}

int BlockGraphs::head_norm_forward(const std::string& name, int in, double width) {
  return norm_forward(name, in, false, x_.n * width / x_.d, x_.d);
}

int BlockGraphs::linear(const std::string& name, int in, double rows, double n, double k,
                        bool in_is_fp8, double count) {
  int a = in;
  if (x_.fp8 && !in_is_fp8) a = quantize(f_, name + " input", in, count * rows * k, true).first;
  const int w = f_.tensor(count * k * n, x_.fp8 ? 1.0 : x_.e, true);
  const int out = t(f_, count * rows * n, x_.e);
  f_.gemm(name, rows, n, k, x_.dtype, a, w, out, count);
  return out;
}

int BlockGraphs::rope_forward(const std::string& name, int in, double width) {
  const double el = x_.n * width, e = x_.e;
  const int freqs = f_.tensor(x_.seq * x_.d, 4, true);
  if (megatron()) {
    const int out = t(f_, el, e);
    f_.op(name + " (TE fused RoPE)", {in, freqs}, {out});
    return out;
  }
  if (legacy()) {
    const int neg = t(f_, el / 2, e), rot = t(f_, el, e), c = t(f_, el, e), sn = t(f_, el, e),
              out = t(f_, el, e);
    // x1 and x2: the halves, read through views of `in`
    const int x1 = t(f_, el / 2, e), x2 = t(f_, el / 2, e);
    f_.op(name + ": neg", {x2}, {neg});
    f_.op(name + ": cat", {neg, x1}, {rot});
    f_.op(name + ": mul cos", {in, freqs}, {c});
    f_.op(name + ": mul sin", {rot, freqs}, {sn});
    f_.op(name + ": add", {c, sn}, {out});
    return out;
  }
  return complex_rope(f_, in, el, freqs,
                      {name + ": float", name + ": complex mul", name + ": type_as"});
}

int BlockGraphs::complex_rope(OpGraph& g, int in, double el, int freqs,
                              const std::string (&names)[3]) {
  const double e = x_.e;
  int xf = in;
  if (e != 4) {
    xf = t(g, el, 4);
    g.op(names[0], {in}, {xf});
  }
  const int prod = t(g, el, 4);
  g.op(names[1], {xf, freqs}, {prod});
  if (e == 4) return prod;
  const int out = t(g, el, e);
  g.op(names[2], {prod}, {out});
  return out;
}

void BlockGraphs::forward() {
  const Shape& x = x_;
  const double e = x.e;
  const int input = t(f_, x.nr * x.h, e);
  f_.keep(input);  // the block's input: the previous block's output, saved for backward
  // --- attention
  int xn = norm_forward(megatron() ? "input_layernorm" : "attention_norm", input);
  bool xn_fp8 = megatron() && x.fp8;
  if (x.sp) {
    f_.keep(xn);  // the all-gather (a collective in the plan) reads it
    xn = t(f_, x.n * x.h, xn_fp8 ? 1.0 : e);
  }
  int q = -1, k = -1, v = -1;
  if (eager()) {
    q = linear("wq", xn, x.n, x.q, x.h, xn_fp8);
    k = linear("wk", xn, x.n, x.kv, x.h, xn_fp8);
    v = linear("wv", xn, x.n, x.kv, x.h, xn_fp8);
  } else {
    linear(megatron() ? "linear_qkv" : "query_key_value", xn, x.n, x.q + 2 * x.kv, x.h, xn_fp8);
    // q, k and v: views of the one output, each read by what follows.
    q = t(f_, x.n * x.q, e);
    k = t(f_, x.n * x.kv, e);
    v = t(f_, x.n * x.kv, e);
  }
  if (x.qk_norm) {
    q = head_norm_forward(megatron() ? "q_layernorm" : "q_norm", q, x.q);
    k = head_norm_forward(megatron() ? "k_layernorm" : "k_norm", k, x.kv);
  }
  if (x.rotary) {
    q = rope_forward("rope q", q, x.q);
    k = rope_forward("rope k", k, x.kv);
  }
  if (legacy() && x.flash) {
    // flash-attn wants [b, s, heads, d]: rearrange(...).contiguous() of q, k, v
    // (megatron/model/transformer.py ParallelAttention with use_flash_attn).
    const int q2 = t(f_, x.n * x.q, e), k2 = t(f_, x.n * x.kv, e), v2 = t(f_, x.n * x.kv, e);
    f_.op("q to flash layout", {q}, {q2});
    f_.op("k to flash layout", {k}, {k2});
    f_.op("v to flash layout", {v}, {v2});
    q = q2;
    k = k2;
    v = v2;
  }
  const double rep = x.kv > 0 ? x.q / x.kv : 1.0;
  if (rep > 1 && (eager() || legacy())) {
    // Grouped-query attention: torchtitan's repeat_kv (expand + reshape copies), Megatron-
    // LM's repeat_interleave; Transformer Engine's attention reads the groups directly.
    const int k2 = t(f_, x.n * x.q, e), v2 = t(f_, x.n * x.q, e);
    f_.op("repeat_kv k", {k}, {k2});
    f_.op("repeat_kv v", {v}, {v2});
    k = k2;
    v = v2;
  }
  int o = -1;
  if (x.flash) {
    Kernel a;
    a.name = megatron() ? "core_attention (TE fused attention)" : "scaled_dot_product_attention";
    a.flops = 4.0 * x.n * x.seq * x.q * (x.causal ? 0.5 : 1.0);
    a.dtype = x.fp8 ? DType::bf16 : x.dtype;  // attention stays in 16 bits under fp8
    a.head_dim = x.d;
    a.seq = x.seq;
    a.causal = x.causal;
    o = t(f_, x.n * x.q, e);
    const int lse = t(f_, x.n * x.heads, 4);
    f_.attention(a, {q, k, v}, {o, lse});
    f_.keep(q);
    f_.keep(k);
    f_.keep(v);
    f_.keep(o);
    f_.keep(lse);
  } else {
    // softmax(Q·Kᵀ/√d)·V as batched GEMMs (Megatron's scaled-masked softmax fused; eager
    // PyTorch: HuggingFace's eager_attention_forward: scale, mask add, fp32 softmax, cast).
    const double sc = x.n * x.heads * x.seq;
    const DType dt = x.dtype == DType::fp8 ? DType::bf16 : x.dtype;
    const int scores = t(f_, sc, e), probs = t(f_, sc, e);
    f_.gemm(kScoresGemm, x.n * x.heads, x.seq, x.d, dt, q, k, scores);
    if (eager()) {
      const int scaled = t(f_, sc, e), masked = t(f_, sc, e), p32 = t(f_, sc, 4);
      f_.op("scale scores", {scores}, {scaled});
      f_.op("add mask", {scaled}, {masked});
      f_.op("softmax (fp32)", {masked}, {p32});
      f_.op("softmax to dtype", {p32}, {probs});
    } else {
      f_.op("fused scale-mask-softmax", {scores}, {probs});
    }
    f_.keep(probs);
    o = t(f_, x.n * x.q, e);
    f_.gemm(kValuesGemm, x.n * x.heads, x.d, x.seq, dt, probs, v, o);
    f_.keep(q);
    f_.keep(k);
    f_.keep(v);
  }
  if (eager() || legacy()) {
    // Back to [b, s, heads·d]: output.transpose(1, 2).contiguous() (torchtitan), rearrange
    // (Megatron-LM); Transformer Engine's attention writes that layout itself.
    const int oc = t(f_, x.n * x.q, e);
    f_.op("attention output contiguous", {o}, {oc});
    o = oc;
  }
  save(f_, o);
  if (compile_) f_.keep(o);  // the wgrad GEMM of the projection reads it
  const int y = linear(megatron() ? "linear_proj"
                       : eager()  ? "wo"
                                  : "dense",
                       o, x.n, x.h, x.q, false);
  int yr = y;
  if (x.sp) {
    f_.keep(y);  // reduce-scattered by the plan's collective
    yr = t(f_, x.nr * x.h, e);
  }
  const int h1 = t(f_, x.nr * x.h, e);
  f_.op(eager() ? "residual add" : "bias-dropout-add", {input, yr}, {h1});
  f_.keep(h1);
  if (x.moe_block) {
    moe_forward(h1);
  } else {
    mlp_forward(h1);
  }
}

int BlockGraphs::mlp_forward(int h1) {
  const Shape& x = x_;
  const double e = x.e;
  const bool xn_fp8 = megatron() && x.fp8;
  int hn = norm_forward(megatron() ? "pre_mlp_layernorm" : "ffn_norm", h1);
  if (x.sp) {
    f_.keep(hn);
    hn = t(f_, x.n * x.h, xn_fp8 ? 1.0 : e);
  }
  const int act = t(f_, x.n * x.f, e);
  if (x.swiglu) {
    if (eager()) {
      const int a = linear("w1", hn, x.n, x.f, x.h, xn_fp8);
      const int b = linear("w3", hn, x.n, x.f, x.h, xn_fp8);
      const int s = t(f_, x.n * x.f, e);
      f_.op("silu", {a}, {s});
      f_.op("mul", {s, b}, {act});
      save(f_, s);
      f_.keep(a);
      f_.keep(b);
    } else {
      const int a =
          linear(megatron() ? "linear_fc1" : "dense_h_to_4h", hn, x.n, 2 * x.f, x.h, xn_fp8);
      f_.keep(a);
      if (megatron()) {
        // megatron/core/fusions/fused_bias_swiglu.py bias_swiglu_impl: one kernel.
        f_.op("swiglu (fused)", {a}, {act});
      } else {
        // Megatron-LM's swiglu: chunk, F.silu(x[0]) * x[1]: two kernels on the halves.
        const int gate = t(f_, x.n * x.f, e), up = t(f_, x.n * x.f, e), s = t(f_, x.n * x.f, e);
        f_.op("silu", {gate}, {s});
        f_.op("mul", {s, up}, {act});
        f_.keep(s);
      }
    }
  } else {
    const int a = linear(eager()      ? "fc1"
                         : megatron() ? "linear_fc1"
                                      : "dense_h_to_4h",
                         hn, x.n, x.f, x.h, xn_fp8);
    f_.op(eager() ? "gelu" : "bias-gelu (fused)", {a}, {act});
    f_.keep(a);
  }
  save(f_, act);
  if (compile_) f_.keep(act);  // the wgrad GEMM of the last linear reads it
  const int z = linear(eager()      ? (x.swiglu ? "w2" : "fc2")
                       : megatron() ? "linear_fc2"
                                    : "dense_4h_to_h",
                       act, x.n, x.h, x.f, false);
  int zr = z;
  if (x.sp) {
    f_.keep(z);
    zr = t(f_, x.nr * x.h, e);
  }
  const int out = t(f_, x.nr * x.h, e);
  f_.op(eager() ? "residual add" : "bias-dropout-add", {h1, zr}, {out});
  f_.keep(out);
  return out;
}

}  // namespace stratagem::workload
