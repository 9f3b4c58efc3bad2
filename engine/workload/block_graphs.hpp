#pragma once
// Internal to engine/workload: the graphs kernels.hpp's lists are lowered from — one rank's
// share of a block (Shape) and the builder of its forward and backward op graphs per stack.
#include <string>

#include "engine/scenario/scenario.hpp"
#include "engine/workload/kernel_graph.hpp"
#include "engine/workload/kernels.hpp"

namespace stratagem::workload {

using scenario::DType;
using scenario::Stack;

/// One rank's share of an MoE block's experts (model.moe; expert_mesh.hpp for the layout).
struct MoeShape {
  double experts = 0;  ///< routed experts: the router's outputs
  double top_k = 0;
  double local = 0;      ///< routed experts on this rank: experts / ep
  double rows = 0;       ///< rows of each local expert's GEMMs: the busiest expert's
  double routed = 0;     ///< token copies this rank routes: tokens · top_k
  double f = 0;          ///< one routed expert's MLP width / etp
  double shared_f = 0;   ///< the shared experts' MLP width, all of them together
  bool sigmoid = false;  ///< DeepSeek-V3's sigmoid affinities with a balancing bias
  /// ep · etp > 1: the experts' rows arrive by the plan's dispatch and leave by its combine
  /// (the graph starts them as fresh tensors, as it does across TP collectives).
  bool dispatched = false;
};

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
  bool qk_norm = false;       ///< per-head RMSNorm on q and k before RoPE (Qwen3, model.qk_norm)
  bool sp = false;            ///< sequence parallelism: gather before the column-parallel GEMMs
  double e = 2;               ///< activation element bytes
  DType dtype = DType::bf16;  ///< the linear layers' GEMM dtype
  bool fp8 = false;
  scenario::Fp8Recipe recipe = scenario::Fp8Recipe::tensorwise;  ///< under fp8
  bool moe_block = false;  ///< the MLP is a mixture of experts (`moe`), not `f`
  MoeShape moe;
};

/// One rank's share of the scenario's block of `kind`. Throws SpecError for a model without a
/// shape.
Shape shape_of(const scenario::Scenario& s, scenario::BlockKind kind = scenario::BlockKind::dense);

