// The compute ops of a step: unit forwards, backwards and recomputations on the rank's
// micro-batches, the optimizer and the fp16 overflow check (see executor.hpp).
#include <algorithm>
#include <set>

#include <ATen/ATen.h>

#include "engine/runtime/executor_run.hpp"
#include "engine/scenario/error.hpp"

namespace stratagem::runtime {

const at::Tensor& Executor::Run::batch(int mb) {
  auto it = batches.find(mb);
  if (it != batches.end()) return it->second;
  auto tokens = microbatch_tokens(ex.data_, plan.scenario, step, dp_index, mb);
  const std::int64_t rows = plan.scenario.strategy.micro_batch_size;
  auto t = at::tensor(tokens, at::TensorOptions().dtype(at::kLong))
               .view({rows, plan.scenario.training.seq_len + 1})
               .to(ex.device_);
  return batches.emplace(mb, t).first->second;
}

at::Tensor Executor::Run::take_received(const plan::Op& op, bool gradient) {
  for (OpId d : plan.deps_of(op)) {
    const auto* p = std::get_if<plan::P2P>(&plan.ops[d].payload);
    if (p && !p->send && p->gradient == gradient) {
      auto it = received.find(d);
      if (it == received.end()) {
        throw RuntimeError(describe_op(plan, d) + " delivered nothing to " +
                           describe_op(plan, op.id));
      }
      at::Tensor t = std::move(it->second);
      received.erase(it);
      return t;
    }
  }
  return at::Tensor();
}

std::pair<int, int> Executor::Run::chunk_range(const plan::Compute& c) const {
  return plan.layout.stage_chunk_units[c.stage][c.chunk];
}

at::Tensor Executor::Run::borrowed_table(int unit) {
  if (unit != units.head_unit() || !units.head_borrows_embedding()) return at::Tensor();
  const auto& slot = units.layout(0).slot("wte");
  return state.unit_params(0).narrow(0, slot.offset, slot.numel);
}

void Executor::Run::forward(const plan::Op& op, const plan::Compute& c) {
  const int head_unit = units.head_unit();
  at::Tensor x;
  if (c.unit_begin > 0) {
    x = take_received(op, false);
    if (!x.defined()) x = take(local_hidden, unit_key(c.microbatch, c.unit_begin), op, "input");
  }
  for (int u = c.unit_begin; u < c.unit_end; ++u) {
    const at::Tensor& tokens = (u == 0 || u == head_unit) ? batch(c.microbatch) : at::Tensor();
    const std::int64_t s = plan.scenario.training.seq_len;
    at::Tensor input = u == 0 ? tokens.narrow(1, 0, s) : x;
    at::Tensor targets = u == head_unit ? tokens.narrow(1, 1, s) : at::Tensor();
    const auto rc = recomputed.count(unit_key(c.microbatch, u))
                        ? scenario::effective_recompute(plan.scenario.strategy)
                        : scenario::Recompute::none;
    const std::int64_t before = meter.live_bytes();
    UnitActivation act =
        units.forward(u, state.unit_params(u), borrowed_table(u), input, targets, rc);
    if (u == head_unit) {
      out.loss_sum += act.loss;
      ++out.loss_terms;
    } else {
      x = units.to_boundary(act.output);
    }
    const double kept = static_cast<double>(meter.live_bytes() - before);
    act_bytes[unit_key(c.microbatch, u)] = kept;
    activation_bytes += kept;
    acts[unit_key(c.microbatch, u)] = std::move(act);
  }
  if (c.unit_end - 1 == head_unit) return;
  if (c.unit_end < chunk_range(c).second) {
    local_hidden[unit_key(c.microbatch, c.unit_end)] = x;
  } else {
    produced[op.id] = x;
  }
}

void Executor::Run::recompute(const plan::Op& op, const plan::Compute& c) {
  for (int u = c.unit_begin; u < c.unit_end; ++u) {
    const auto key = unit_key(c.microbatch, u);
    const std::int64_t before = meter.live_bytes();
    if (units.tensor_parallel()) {  // selective: the attention cores, no communication
      auto it = tp_runs.find(key);
      if (it == tp_runs.end())
        throw RuntimeError(describe_op(plan, op.id) + ": no forward to rebuild");
      it->second->recompute_core();
    } else {
      auto it = acts.find(key);
      if (it == acts.end())
        throw RuntimeError(describe_op(plan, op.id) + ": no forward to rebuild");
      units.recompute(it->second, state.unit_params(u));
    }
    const double kept = static_cast<double>(meter.live_bytes() - before);
    act_bytes[key] += kept;
    activation_bytes += kept;
  }
}

void Executor::Run::backward(const plan::Op& op, const plan::Compute& c) {
  const int head_unit = units.head_unit();
  at::Tensor g;
  if (c.unit_end - 1 != head_unit) {
    g = take_received(op, true);
    if (!g.defined()) g = take(local_grad, unit_key(c.microbatch, c.unit_end - 1), op, "gradient");
  }
  const double factor = (ex.scaler_ ? ex.scaler_->scale() : 1.0) /
                        (static_cast<double>(plan.layout.dp) * plan.scenario.strategy.grad_accum);
  for (int u = c.unit_end - 1; u >= c.unit_begin; --u) {
    auto it = acts.find(unit_key(c.microbatch, u));
    if (it == acts.end())
      throw RuntimeError(describe_op(plan, op.id) + ": no forward of unit " + std::to_string(u));
    at::Tensor gout =
        u == head_unit
            ? at::full({}, factor, at::TensorOptions().dtype(at::kFloat).device(ex.device_))
            : g;
    UnitGrads grads = units.backward(it->second, gout);
    acts.erase(it);
    state.add_grad(u, 0, grads.params);
    if (grads.borrowed.defined()) {
      state.add_grad(0, units.layout(0).slot("wte").offset, grads.borrowed);
    }
    activation_bytes -= act_bytes[unit_key(c.microbatch, u)];
    act_bytes.erase(unit_key(c.microbatch, u));
    g = grads.input;
  }
  if (c.unit_begin == 0) return;
  if (c.unit_begin > chunk_range(c).first) {
    local_grad[unit_key(c.microbatch, c.unit_begin - 1)] = g;
  } else {
    produced[op.id] = g;
  }
}

void Executor::Run::optimizer() {
  if (!ex.scaler_) {
    state.optimizer_step(1.0);
    return;
  }
  const double scale = ex.scaler_->scale();
  const bool overflow = state.overflow();
  if (!overflow) state.optimizer_step(1.0 / scale);
  ex.scaler_->update(overflow);
  state.scale_tensor().fill_(ex.scaler_->scale());
  out.skipped = overflow;
}

void Executor::Run::release_gathered_after(const plan::Op& op, int u0, int u1) {
  for (const auto& e : plan.effects_of(op)) {
    if (e.cls == plan::TensorClass::gathered_params && e.bytes < 0) {
      std::set<int> segs;
      for (int u = u0; u < u1; ++u) segs.insert(state.segment_index(u));
      if (gathers_table(u0, u1)) segs.insert(state.segment_index(0));
      for (int s : segs) state.release_gathered(s);
    }
  }
}

void Executor::Run::run_compute(OpId id) {
  const plan::Op& op = plan.ops[id];
  const auto& c = std::get<plan::Compute>(op.payload);
  begin(id);
  sample_memory();
  const bool chained = ex.tp_piece_.count(id) > 0;  // a piece of a tensor-parallel chain
  switch (c.phase) {
    case plan::Phase::forward:
      chained ? tp_compute(op, c) : forward(op, c);
      break;
    case plan::Phase::backward:
      chained ? tp_compute(op, c) : backward(op, c);
      break;
    case plan::Phase::recompute:
      chained ? tp_compute(op, c) : recompute(op, c);
      break;
    case plan::Phase::optimizer:
      optimizer();
      break;
    case plan::Phase::loss_scale_check: {
      const auto& inj = ex.options_.inject_inf_steps;
      if (std::find(inj.begin(), inj.end(), step) != inj.end()) state.inject_inf();
      state.check_overflow();
      break;
    }
    case plan::Phase::backward_input:
    case plan::Phase::backward_weight:
      throw RuntimeError("the runtime does not split backward into input and weight parts (" +
                         describe_op(plan, id) + ")");
  }
  if (chained) {
    tp_release(id, c);
  } else {
    release_gathered_after(op, c.unit_begin, c.unit_end);
  }
  finish(id, Clock::now());
  ++head[static_cast<int>(plan::Stream::compute)];
  sample_memory();
}

}  // namespace stratagem::runtime
