#include "engine/runtime/model_units.hpp"

#include "engine/runtime/autocast_scope.hpp"
#include "engine/runtime/fused_attention.hpp"

#include <cmath>
#include <limits>

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/autograd.h>

#include "engine/scenario/error.hpp"

namespace stratagem::runtime {

namespace {

constexpr double kNormEps = 1e-5;      // GPT-2's LayerNorm epsilon
constexpr double kRopeBase = 10000.0;  // Su et al. 2021, as in GPT-NeoX and Llama

at::Tensor or_zeros(const at::Tensor& t, const at::Tensor& like) {
  return t.defined() ? t : at::zeros_like(like);
}

}  // namespace

Numerics Numerics::of(const scenario::StrategySpec& strategy, const c10::Device& device) {
  Numerics n;
  n.fused_attention = strategy.attention == scenario::Attention::flash;
  switch (strategy.precision) {
    case scenario::Precision::no:
      break;
    case scenario::Precision::bf16:
    case scenario::Precision::fp8:  // refused by check_runtime_strategy; its 16-bit part is bf16
      n.param_dtype = n.boundary_dtype = at::kBFloat16;
      n.autocast = true;
      break;
    case scenario::Precision::fp16:
      n.param_dtype = n.boundary_dtype = at::kHalf;
      n.autocast = device.is_cuda();
      n.fp32_compute = !device.is_cuda();
      break;
  }
  return n;
}

GptUnits::GptUnits(const scenario::ModelSpec& model, std::int64_t seq_len,
                   bool head_owns_embedding_copy, Numerics numerics, c10::Device device, TpShard tp,
                   bool sequence_parallel)
    : model_(model),
      seq_len_(seq_len),
      tp_(tp),
      sequence_parallel_(sequence_parallel && tp.size > 1),
      layouts_(gpt_unit_layouts(model, head_owns_embedding_copy, tp)),
      numerics_(numerics),
      device_(device) {
  causal_mask_ =
      at::ones({seq_len, seq_len}, at::TensorOptions().dtype(at::kBool).device(device)).triu(1);
  if (model.positions == scenario::PositionKind::rotary) {
    const std::int64_t half = model.hidden / model.heads / 2;
    auto f32 = at::TensorOptions().dtype(at::kFloat);
    auto inv_freq =
        at::pow(kRopeBase, at::arange(0, half, f32) * (-1.0 / static_cast<double>(half)));
    auto angles = at::outer(at::arange(0, seq_len, f32), inv_freq);
    rope_cos_ = angles.cos().to(device);
    rope_sin_ = angles.sin().to(device);
  }
}

std::int64_t GptUnits::boundary_tokens() const {
  return sequence_parallel_ ? seq_len_ / tp_.size : seq_len_;
}

bool GptUnits::head_borrows_embedding() const {
  return model_.tied_embeddings && !layouts_.back().has("wte");
}

at::Tensor GptUnits::initial_params(int unit, std::uint64_t seed) const {
  const auto& l = layouts_[unit];
  auto flat = at::empty({l.numel}, at::TensorOptions().dtype(at::kFloat));
  for (const auto& s : l.slots) {
    auto view = flat.narrow(0, s.offset, s.numel);
    switch (s.init) {
      case InitKind::zeros:
        view.zero_();
        break;
      case InitKind::ones:
        view.fill_(1.0);
        break;
      case InitKind::normal:
      case InitKind::normal_residual: {
        auto gen = at::make_generator<at::CPUGeneratorImpl>(init_seed(seed, s));
        const double std = init_std(s, model_.layers);
        if (s.shard_dim < 0 && s.drawn_rows < 0) {
          view.normal_(0.0, std, gen);
          break;
        }
        // The whole parameter's values (the same stream as with tp = 1; padding rows 0),
        // then this rank's slice.
        std::int64_t cols = 1;
        for (std::size_t d = 1; d < s.full_shape.size(); ++d) cols *= s.full_shape[d];
        const std::int64_t rows = s.drawn_rows < 0 ? s.full_shape[0] : s.drawn_rows;
        auto whole = at::zeros({s.full_shape[0] * cols}, at::TensorOptions().dtype(at::kFloat));
        whole.narrow(0, 0, rows * cols).normal_(0.0, std, gen);
        at::Tensor part = whole.view(s.full_shape);
        if (s.shard_dim >= 0) {
          const std::int64_t n = s.shape[static_cast<std::size_t>(s.shard_dim)];
          part = part.narrow(s.shard_dim, s.shard_index * n, n);
        }
        view.copy_(part.reshape({-1}));
        break;
      }
    }
  }
  return flat;
}

at::Tensor GptUnits::to_boundary(const at::Tensor& hidden) const {
  return hidden.detach().to(numerics_.boundary_dtype).contiguous();
}

at::Tensor GptUnits::param_leaf(const at::Tensor& params) const {
  auto p = numerics_.fp32_compute ? params.to(at::kFloat) : params;
  return p.detach().requires_grad_(true);
}

std::vector<at::Tensor> GptUnits::split_params(const at::Tensor& flat, const UnitLayout& l) const {
  // One split node for every slot: its backward writes all the slots' gradients into one flat
  // gradient in a single pass, where a narrow view per slot would each materialise a
  // zero-filled gradient of the whole unit (measured: ~20 % of a step on a 4-layer GPT).
  std::vector<std::int64_t> sizes;
  std::vector<std::size_t> piece(l.slots.size());
  std::int64_t at = 0;
  for (std::size_t i = 0; i < l.slots.size(); ++i) {
    const auto& slot = l.slots[i];
    if (slot.offset < at) throw RuntimeError("unit layout: slots overlap or are out of order");
    if (slot.offset > at) sizes.push_back(slot.offset - at);
    piece[i] = sizes.size();
    sizes.push_back(slot.numel);
    at = slot.offset + slot.numel;
  }
  if (at < flat.numel()) sizes.push_back(flat.numel() - at);
  const auto pieces = flat.split_with_sizes(sizes);
  std::vector<at::Tensor> out;
  out.reserve(l.slots.size());
  for (std::size_t i = 0; i < l.slots.size(); ++i)
    out.push_back(pieces[piece[i]].view(l.slots[i].shape));
  return out;
}

const at::Tensor& GptUnits::view(const Parts& p, const UnitLayout& l, const char* name) const {
  return p[static_cast<std::size_t>(&l.slot(name) - l.slots.data())];
}

at::Tensor GptUnits::embedding_forward(const Parts& p, const at::Tensor& tokens) const {
  const auto& l = layouts_[0];
  auto x = at::embedding(view(p, l, "wte"), tokens);
  if (l.has("wpe")) x = x + view(p, l, "wpe").narrow(0, 0, tokens.size(1));
  return x;
}

at::Tensor GptUnits::norm(const Parts& p, const UnitLayout& l, const std::string& name,
                          const at::Tensor& x) const {
  auto w = view(p, l, (name + ".weight").c_str());
  if (model_.norm == scenario::NormKind::layernorm) {
    return at::layer_norm(x, {model_.hidden}, w, view(p, l, (name + ".bias").c_str()), kNormEps);
  }
  return x * at::rsqrt(x.pow(2).mean(-1, true) + kNormEps) * w;
}

at::Tensor GptUnits::linear(const Parts& p, const UnitLayout& l, const std::string& name,
                            const at::Tensor& x) const {
  const auto bias = name + ".bias";
  return at::linear(x, view(p, l, (name + ".weight").c_str()),
                    l.has(bias) ? view(p, l, bias.c_str()) : at::Tensor());
}

void GptUnits::qkv(const Parts& p, const UnitLayout& l, const at::Tensor& x, at::Tensor& q,
                   at::Tensor& k, at::Tensor& v) const {
  const std::int64_t b = x.size(0), s = x.size(1);
  const std::int64_t heads = model_.heads, kv_heads = model_.kv_heads;
  const std::int64_t hd = model_.hidden / heads;
  auto xn = norm(p, l, "ln1", x);
  q = linear(p, l, "attn.q", xn).view({b, s, heads, hd}).transpose(1, 2);
  k = linear(p, l, "attn.k", xn).view({b, s, kv_heads, hd}).transpose(1, 2);
  v = linear(p, l, "attn.v", xn).view({b, s, kv_heads, hd}).transpose(1, 2);
  if (rope_cos_.defined()) {
    q = rotate(q);
    k = rotate(k);
  }
  if (kv_heads < heads) {  // grouped-query attention: each K/V head serves heads/kv_heads
    k = k.repeat_interleave(heads / kv_heads, 1);
    v = v.repeat_interleave(heads / kv_heads, 1);
  }
}

at::Tensor GptUnits::rotate(const at::Tensor& t) const {
  // [b, heads, s, hd]: rotary positions 0..s-1 (Su et al. 2021, halves rotated as GPT-NeoX).
  const std::int64_t s = t.size(2), half = t.size(-1) / 2;
  auto c = rope_cos_.narrow(0, 0, s).to(t.scalar_type());
  auto sn = rope_sin_.narrow(0, 0, s).to(t.scalar_type());
  auto t1 = t.narrow(-1, 0, half), t2 = t.narrow(-1, half, half);
  return at::cat({t1 * c - t2 * sn, t2 * c + t1 * sn}, -1);
}

at::Tensor GptUnits::attention_core(const at::Tensor& q, const at::Tensor& k,
                                    const at::Tensor& v) const {
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  const std::int64_t s = q.size(2);
  if (numerics_.fused_attention) {
    return fused_attention(q, k, v, causal_mask_.narrow(0, 0, s).narrow(1, 0, s), scale);
  }
  auto scores = at::matmul(q, k.transpose(-2, -1)) * scale;
  scores = scores.masked_fill(causal_mask_.narrow(0, 0, s).narrow(1, 0, s),
                              -std::numeric_limits<double>::infinity());
  return at::matmul(at::softmax(scores, -1), v);
}

at::Tensor GptUnits::block_rest(const Parts& p, const UnitLayout& l, const at::Tensor& x,
                                const at::Tensor& core) const {
  const std::int64_t b = x.size(0), s = x.size(1);
  auto ctx = core.transpose(1, 2).reshape({b, s, model_.hidden});
  auto a = x + linear(p, l, "attn.o", ctx);
  auto an = norm(p, l, "ln2", a);
  at::Tensor hidden;
  if (model_.mlp == scenario::MlpKind::swiglu) {
    hidden = at::silu(linear(p, l, "mlp.gate", an)) * linear(p, l, "mlp.up", an);
  } else {
    hidden = at::gelu(linear(p, l, "mlp.up", an), "tanh");  // GPT-2's tanh approximation
  }
  return a + linear(p, l, "mlp.down", hidden);
}

at::Tensor GptUnits::head_forward(const Parts& p, const at::Tensor& word_table, const at::Tensor& x,
                                  const at::Tensor& targets) const {
  const auto& l = layouts_.back();
  auto xn = norm(p, l, "ln_f", x);
  at::Tensor w = word_table.defined() ? word_table
                 : l.has("lm_head")   ? view(p, l, "lm_head")
                                      : view(p, l, "wte");
  auto logits = at::linear(xn, w);
  return at::cross_entropy_loss(logits.reshape({-1, model_.vocab}).to(at::kFloat),
                                targets.reshape({-1}));
}

void GptUnits::run_forward(UnitActivation& a, bool keep_core_graph) const {
  AutocastScope autocast(numerics_.autocast, numerics_.param_dtype, device_);
  const auto& l = layouts_[a.unit];
  const Parts p = split_params(a.params, l);
  if (a.unit == 0) {
    a.output = embedding_forward(p, a.input);
    return;
  }
  if (a.unit == head_unit()) {
    at::Tensor table;
    if (a.borrowed.defined()) table = a.borrowed.view({model_.vocab, model_.hidden});
    a.output = head_forward(p, table, a.input, a.targets);
    a.loss = a.output.item<double>();
    return;
  }
  at::Tensor q, k, v;
  if (keep_core_graph) {
    qkv(p, l, a.input, q, k, v);
    a.output = block_rest(p, l, a.input, attention_core(q, k, v));
    return;
  }
  // Selective: the core runs without a graph; only its inputs are kept.
  qkv(p, l, a.input, a.q, a.k, a.v);
  a.q_in = a.q.detach().requires_grad_(true);
  a.k_in = a.k.detach().requires_grad_(true);
  a.v_in = a.v.detach().requires_grad_(true);
  at::Tensor core;
  {
    at::NoGradGuard no_grad;
    core = attention_core(a.q_in, a.k_in, a.v_in);
  }
  a.core_in = core.detach().requires_grad_(true);
  a.output = block_rest(p, l, a.input, a.core_in);
}

UnitActivation GptUnits::forward(int unit, const at::Tensor& params, const at::Tensor& borrowed,
                                 const at::Tensor& input, const at::Tensor& targets,
                                 scenario::Recompute recompute) const {
  UnitActivation a;
  a.unit = unit;
  a.targets = targets;
  const bool block = unit > 0 && unit < head_unit();
  if (unit == 0) {
    a.input = input;
  } else {
    auto x = numerics_.fp32_compute ? input.to(at::kFloat) : input;
    a.input = x.detach().requires_grad_(true);
  }
  if (borrowed.defined()) a.borrowed = param_leaf(borrowed);
  if (block && recompute == scenario::Recompute::full) {
    // Keep only the input; the recompute op rebuilds the graph before backward.
    at::NoGradGuard no_grad;
    a.params = numerics_.fp32_compute ? params.to(at::kFloat) : params;
    run_forward(a, true);
    a.params = at::Tensor();
    a.needs_recompute = true;
    return a;
  }
  a.params = param_leaf(params);
  const bool selective = block && recompute == scenario::Recompute::selective;
  run_forward(a, !selective);
  a.needs_recompute = selective;
  return a;
}

void GptUnits::recompute(UnitActivation& a, const at::Tensor& params) const {
  if (!a.needs_recompute) return;
  if (a.q_in.defined()) {
    AutocastScope autocast(numerics_.autocast, numerics_.param_dtype, device_);
    a.core_out = attention_core(a.q_in, a.k_in, a.v_in);
  } else {
    a.params = param_leaf(params);
    run_forward(a, true);
  }
  a.needs_recompute = false;
}

UnitGrads GptUnits::backward(UnitActivation& a, const at::Tensor& grad_output) const {
  if (a.needs_recompute) {
    throw RuntimeError("unit " + std::to_string(a.unit) +
                       ": backward before its recomputation (the plan orders them)");
  }
  namespace ag = torch::autograd;
  UnitGrads g;
  auto gout = grad_output.to(a.output.scalar_type());
  if (a.unit == 0) {
    g.params = ag::grad({a.output}, {a.params}, {gout}, false, false, true)[0];
  } else if (a.core_in.defined()) {
    // Selective: rest of the block, then the rebuilt core, then the projections.
    auto rest = ag::grad({a.output}, {a.params, a.input, a.core_in}, {gout}, false, false, true);
    auto core = ag::grad({a.core_out}, {a.q_in, a.k_in, a.v_in}, {rest[2]}, false, false, true);
    auto proj = ag::grad({a.q, a.k, a.v}, {a.params, a.input},
                         {or_zeros(core[0], a.q), or_zeros(core[1], a.k), or_zeros(core[2], a.v)},
                         false, false, true);
    g.params = or_zeros(rest[0], a.params) + or_zeros(proj[0], a.params);
    g.input = or_zeros(rest[1], a.input) + or_zeros(proj[1], a.input);
  } else {
    std::vector<at::Tensor> inputs = {a.params, a.input};
    if (a.borrowed.defined()) inputs.push_back(a.borrowed);
    auto grads = ag::grad({a.output}, inputs, {gout}, false, false, true);
    g.params = or_zeros(grads[0], a.params);
    g.input = or_zeros(grads[1], a.input);
    if (a.borrowed.defined()) g.borrowed = or_zeros(grads[2], a.borrowed);
  }
  if (g.input.defined()) g.input = to_boundary(g.input);
  // The graph is spent: drop everything it held.
  const int unit = a.unit;
  a = UnitActivation();
  a.unit = unit;
  return g;
}

}  // namespace stratagem::runtime
