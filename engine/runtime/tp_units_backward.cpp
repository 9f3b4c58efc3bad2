// TpUnitRun's backward programs (tp_units.hpp): the mirror of each unit's forward chain, run
// segment by segment from the leaves its collectives produced.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include "engine/runtime/tp_units.hpp"
#include "engine/scenario/error.hpp"

namespace stratagem::runtime {

namespace {

using K = plan::CollectiveKind;

}  // namespace

// ---- backward -------------------------------------------------------------------------------

void TpUnitRun::begin_backward(const at::Tensor& grad_output) {
  if (!chain_done()) {
    throw RuntimeError("unit " + std::to_string(unit_) +
                       ": backward before its forward chain is complete");
  }
  if (recompute_ == scenario::Recompute::full && phase_ != Phase::recompute) {
    throw RuntimeError("unit " + std::to_string(unit_) +
                       ": backward before its recomputation (the plan orders them)");
  }
  if (recompute_ == scenario::Recompute::selective && !core_out_.defined()) {
    throw RuntimeError("unit " + std::to_string(unit_) +
                       ": backward before its attention core was recomputed");
  }
  phase_ = Phase::backward;
  grad_out_ = grad_output;
  program_.clear();
  at_ = 0;
  switch (kind_) {
    case Kind::embedding:
      backward_embedding();
      break;
    case Kind::block:
      backward_block();
      break;
    case Kind::head:
      backward_head();
      break;
  }
}

void TpUnitRun::backward_embedding() {
  const bool learned = layout_.has("wpe");
  auto local = [this, learned](const at::Tensor& g) {  // g: the gradient of x_ (whole)
    if (learned) {
      backprop(x_, g);
      backprop(e_, grad_of(W_));
    } else {
      backprop(e_, g);
    }
  };
  if (sp_) {
    collective(
        K::all_gather, [this] { return seq_major(grad_out_); },
        [this](const at::Tensor& r) { grad_out_ = from_seq_major(r, s_); });
  }
  stage([this, local] { local(grad_out_); }, false);
}

void TpUnitRun::backward_block() {
  const std::int64_t part = s_ / u_.tp_.size;
  auto mlp = [this](const at::Tensor& g) { backprop(pd_, g); };
  auto mid = [this](const at::Tensor& g_an) {
    backprop(an_, g_an);
    backprop(a_, grad_of(A_));
  };
  auto attention = [this](const at::Tensor& g_po) {
    backprop(po_, g_po);
    if (core_in_.defined()) {
      backprop(core_out_, grad_of(core_in_));
      torch::autograd::backward({q_, k_, v_}, {grad_of(qi_), grad_of(ki_), grad_of(vi_)});
    }
  };
  // The gradient of a column-parallel input: summed over the group (all-reduce) or, under
  // SP, summed and split along the sequence (reduce-scatter), into got_[slot].
  // With overlap_.reduce_beside_wgrad the plan runs the layer's weight-gradient piece beside
  // it (nothing to do here: see the constructor), and the norm's backward after both.
  auto reduce = [this, part](const at::Tensor* leaf, int slot) {
    if (sp_) {
      collective(
          K::reduce_scatter, [this, leaf] { return seq_major(grad_of(*leaf)); },
          [this, slot, part](const at::Tensor& r) { got_[slot] = from_seq_major(r, part); });
    } else {
      collective(
          K::all_reduce, [this, leaf] { return wire(grad_of(*leaf)); },
          [this, slot](const at::Tensor& r) { got_[slot] = from_batch_major(r); });
    }
    program_.back().beside = overlap_.reduce_beside_wgrad;
  };
  // Under SP, the gradient of a row-parallel output arrives for the rank's part of the
  // sequence and is gathered whole before the row-parallel backward.
  auto gather = [this](const at::Tensor* leaf, int slot) {
    collective(
        K::all_gather, [this, leaf] { return seq_major(grad_of(*leaf)); },
        [this, slot](const at::Tensor& r) { got_[slot] = from_seq_major(r, s_); });
    program_.back().beside = overlap_.async;  // beside the row-parallel data gradient
  };
  stage([this] { backprop(y_, grad_out_); }, false);
  if (sp_) {
    gather(&D_, 0);
    stage([this, mlp] { mlp(got_[0]); }, false);
    reduce(&AN_, 1);
    stage([this, mid] { mid(got_[1]); }, false);
    gather(&O_, 2);
    stage([this, attention] { attention(got_[2]); }, false);
  } else {
    stage([this, mlp] { mlp(grad_of(D_)); }, false);
    reduce(&AN_, 1);
    stage(
        [this, mid, attention] {
          mid(got_[1]);
          attention(grad_of(O_));
        },
        false);
  }
  reduce(&XN1_, 3);
  stage([this] { backprop(xn1_, got_[3]); }, false);
}

void TpUnitRun::backward_head() {
  stage(
      [this] {
        backprop(loss_t_, grad_out_);
        torch::autograd::backward({se_, pred_}, {grad_of(S_), grad_of(T_)});
      },
      false);
  const std::int64_t part = s_ / u_.tp_.size;
  if (sp_) {
    collective(
        K::reduce_scatter, [this] { return seq_major(grad_of(XN_)); },
        [this, part](const at::Tensor& r) { got_[0] = from_seq_major(r, part); });
  } else {
    collective(
        K::all_reduce, [this] { return wire(grad_of(XN_)); },
        [this](const at::Tensor& r) { got_[0] = from_batch_major(r); });
  }
  stage([this] { backprop(xn_, got_[0]); }, false);
}

void TpUnitRun::drop_forward_state() {
  if (recompute_ != scenario::Recompute::full) return;
  for (at::Tensor* t : {&P_, &B_, &X_, &xn1_, &XN1_, &po_, &O_, &a_, &A_, &an_, &AN_, &pd_, &D_,
                        &y_, &e_, &W_, &x_, &xn_, &XN_, &logits_, &m_, &shifted_, &pred_, &T_,
                        &se_, &S_, &loss_t_, &params_}) {
    *t = at::Tensor();
  }
}

UnitGrads TpUnitRun::grads() {
  if (phase_ != Phase::backward || !chain_done()) {
    throw RuntimeError("unit " + std::to_string(unit_) + ": its backward chain is not complete");
  }
  UnitGrads g;
  g.params = grad_of(P_);
  if (B_.defined()) g.borrowed = grad_of(B_);
  if (kind_ != Kind::embedding) g.input = u_.to_boundary(grad_of(X_));
  return g;
}

}  // namespace stratagem::runtime