/// Builds one block's forward graph (block_forward.cpp) and backward graph (block_backward.cpp)
/// as `stack` writes the block; `compile` marks the graphs for Inductor's fusion (only
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
    for (int p = 0; p < kBlockPartCount; ++p) k.saved[p] = f_.kept_bytes(p);
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

  // forward (block_forward.cpp)
  /// A norm over `rows` tokens of width h. Returns the normalized output (what the next
  /// linear reads: fp8 when Transformer Engine's LayerNormLinear casts in the norm kernel,
  /// unless `fused_into_linear` is false: an MoE block's norm feeds the router and the
  /// permutation, a TENorm of its own in Megatron-Core).
  /// `rows` and `width` (default: the block's tokens, h) for another norm's shape.
  int norm_forward(const std::string& name, int in, bool fused_into_linear = true, double rows = -1,
                   double width = -1);
  /// Qwen3's per-head norm of q or k (`width` of them per token: heads × head_dim on this rank)
  /// as one kernel (Transformer Engine's q_layernorm / k_layernorm in Megatron-Core, an
  /// RMSNorm kernel in Megatron-LM) or ATen's composite rms_norm over rows of head_dim (eager);
  /// forward and backward.
  int head_norm_forward(const std::string& name, int in, double width);
  int head_norm_backward(const std::string& name, int g, double width);

  /// The fp8 quantization of a linear layer's activation operand: its input (forward) or its
  /// output gradient (backward), `elements` of it. `first`: what the forward or dgrad GEMM
  /// reads; `second`: what the wgrad GEMM reads (backward), -1 where it is `first`. Per recipe:
  ///  * tensorwise: an amax pass, then the cast (Transformer Engine's Float8CurrentScaling,
  ///    torchao's tensorwise dynamic scaling), one fp8 copy both GEMMs read;
  ///  * rowwise (torchao): one kernel writes the fp8 rows and a bf16 transpose, a second
  ///    casts the transpose for the wgrad GEMM (backward; the input's transpose is kept for it)
  ///    — torchao/testing/training/roofline_utils.py get_tensor_memory_traffic_ovhd_s;
  ///  * blockwise (Transformer Engine's Float8BlockScaling, 1×128 blocks): one kernel writes
  ///    the rowwise and the columnwise fp8 copies with fp32 scales per 128 elements;
  ///  * mxfp8: Transformer Engine's MXFP8 quantizer writes both copies in one kernel (e8m0
  ///    scales per 32 elements); torchao's mx_formats casts each dim apart (two kernels, each
  ///    reading the bf16 tensor; the input's second cast in backward from the kept bf16 input).
  struct Quantized {
    int first = -1, second = -1;
  };
  Quantized quantize(OpGraph& g, const std::string& name, int in, double elements, bool forward);
  /// torchao's rowwise backward GEMMs run cuBLAS's per-tensor kernel and scale the output in a
  /// kernel of its own (torchao/float8/float8_ops.py addmm_float8_unwrapped); else `raw`.
  int rescale(const std::string& name, int raw, double elements, double bytes);

  /// A linear layer's forward GEMM: `in` (rows × k) times the k × n weight; `count` > 1: that
  /// many experts' linears as one grouped GEMM, `rows` each.
  int linear(const std::string& name, int in, double rows, double n, double k, bool in_is_fp8,
             double count = 1);

  /// RoPE on one of q, k: torchtitan's complex form (apply_rotary_emb: float(), complex
  /// multiply, type_as), Megatron-LM's rotate-half form (megatron/model/rotary_pos_embedding.py
  /// apply_rotary_pos_emb: neg of one half, cat, two muls and an add), or Transformer Engine's
  /// fused_apply_rotary_pos_emb (Megatron-Core's apply_rope_fusion): one kernel.
  int rope_forward(const std::string& name, int in, double width);

  /// torchtitan's RoPE in fp32, forward or backward: cast up, the complex multiply (by the
  /// table or its conjugate), cast back; fp32 training has no casts.
  int complex_rope(OpGraph& g, int in, double el, int freqs, const std::string (&names)[3]);

  void forward();
  /// The dense MLP half after the attention's residual `h1`; returns the block's output.
  int mlp_forward(int h1);
  /// The MLP half of an MoE block after the attention's residual `h1` (block_moe.cpp):
  /// Megatron-Core's MoELayer (router, token dispatcher, grouped experts, shared experts) or
  /// torchtitan's MoE; returns the block's output.
  int moe_forward(int h1);

  // backward (block_backward.cpp)
  /// The gradient of a linear layer: dgrad (dy · Wᵀ) and wgrad (dyᵀ · x). `dy` is rows × n;
  /// returns the input gradient, rows × k. Megatron accumulates wgrad into the fp32 main_grad
  /// (gradient_accumulation_fusion: read and written in fp32).
  int linear_backward(const std::string& name, int dy, double rows, double n, double k,
                      double in_bytes_saved, double count = 1);

  int accumulate(const std::string& name, int a, int b, double elements, double bytes);

  /// A norm's backward: one fused kernel for Transformer Engine (dx with the weight gradient's
  /// partial sums), two for apex and ATen's native_layer_norm_backward (dx, then the weight
  /// gradient reading dy and x again), autograd's formulas for each op of the composite one.
  int norm_backward(const std::string& name, int g, double rows = -1, double width = -1);

  int rope_backward(const std::string& name, int g, double width);

  void backward();
  /// The dense MLP half's backward; returns the gradient of the attention's residual `h1`.
  int mlp_backward(int gout);
  /// The MoE half's backward from the block output's gradient `gout`; returns the gradient of
  /// the attention's residual `h1` (block_moe.cpp).
  int moe_backward(int gout);
  /// A two- or three-matrix MLP (SwiGLU or GeLU) on `rows` rows of width `f`, `count` experts
  /// of it grouped (Megatron-Core's TEGroupedMLP, torchtitan's GroupedExperts), forward and
  /// backward; `probs` (≥ 0): the routing weights, multiplied into the activation's output
  /// (Megatron-Core's weighted SwiGLU; torchtitan scales the experts' outputs instead).
  int expert_mlp_forward(const std::string& name, int in, double rows, double f, double count,
                         int probs);
  int expert_mlp_backward(const std::string& name, int dy, double rows, double f, double count,
                          bool weighted);
};

}  // namespace stratagem::workload
