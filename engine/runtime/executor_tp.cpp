// The tensor-parallel ops of a step (tp > 1): each unit's chain of compute pieces and TP
// collectives, as the plan marks them (plan::ChainLink), driven through TpUnitRun (tp_units.hpp),
// and the sequence-parallel gradient sync of norms and row-parallel biases. See executor.hpp.
#include <algorithm>

#include <ATen/ATen.h>

#include "engine/runtime/executor_run.hpp"
#include "engine/scenario/error.hpp"
#include "engine/workload/tp_chain.hpp"

namespace stratagem::runtime {

std::unordered_map<OpId, TpChainOp> index_tp_chains(const plan::StepPlan& plan, int rank) {
  // The tensor_parallel pass marks each piece of a unit's chain (Op::chain: its place and the
  // chain's length); a chain's pieces are contiguous in the rank's op order. The runtime drives
  // each chain through the unit's TpUnitRun, keyed by the chain's first compute piece.
  std::unordered_map<OpId, TpChainOp> piece;
  if (plan.layout.tp <= 1) return piece;
  const auto ids = rank_ops(plan, rank);
  for (std::size_t i = 0; i < ids.size();) {
    const plan::ChainLink first = plan.ops[ids[i]].chain;
    if (first.piece < 0) {
      ++i;
      continue;
    }
    const std::size_t n = static_cast<std::size_t>(first.pieces);
    if (first.piece != 0 || n == 0) {
      throw RuntimeError("rank " + std::to_string(rank) + ": " + describe_op(plan, ids[i]) +
                         " is piece " + std::to_string(first.piece) +
                         " of a chain whose start "
                         "the plan does not hold");
    }
    OpId compute_id = plan::kNoOp;
    for (std::size_t k = 0; k < n; ++k) {
      const bool in_chain = i + k < ids.size() && [&] {
        const plan::ChainLink link = plan.ops[ids[i + k]].chain;
        return link.piece == static_cast<int>(k) && link.pieces == first.pieces;
      }();
      if (!in_chain) {
        throw RuntimeError("rank " + std::to_string(rank) + ": the tensor-parallel chain of " +
                           describe_op(plan, ids[i]) + " breaks at " +
                           (i + k < ids.size() ? describe_op(plan, ids[i + k]) : "the end"));
      }
      if (compute_id == plan::kNoOp &&
          std::holds_alternative<plan::Compute>(plan.ops[ids[i + k]].payload)) {
        compute_id = ids[i + k];
      }
    }
    if (compute_id == plan::kNoOp) {
      throw RuntimeError("rank " + std::to_string(rank) + ": the tensor-parallel chain of " +
                         describe_op(plan, ids[i]) + " has no compute piece");
    }
    for (std::size_t k = 0; k < n; ++k) piece[ids[i + k]] = TpChainOp{compute_id, k + 1 == n};
    i += n;
  }
  return piece;
}

const plan::Compute& Executor::Run::tp_piece_of(OpId id) const {
  auto it = ex.tp_piece_.find(id);
  if (it == ex.tp_piece_.end()) {
    throw RuntimeError(describe_op(plan, id) + " belongs to no tensor-parallel chain");
  }
  return std::get<plan::Compute>(plan.ops[it->second.piece].payload);
}

void Executor::Run::tp_finish_chain(OpId id, TpUnitRun& run) {
  if (!ex.tp_piece_.at(id).last) return;
  run.finish_chain();
  if (!run.chain_done()) {
    throw RuntimeError(describe_op(plan, id) + " ends its tensor-parallel chain before the "
                       "runtime's unit is done");
  }
}

TpUnitRun& Executor::Run::tp_run(const plan::Op& op, const plan::Compute& c) {
  const int u = c.unit_begin;
  const auto key = unit_key(c.microbatch, u);
  auto it = tp_runs.find(key);
  const auto [first_unit, end_unit] = chunk_range(c);
  if (it == tp_runs.end()) {
    if (c.phase != plan::Phase::forward) {
      throw RuntimeError(describe_op(plan, op.id) + ": no forward of unit " + std::to_string(u));
    }
    const int head_unit = units.head_unit();
    const std::int64_t s = plan.scenario.training.seq_len;
    at::Tensor input, targets;
    if (u == 0) {
      input = batch(c.microbatch).narrow(1, 0, s);
    } else {
      if (u == first_unit) input = take_received(op, false);
      if (!input.defined()) input = take(local_hidden, key, op, "input");
    }
    if (u == head_unit) targets = batch(c.microbatch).narrow(1, 1, s);
    const auto rc = recomputed.count(key) ? scenario::effective_recompute(plan.scenario.strategy)
                                          : scenario::Recompute::none;
    tp_live_before[key] = meter.live_bytes();
    auto run =
        std::make_unique<TpUnitRun>(units, u, state.unit_params(u), borrowed_table(u), input,
                                    targets, rc, workload::tp_overlap(plan.scenario.strategy));
    return *tp_runs.emplace(key, std::move(run)).first->second;
  }
  TpUnitRun& run = *it->second;
  if (c.phase == plan::Phase::recompute && run.phase() == TpUnitRun::Phase::forward &&
      run.chain_done()) {
    tp_live_before[key] = meter.live_bytes();
    run.begin_recompute(state.unit_params(u));
  } else if (c.phase == plan::Phase::backward && run.phase() != TpUnitRun::Phase::backward &&
             run.chain_done()) {
    at::Tensor g;
    if (u == units.head_unit()) {
      const double factor = (ex.scaler_ ? ex.scaler_->scale() : 1.0) /
                            (static_cast<double>(plan.layout.dp) * plan.scenario.strategy.grad_accum);
      g = at::full({}, factor, at::TensorOptions().dtype(at::kFloat).device(ex.device_));
    } else {
      if (u == end_unit - 1) g = take_received(op, true);
      if (!g.defined()) g = take(local_grad, key, op, "gradient");
    }
    run.begin_backward(g);
  }
  return run;
}

void Executor::Run::tp_after(const plan::Op& op, const plan::Compute& c, TpUnitRun& run) {
  if (!run.chain_done()) return;
  const int u = c.unit_begin;
  const auto key = unit_key(c.microbatch, u);
  const auto [first_unit, end_unit] = chunk_range(c);
  switch (run.phase()) {
    case TpUnitRun::Phase::forward: {
      if (u == units.head_unit()) {
        out.loss_sum += run.loss();
        ++out.loss_terms;
      } else {
        at::Tensor x = run.output();
        if (u + 1 < end_unit) {
          local_hidden[unit_key(c.microbatch, u + 1)] = x;
        } else {
          produced[op.id] = x;
        }
      }
      run.drop_forward_state();
      const double kept = static_cast<double>(meter.live_bytes() - tp_live_before[key]);
      act_bytes[key] = kept;
      activation_bytes += kept;
      break;
    }
    case TpUnitRun::Phase::recompute: {
      const double kept = static_cast<double>(meter.live_bytes() - tp_live_before[key]);
      act_bytes[key] += kept;
      activation_bytes += kept;
      break;
    }
    case TpUnitRun::Phase::backward: {
      UnitGrads grads = run.grads();
      tp_runs.erase(key);
      tp_live_before.erase(key);
      state.add_grad(u, 0, grads.params);
      if (grads.borrowed.defined()) {
        state.add_grad(0, units.layout(0).slot("wte").offset, grads.borrowed);
      }
      activation_bytes -= act_bytes[key];
      act_bytes.erase(key);
      if (u == 0) break;
      if (u > first_unit) {
        local_grad[unit_key(c.microbatch, u - 1)] = grads.input;
      } else {
        produced[op.id] = grads.input;
      }
      break;
    }
  }
}

void Executor::Run::tp_compute(const plan::Op& op, const plan::Compute& c) {
  TpUnitRun& run = tp_run(op, c);
  run.compute();
  tp_finish_chain(op.id, run);
  tp_after(op, c, run);
}

void Executor::Run::start_tp_collective(OpId id) {
  const plan::Op& op = plan.ops[id];
  const auto& c = std::get<plan::Collective>(op.payload);
  const auto& members = plan.groups[c.group].ranks;
  const auto me = std::find(members.begin(), members.end(), ex.rank_);
  if (me == members.end() || me - members.begin() != units.tp().index ||
      static_cast<int>(members.size()) != units.tp().size) {
    throw RuntimeError("rank " + std::to_string(ex.rank_) + ": " + describe_op(plan, id) +
                       " is not over its tensor-parallel group in tp-index order");
  }
  const plan::Compute& piece = tp_piece_of(id);
  TpUnitRun& run = tp_run(op, piece);
  auto& r = ops[id];
  begin(id);  // what runs before the collective (a norm, a residual add) counts in its span
  TpSend send = run.collective_input(c.kind);
  const comm::GroupSpec group{members};
  const std::int64_t n = send.input.numel();
  const auto t = static_cast<std::int64_t>(members.size());
  switch (c.kind) {
    case plan::CollectiveKind::all_reduce:
      r.keep = {send.input};
      r.work = ex.comm_.all_reduce(send.input, group, send.op);
      break;
    case plan::CollectiveKind::reduce_scatter: {
      at::Tensor output = at::empty({n / t}, send.input.options());
      r.keep = {output, send.input};
      r.work = ex.comm_.reduce_scatter(output, send.input, group);
      break;
    }
    case plan::CollectiveKind::all_gather: {
      at::Tensor output = at::empty({n * t}, send.input.options());
      r.keep = {output, send.input};
      r.work = ex.comm_.all_gather(output, send.input, group);
      break;
    }
    case plan::CollectiveKind::broadcast:
    case plan::CollectiveKind::all_to_all:
      throw RuntimeError("the runtime has no use for " + describe_op(plan, id));
  }
  // The plan's bytes: the whole buffer on each rank (an all-gather's output).
  out.tp_bytes += static_cast<double>(c.kind == plan::CollectiveKind::all_gather
                                          ? r.keep[0].nbytes()
                                          : send.input.nbytes());
  issued(id);
}

void Executor::Run::complete_tp_collective(OpId id) {
  const plan::Op& op = plan.ops[id];
  const plan::Compute& piece = tp_piece_of(id);
  auto it = tp_runs.find(unit_key(piece.microbatch, piece.unit_begin));
  if (it == tp_runs.end()) throw RuntimeError(describe_op(plan, id) + ": its unit's run is gone");
  TpUnitRun& run = *it->second;
  run.collective_done(ops[id].keep[0]);
  tp_finish_chain(id, run);
  tp_after(op, piece, run);
  tp_release(id, piece);
}

void Executor::Run::tp_release(OpId id, const plan::Compute& piece) {
  // The plan frees a step's gathered parameters at its last compute piece; the unit's work
  // after its last collective (a row-parallel bias, a norm's backward) still reads them, so
  // the release waits for the chain's end.
  const auto key = unit_key(piece.microbatch, piece.unit_begin);
  for (const auto& e : plan.effects_of(plan.ops[id])) {
    if (e.cls == plan::TensorClass::gathered_params && e.bytes < 0) tp_pending_release[key] = id;
  }
  if (!ex.tp_piece_.at(id).last) return;
  auto it = tp_pending_release.find(key);
  if (it == tp_pending_release.end()) return;
  release_gathered_after(plan.ops[it->second], piece.unit_begin, piece.unit_end);
  tp_pending_release.erase(it);
}

// ---- the sequence-parallel sync of norms and row-parallel biases ---------------------------

bool Executor::Run::is_sequence_parallel_sync(const plan::Collective& c) const {
  return c.purpose == plan::CommPurpose::sequence_parallel_grads;
}

void Executor::Run::start_sequence_parallel_sync(OpId id) {
  const plan::Op& op = plan.ops[id];
  const auto& c = std::get<plan::Collective>(op.payload);
  std::vector<std::pair<int, const ParamSlot*>> slots;
  for (int u : layout.units) {
    for (const auto& s : units.layout(u).slots) {
      if (s.sequence_partial) slots.emplace_back(u, &s);
    }
  }
  sp_parts = state.resident_slot_grads(slots);
  std::int64_t total = 0;
  for (const auto& [u, s] : slots) total += s->numel;
  const double elem = static_cast<double>(c10::elementSize(units.numerics().param_dtype));
  if (static_cast<double>(total) * elem != c.bytes) {
    throw RuntimeError(describe_op(plan, id) + " carries " + std::to_string(c.bytes) +
                       " B but this rank's sequence-parallel parameters are " +
                       std::to_string(static_cast<double>(total) * elem) + " B");
  }
  at::Tensor buffer = at::zeros(
      {total}, at::TensorOptions().dtype(units.numerics().param_dtype).device(ex.device_));
  for (const auto& [view, offset] : sp_parts) buffer.narrow(0, offset, view.numel()).copy_(view);
  auto& r = ops[id];
  begin(id);
  r.keep = {buffer};
  r.work =
      ex.comm_.all_reduce(buffer, comm::GroupSpec{plan.groups[c.group].ranks}, comm::ReduceOp::sum);
  issued(id);
}

void Executor::Run::complete_sequence_parallel_sync(OpId id) {
  const at::Tensor& buffer = ops[id].keep[0];
  for (const auto& [view, offset] : sp_parts) view.copy_(buffer.narrow(0, offset, view.numel()));
  sp_parts.clear();
}

}  // namespace stratagem::runtime
