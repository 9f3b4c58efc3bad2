#include "engine/workload/kernels.hpp"

#include <string>

#include "engine/scenario/error.hpp"
#include "engine/workload/units.hpp"

namespace stratagem::workload {

namespace {

using scenario::DType;
using scenario::Stack;

/// One rank's share of a block (widths already divided by tp; tokens by cp).
struct Shape {
  double n = 0;      ///< tokens of one micro-batch on this rank: b·s/cp
  double nr = 0;     ///< tokens the norms and residual adds run on: n/tp with SP, else n
  double h = 0;      ///< hidden
  double q = 0;      ///< query (and attention output) width: heads·d/tp
  double kv = 0;     ///< key (or value) width: kv_heads·d/tp
  double f = 0;      ///< MLP hidden width / tp
  double heads = 0;  ///< attention heads on this rank
  double d = 0;      ///< head dimension
  double seq = 0;    ///< keys each query attends over
  bool causal = true;
  bool flash = true;
  bool swiglu = true;
  bool rms = true;
  bool rotary = true;
  bool sp = false;            ///< sequence parallelism: gather before the column-parallel GEMMs
  double e = 2;               ///< activation element bytes
  DType dtype = DType::bf16;  ///< the linear layers' GEMM dtype
  bool fp8 = false;
};

Shape shape_of(const scenario::Scenario& s) {
  const auto& m = s.model;
  const auto& st = s.strategy;
  if (m.measured || m.params_given > 0) {
    throw SpecError("model",
                    "a kernel list needs the model's shape (hidden, heads, ffn_hidden); "
                    "the quick and measured forms have none");
  }
  Shape x;
  const double t = st.tp;
  x.n = static_cast<double>(st.micro_batch_size) * static_cast<double>(s.training.seq_len) / st.cp;
  x.sp = st.sequence_parallel && st.tp > 1;
  x.nr = x.sp ? x.n / t : x.n;
  x.h = static_cast<double>(m.hidden);
  x.heads = static_cast<double>(m.heads) / t;
  x.d = x.h / static_cast<double>(m.heads);
  x.q = x.heads * x.d;
  x.kv = scenario::kv_dim(m) / t;
  x.f = static_cast<double>(m.ffn_hidden) / t;
  x.seq = static_cast<double>(s.training.seq_len);
  x.causal = m.kind == scenario::ModelKind::decoder;
  x.flash = st.attention == scenario::Attention::flash;
  x.swiglu = m.mlp == scenario::MlpKind::swiglu;
  x.rms = m.norm == scenario::NormKind::rmsnorm;
  x.rotary = m.positions == scenario::PositionKind::rotary;
  x.e = st.precision == scenario::Precision::no ? 4.0 : 2.0;
  x.dtype = scenario::gemm_dtype(st);
  x.fp8 = x.dtype == DType::fp8;
  return x;
}

/// Builds one block's forward and backward graphs. `fused_norm` and friends say which ops the
/// stack runs as one hand-written kernel; `compile` marks the graph for Inductor's fusion (only
/// GEMM inputs, row statistics and the block's input stay saved; pointwise results are
/// recomputed in backward, as torch/_functorch/partitioners.py min_cut_rematerialization_partition
/// chooses for cheap ops).
class BlockGraphs {
 public:
  BlockGraphs(const Shape& x, Stack stack, bool compile)
      : x_(x), stack_(stack), compile_(compile) {}

  BlockKernels build() {
    forward();
    backward();
    BlockKernels k;
    k.forward = compile_ ? f_.fused() : f_.eager();
    k.backward = compile_ ? b_.fused() : b_.eager();
    return k;
  }

 private:
  const Shape x_;
  const Stack stack_;
  const bool compile_;
  OpGraph f_, b_;

  bool megatron() const { return stack_ == Stack::megatron; }
  bool legacy() const { return stack_ == Stack::megatron_legacy; }
  bool eager() const { return scenario::eager_modules(stack_); }
  /// Eager autograd keeps what each op saves; under compile only what the partitioner keeps.
  void save(OpGraph& g, int t) {
    if (!compile_) g.keep(t);
  }

  static int t(OpGraph& g, double elements, double bytes) { return g.tensor(elements, bytes); }

  // ---- forward ----------------------------------------------------------------------

