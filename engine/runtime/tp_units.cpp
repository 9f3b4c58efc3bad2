#include "engine/runtime/tp_units.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/autograd.h>

#include "engine/runtime/autocast_scope.hpp"
#include "engine/scenario/error.hpp"

namespace stratagem::runtime {

namespace {

using K = plan::CollectiveKind;

at::Tensor or_zeros(const at::Tensor& t, const at::Tensor& like) {
  return t.defined() ? t : at::zeros_like(like);
}

}  // namespace

TpUnitRun::TpUnitRun(const GptUnits& units, int unit, const at::Tensor& params,
                     const at::Tensor& borrowed, const at::Tensor& input, const at::Tensor& targets,
                     scenario::Recompute recompute, workload::TpOverlap overlap)
    : u_(units),
      layout_(units.layout(unit)),
      unit_(unit),
      kind_(unit == 0                   ? Kind::embedding
            : unit == units.head_unit() ? Kind::head
                                        : Kind::block),
      recompute_(kind_ == Kind::block ? recompute : scenario::Recompute::none),
      sp_(units.sequence_parallel()),
      overlap_(kind_ == Kind::block ? overlap : workload::TpOverlap{}),
      params_(params),
      borrowed_(borrowed),
      input_(input),
      targets_(targets) {
  h_ = units.model().hidden;
  b_ = input.size(0);
  s_ = kind_ == Kind::embedding ? input.size(1) : units.seq_len_;
  graph_ = recompute_ != scenario::Recompute::full;
  start_forward();
}

// ---- the program runner ---------------------------------------------------------------------

void TpUnitRun::stage(std::function<void()> f, bool forward) {
  Item it;
  if (forward) {
    it.stage = [this, f = std::move(f)] {
      AutocastScope autocast(u_.numerics_.autocast, u_.numerics_.param_dtype, u_.device_);
      at::AutoGradMode grad(graph_);
      f();
    };
  } else {
    it.stage = std::move(f);
  }
  program_.push_back(std::move(it));
}

void TpUnitRun::collective(plan::CollectiveKind kind, std::function<at::Tensor()> send,
                           std::function<void(const at::Tensor&)> receive, comm::ReduceOp op) {
  Item it;
  it.kind = kind;
  it.op = op;
  it.send = std::move(send);
  it.receive = std::move(receive);
  program_.push_back(std::move(it));
}

void TpUnitRun::run_stages() {
  while (at_ < program_.size() && program_[at_].stage) program_[at_++].stage();
}

TpUnitRun::Item* TpUnitRun::owed_beside_piece() {
  // The piece depends on what precedes the collective, not on the collective: the executor
  // may run it before the collective is issued, while it is in flight or after it is done
  // (nothing else of the chain runs before the piece after it, which waits for both).
  for (std::size_t k : {at_, at_ - 1}) {
    if (k < program_.size() && !program_[k].stage && program_[k].beside &&
        !program_[k].beside_ran) {
      return &program_[k];
    }
  }
  return nullptr;
}

void TpUnitRun::compute() {
  if (Item* owed = owed_beside_piece()) {
    owed->beside_ran = true;  // its weight gradient came with the data gradient
    return;
  }
  if (at_ >= program_.size() || !program_[at_].stage) {
    throw RuntimeError("unit " + std::to_string(unit_) + ": the plan runs a compute piece where " +
                       (at_ >= program_.size()
                            ? std::string("the unit's tensor-parallel chain is over")
                            : std::string("the runtime expects a ") + plan::to_string(program_[at_].kind)));
  }
  run_stages();
}

TpSend TpUnitRun::collective_input(plan::CollectiveKind kind) {
  run_stages();
  if (at_ >= program_.size() || program_[at_].kind != kind) {
    throw RuntimeError("unit " + std::to_string(unit_) + ": the plan runs a " +
                       std::string(plan::to_string(kind)) + " where the runtime's tensor-parallel chain " +
                       (at_ >= program_.size() ? std::string("is over")
                                               : std::string("expects a ") + plan::to_string(program_[at_].kind)));
  }
  TpSend out;
  out.op = program_[at_].op;
  out.input = program_[at_].send();
  return out;
}

void TpUnitRun::collective_done(const at::Tensor& result) {
  program_[at_].receive(result);
  ++at_;
}

// ---- tensor helpers -------------------------------------------------------------------------

at::Tensor TpUnitRun::leaf(const at::Tensor& t) const {
  auto x = t.detach();
  if (u_.numerics_.fp32_compute && x.is_floating_point()) x = x.to(at::kFloat);
  return graph_ ? x.requires_grad_(true) : x;
}

at::Tensor TpUnitRun::wire(const at::Tensor& t) const {
  auto out = at::empty(t.sizes(), t.options().dtype(u_.numerics_.boundary_dtype));
  out.copy_(t.detach());
  return out;
}

at::Tensor TpUnitRun::seq_major(const at::Tensor& t) const { return wire(t.transpose(0, 1)); }

at::Tensor TpUnitRun::from_seq_major(const at::Tensor& flat, std::int64_t tokens) const {
  return flat.view({tokens, b_, h_}).transpose(0, 1);
}

at::Tensor TpUnitRun::from_batch_major(const at::Tensor& flat) const {
  return flat.view({b_, -1, h_});
}

at::Tensor TpUnitRun::grad_of(const at::Tensor& leaf) const { return or_zeros(leaf.grad(), leaf); }

at::Tensor TpUnitRun::sequence_part(const at::Tensor& full) const {
  const std::int64_t part = s_ / u_.tp_.size;
  return full.narrow(1, u_.tp_.index * part, part);
}

void TpUnitRun::backprop(const at::Tensor& out, const at::Tensor& grad) {
  if (!out.requires_grad()) return;
  torch::autograd::backward({out}, {grad.to(out.scalar_type())});
}

// ---- forward --------------------------------------------------------------------------------

void TpUnitRun::start_forward() {
  program_.clear();
  at_ = 0;
  P_ = graph_ ? leaf(params_) : (u_.numerics_.fp32_compute ? params_.to(at::kFloat) : params_);
  if (borrowed_.defined()) B_ = leaf(borrowed_);
  if (kind_ == Kind::embedding) {
    X_ = input_;
  } else {
    X_ = leaf(input_);
  }
  switch (kind_) {
    case Kind::embedding:
      forward_embedding();
      break;
    case Kind::block:
      forward_block();
      break;
    case Kind::head:
      forward_head();
      break;
  }
}

void TpUnitRun::forward_embedding() {
  const bool learned = layout_.has("wpe");
  const bool scatter = sp_ && !learned;  // Megatron-core: reduce-scatter only without positions
  stage(
      [this] {
        const auto p = u_.split_params(P_, layout_);
        const auto& table = u_.view(p, layout_, "wte");
        const std::int64_t rows = table.size(0), first = u_.tp_.index * rows;
        auto local = X_ - first;
        auto outside = (local < 0).logical_or(local >= rows);
        e_ = at::embedding(table, local.masked_fill(outside, 0))
                 .masked_fill(outside.unsqueeze(-1), 0.0);
      },
      true);
  if (scatter) {
    collective(
        K::reduce_scatter, [this] { return seq_major(e_); },
        [this](const at::Tensor& r) { W_ = leaf(from_seq_major(r, s_ / u_.tp_.size)); });
  } else {
    collective(
        K::all_reduce, [this] { return wire(e_); },
        [this](const at::Tensor& r) { W_ = leaf(from_batch_major(r)); });
  }
  stage(
      [this, learned] {
        x_ = W_;
        if (learned) {
          const auto p = u_.split_params(P_, layout_);
          x_ = W_ + u_.view(p, layout_, "wpe").narrow(0, 0, s_);
        }
        out_ = sp_ && learned ? sequence_part(x_) : x_;
      },
      true);
}

void TpUnitRun::forward_block() {
  const auto& m = u_.model();
  const std::int64_t t = u_.tp_.size;
  const std::int64_t part = s_ / t;
  auto attention = [this, &m] {
    const auto p = u_.split_params(P_, layout_);
    const std::int64_t hd = m.hidden / m.heads;
    const std::int64_t heads = m.heads / u_.tp_.size, kv_heads = m.kv_heads / u_.tp_.size;
    auto q = u_.linear(p, layout_, "attn.q", XN1_).view({b_, s_, heads, hd}).transpose(1, 2);
    auto k = u_.linear(p, layout_, "attn.k", XN1_).view({b_, s_, kv_heads, hd}).transpose(1, 2);
    auto v = u_.linear(p, layout_, "attn.v", XN1_).view({b_, s_, kv_heads, hd}).transpose(1, 2);
    if (u_.rope_cos_.defined()) {
      q = u_.rotate(q);
      k = u_.rotate(k);
    }
    if (kv_heads < heads) {  // grouped-query attention, within the rank's heads
      k = k.repeat_interleave(heads / kv_heads, 1);
      v = v.repeat_interleave(heads / kv_heads, 1);
    }
    at::Tensor core;
    if (recompute_ == scenario::Recompute::selective && graph_) {
      q_ = q;
      k_ = k;
      v_ = v;
      qi_ = q.detach().requires_grad_(true);
      ki_ = k.detach().requires_grad_(true);
      vi_ = v.detach().requires_grad_(true);
      {
        at::NoGradGuard no_grad;
        core = u_.attention_core(qi_, ki_, vi_);
      }
      core_in_ = core.detach().requires_grad_(true);
      core = core_in_;
    } else {
      core = u_.attention_core(q, k, v);
    }
    auto ctx = core.transpose(1, 2).reshape({b_, s_, heads * hd});
    po_ = at::linear(ctx, u_.view(p, layout_, "attn.o.weight"));
  };
  auto add_bias = [this](const at::Tensor& x, const char* name) {
    if (!layout_.has(name)) return x;
    const auto p = u_.split_params(P_, layout_);
    return x + u_.view(p, layout_, name);
  };
  auto mid = [this, add_bias] {
    const auto p = u_.split_params(P_, layout_);
    a_ = add_bias(X_ + O_, "attn.o.bias");
    A_ = leaf(a_);
    an_ = u_.norm(p, layout_, "ln2", A_);
  };
  auto mlp = [this, &m] {
    const auto p = u_.split_params(P_, layout_);
    at::Tensor hidden;
    if (m.mlp == scenario::MlpKind::swiglu) {
      hidden = at::silu(u_.linear(p, layout_, "mlp.gate", AN_)) * u_.linear(p, layout_, "mlp.up", AN_);
    } else {
      hidden = at::gelu(u_.linear(p, layout_, "mlp.up", AN_), "tanh");
    }
    pd_ = at::linear(hidden, u_.view(p, layout_, "mlp.down.weight"));
  };
  auto ln1 = [this] {
    const auto p = u_.split_params(P_, layout_);
    xn1_ = u_.norm(p, layout_, "ln1", X_);
  };
  // What a row-parallel output's reduction gives: the whole [b, s, h] (all-reduce) or the
  // rank's part of the sequence (reduce-scatter).
  // Under async TP the plan runs the GEMM after each all-gather and before each
  // reduce-scatter as a piece beside it (nothing to do here: see the constructor).
  auto reduce = [this, part](at::Tensor& dst, at::Tensor& src) {
    if (sp_) {
      collective(
          K::reduce_scatter, [this, &src] { return seq_major(src); },
          [this, &dst, part](const at::Tensor& r) { dst = leaf(from_seq_major(r, part)); });
    } else {
      collective(
          K::all_reduce, [this, &src] { return wire(src); },
          [this, &dst](const at::Tensor& r) { dst = leaf(from_batch_major(r)); });
    }
    program_.back().beside = overlap_.async;
  };
  auto gather = [this](at::Tensor& dst, at::Tensor& src) {
    collective(
        K::all_gather, [this, &src] { return seq_major(src); },
        [this, &dst](const at::Tensor& r) { dst = leaf(from_seq_major(r, s_)); });
    program_.back().beside = overlap_.async;
  };
  if (sp_) {
    stage(ln1, true);
    gather(XN1_, xn1_);
    stage(attention, true);
    reduce(O_, po_);
    stage(mid, true);
    gather(AN_, an_);
    stage(mlp, true);
  } else {
    stage(
        [this, ln1, attention] {
          ln1();
          XN1_ = leaf(xn1_);
          attention();
        },
        true);
    reduce(O_, po_);
    stage(
        [this, mid, mlp] {
          mid();
          AN_ = leaf(an_);
          mlp();
        },
        true);
  }
  reduce(D_, pd_);
  stage([this, add_bias] { out_ = y_ = add_bias(A_ + D_, "mlp.down.bias"); }, true);
}

void TpUnitRun::forward_head() {
  const std::int64_t vocab = u_.model().vocab;
  auto lnf = [this] {
    const auto p = u_.split_params(P_, layout_);
    xn_ = u_.norm(p, layout_, "ln_f", X_);
  };
  auto logits = [this, vocab] {
    const auto p = u_.split_params(P_, layout_);
    at::Tensor w = B_.defined()                 ? B_.view({-1, h_})
                   : layout_.has("lm_head") ? u_.view(p, layout_, "lm_head")
                                              : u_.view(p, layout_, "wte");
    const std::int64_t rows = w.size(0), first = u_.tp_.index * rows;
    logits_ = at::linear(XN_, w).to(at::kFloat);
    if (first + rows > vocab) {  // vocabulary padding: out of the softmax
      const std::int64_t real = std::clamp<std::int64_t>(vocab - first, 0, rows);
      auto cols = at::arange(rows, logits_.options().dtype(at::kLong));
      logits_ = logits_.masked_fill(cols >= real, -std::numeric_limits<double>::infinity());
    }
  };
  if (sp_) {
    stage(lnf, true);
    collective(
        K::all_gather, [this] { return seq_major(xn_); },
        [this](const at::Tensor& r) { XN_ = leaf(from_seq_major(r, s_)); });
    stage(logits, true);
  } else {
    stage(
        [this, lnf, logits] {
          lnf();
          XN_ = leaf(xn_);
          logits();
        },
        true);
  }
  auto fp32 = [](const at::Tensor& t) {
    auto out = at::empty(t.sizes(), t.options().dtype(at::kFloat));
    out.copy_(t.detach());
    return out;
  };
  // Megatron's vocab_parallel_cross_entropy: the maximum (no gradient), the target's
  // logit and Σ exp over the whole vocabulary, each an all-reduce of b·s fp32 values.
  collective(
      K::all_reduce, [this, fp32] { return fp32(std::get<0>(logits_.detach().max(-1))); },
      [this](const at::Tensor& r) {
        m_ = r.view({b_, s_});
      },
      comm::ReduceOp::max);
  stage(
      [this] {
        shifted_ = logits_ - m_.unsqueeze(-1);
        const std::int64_t rows = logits_.size(-1), first = u_.tp_.index * rows;
        auto local = targets_ - first;
        auto outside = (local < 0).logical_or(local >= rows);
        pred_ = shifted_.gather(-1, local.clamp(0, rows - 1).unsqueeze(-1))
                    .squeeze(-1)
                    .masked_fill(outside, 0.0);
      },
      true);
  collective(
      K::all_reduce, [this, fp32] { return fp32(pred_); },
      [this](const at::Tensor& r) { T_ = leaf(r.view({b_, s_})); });
  stage([this] { se_ = shifted_.exp().sum(-1); }, true);
  collective(
      K::all_reduce, [this, fp32] { return fp32(se_); },
      [this](const at::Tensor& r) { S_ = leaf(r.view({b_, s_})); });
  stage(
      [this] {
        loss_t_ = (S_.log() - T_).mean();
        loss_ = loss_t_.item<double>();
      },
      true);
}

at::Tensor TpUnitRun::output() const { return u_.to_boundary(out_); }

void TpUnitRun::begin_recompute(const at::Tensor& params) {
  if (recompute_ != scenario::Recompute::full) {
    throw RuntimeError("unit " + std::to_string(unit_) +
                       ": the plan recomputes a unit whose forward kept its graph");
  }
  params_ = params;
  graph_ = true;
  phase_ = Phase::recompute;
  start_forward();
}

void TpUnitRun::recompute_core() {
  if (recompute_ != scenario::Recompute::selective || !qi_.defined()) return;
  AutocastScope autocast(u_.numerics_.autocast, u_.numerics_.param_dtype, u_.device_);
  core_out_ = u_.attention_core(qi_, ki_, vi_);
}

}  // namespace stratagem::runtime