  /// A norm over `rows` tokens of width h. Returns the normalized output (what the next
  /// linear reads: fp8 when Transformer Engine's LayerNormLinear casts in the norm kernel).
  int norm_forward(const std::string& name, int in) {
    const double rows = x_.nr, h = x_.h, e = x_.e;
    const int w = f_.tensor(h, e, true);
    const int rstd = t(f_, rows, 4);
    f_.keep(rstd);
    if (!eager() || !x_.rms) {
      // One kernel: Transformer Engine's LayerNormLinear norm (transformer_engine/pytorch/
      // module/layernorm_linear.py, which under fp8 writes the fp8 output and its transpose),
      // apex's FusedLayerNorm/FusedRMSNorm, or ATen's native_layer_norm.
      if (megatron() && x_.fp8) {
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

  /// The per-tensor fp8 cast a linear layer's input gets (current scaling: an amax pass, then
  /// the cast; Transformer Engine's Float8CurrentScaling, torchao's tensorwise dynamic scaling).
  int fp8_cast(OpGraph& g, const std::string& name, int in, double elements) {
    const int amax = t(g, 1, 4), out = t(g, elements, 1);
    g.op(name + ": amax", {in}, {amax});
    g.op(name + ": cast to fp8", {in, amax}, {out});
    return out;
  }

  /// A linear layer's forward GEMM: `in` (rows × k) times the k × n weight.
  int linear(const std::string& name, int in, double rows, double n, double k, bool in_is_fp8) {
    int a = in;
    if (x_.fp8 && !in_is_fp8) a = fp8_cast(f_, name + " input", in, rows * k);
    const int w = f_.tensor(k * n, x_.fp8 ? 1.0 : x_.e, true);
    const int out = t(f_, rows * n, x_.e);
    f_.gemm(name, rows, n, k, x_.dtype, a, w, out);
    return out;
  }

  /// RoPE on one of q, k: torchtitan's complex form (apply_rotary_emb: float(), complex
  /// multiply, type_as), Megatron-LM's rotate-half form (megatron/model/rotary_pos_embedding.py
  /// apply_rotary_pos_emb: neg of one half, cat, two muls and an add), or Transformer Engine's
  /// fused_apply_rotary_pos_emb (Megatron-Core's apply_rope_fusion): one kernel.
  int rope_forward(const std::string& name, int in, double width) {
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

  /// torchtitan's RoPE in fp32, forward or backward: cast up, the complex multiply (by the
  /// table or its conjugate), cast back; fp32 training has no casts.
  int complex_rope(OpGraph& g, int in, double el, int freqs, const std::string (&names)[3]) {
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

  void forward() {
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
      f_.gemm("q·kᵀ", x.n * x.heads, x.seq, x.d, dt, q, k, scores);
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
      f_.gemm("probs·v", x.n * x.heads, x.d, x.seq, dt, probs, v, o);
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
    // --- MLP
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
  }

  // ---- backward ---------------------------------------------------------------------

  /// The gradient of a linear layer: dgrad (dy · Wᵀ) and wgrad (dyᵀ · x). `dy` is rows × n;
  /// returns the input gradient, rows × k. Megatron accumulates wgrad into the fp32 main_grad
  /// (gradient_accumulation_fusion: read and written in fp32).
  int linear_backward(const std::string& name, int dy, double rows, double n, double k,
                      double in_bytes_saved) {
    int g = dy;
    if (x_.fp8) g = fp8_cast(b_, name + " output grad", dy, rows * n);
    const int w = b_.tensor(k * n, x_.fp8 ? 1.0 : x_.e, true);
    const int dx = t(b_, rows * k, x_.e);
    b_.gemm(name + " dgrad", rows, k, n, x_.dtype, g, w, dx);
    const int xin = t(b_, rows * k, in_bytes_saved);
    const int dw = t(b_, k * n, megatron() ? 8.0 : x_.e);
    b_.gemm(name + " wgrad", n, k, rows, x_.dtype, g, xin, dw);
    return dx;
  }

  int accumulate(const std::string& name, int a, int b, double elements, double bytes) {
    const int out = t(b_, elements, bytes);
    b_.op(name, {a, b}, {out});
    return out;
  }

  /// A norm's backward: one fused kernel for Transformer Engine (dx with the weight gradient's
  /// partial sums), two for apex and ATen's native_layer_norm_backward (dx, then the weight
  /// gradient reading dy and x again), autograd's formulas for each op of the composite one.
  int norm_backward(const std::string& name, int g) {
    const double rows = x_.nr, h = x_.h, e = x_.e;
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

  int rope_backward(const std::string& name, int g, double width) {
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

  void backward() {
    const Shape& x = x_;
    const double e = x.e;
    const double saved_in = x.fp8 ? (megatron() ? 1.0 : e) : e;
    const int gout = t(b_, x.nr * x.h, e);  // the block output's gradient
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
    const int dh1 = accumulate("accumulate grad (residual)", gout, dh1n, x.nr * x.h, e);
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
      dxn = linear_backward(megatron() ? "linear_qkv" : "query_key_value", dqkv, x.n,
                            x.q + 2 * x.kv, x.h, saved_in);
    }
    if (x.sp) dxn = t(b_, x.nr * x.h, e);
    const int dxn_in = norm_backward(megatron() ? "input_layernorm" : "attention_norm", dxn);
    const int dx = accumulate("accumulate grad (residual)", dh1, dxn_in, x.nr * x.h, e);
    b_.keep(dx);
  }
};

}  // namespace

BlockKernels block_kernels(const scenario::Scenario& s) {
  const Shape x = shape_of(s);
  const bool compile = s.strategy.compile && scenario::eager_modules(s.strategy.stack);
  return BlockGraphs(x, s.strategy.stack, compile).build();
}

KernelTotals totals(const std::vector<Kernel>& kernels) {
  KernelTotals t;
  for (const Kernel& k : kernels) {
    switch (k.kind) {
      case KernelKind::gemm:
        t.gemm_flops += k.flops;
        t.gemm_bytes += k.bytes;
        break;
      case KernelKind::attention:
        t.attention_flops += k.flops;
        break;
      case KernelKind::memory:
        t.memory_bytes += k.bytes;
        break;
    }
    ++t.launches;
  }
  return t;
}

}  // namespace stratagem::workload
