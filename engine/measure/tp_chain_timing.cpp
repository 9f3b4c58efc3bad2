#include "engine/measure/tp_chain_timing.hpp"

#include <chrono>
#include <memory>

#include <ATen/ATen.h>

#include "engine/measure/device_bench.hpp"
#include "engine/runtime/tp_units.hpp"
#include "engine/workload/chain_piece.hpp"
#include "engine/workload/tp_chain.hpp"

namespace stratagem::measure {

using runtime::GptUnits;
using runtime::ModelState;
using runtime::TpSend;
using runtime::TpUnitRun;
using runtime::UnitGrads;

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// What the TP group would hand back (flat, as the executor's buffers are), built locally; its
/// own time is added to `stand_in_s`.
at::Tensor stand_in(plan::CollectiveKind kind, const at::Tensor& input, int tp,
                    double& stand_in_s) {
  const auto t0 = Clock::now();
  at::Tensor out;
  switch (kind) {
    case plan::CollectiveKind::reduce_scatter:
      out = input.reshape({-1}).narrow(0, 0, input.numel() / tp).clone();
      break;
    case plan::CollectiveKind::all_gather:
      out = at::cat(std::vector<at::Tensor>(static_cast<std::size_t>(tp), input.reshape({-1})));
      break;
    default:  // all-reduce: in place, the input is the result
      out = input;
      break;
  }
  synchronize(out);
  stand_in_s += since(t0);
  return out;
}

/// Runs `run`'s current chain (pattern `chain`) and `then` (which makes the work finish) and
/// returns the seconds they took less the stand-ins'.
template <class Then>
double run_chain(TpUnitRun& run, const std::vector<workload::TpPiece>& chain, int tp, Then then) {
  double stand_in_s = 0;
  const auto t0 = Clock::now();
  for (const workload::TpPiece& p : chain) {
    if (p.collective) {
      TpSend send = run.collective_input(p.kind);
      run.collective_done(stand_in(p.kind, send.input, tp, stand_in_s));
    } else {
      run.compute();
    }
  }
  run.finish_chain();
  then();
  return since(t0) - stand_in_s;
}

}  // namespace

std::vector<std::vector<double>> time_tp_chains(const scenario::Scenario& s, const GptUnits& units,
                                                ModelState& state, const at::Tensor& input,
                                                const at::Tensor& targets, int repetitions) {
  const workload::TpChains chains(s);
  const int tp = s.strategy.tp;
  const workload::TpOverlap beside = workload::tp_overlap(s.strategy);
  const int head = units.head_unit();
  const c10::Device device = units.device();
  std::vector<std::vector<double>> t(7);
  for (int rep = 0; rep <= repetitions; ++rep) {
    state.zero_grads();
    at::Tensor borrowed;
    if (units.head_borrows_embedding()) {
      const auto& slot = units.layout(0).slot("wte");
      borrowed = state.unit_params(0).narrow(0, slot.offset, slot.numel);
    }
    double d[7];
    // forward: embedding, block, head
    TpUnitRun e(units, 0, state.unit_params(0), at::Tensor(), input, at::Tensor(),
                scenario::Recompute::none, beside);
    d[0] = run_chain(e, chains.chain(0, false, true), tp, [&] { synchronize(e.output()); });
    TpUnitRun b(units, 1, state.unit_params(1), at::Tensor(), e.output(), at::Tensor(),
                scenario::Recompute::none, beside);
    d[1] = run_chain(b, chains.chain(1, false, true), tp, [&] { synchronize(b.output()); });
    TpUnitRun h(units, head, state.unit_params(head), borrowed, b.output(), targets,
                scenario::Recompute::none, beside);
    d[2] = run_chain(h, chains.chain(head, true, true), tp, [] {});  // the loss is read
    // backward: head, block, embedding, gradients accumulated as the executor does
    at::Tensor grad = at::ones({}, at::TensorOptions().dtype(at::kFloat).device(device));
    const int order[3] = {head, 1, 0};
    TpUnitRun* runs[3] = {&h, &b, &e};
    for (int k = 0; k < 3; ++k) {
      const int unit = order[k];
      TpUnitRun& run = *runs[k];
      const auto t0 = Clock::now();
      run.begin_backward(grad);
      const double begin_s = since(t0);
      d[3 + k] = begin_s + run_chain(run, chains.chain(unit, unit == head, false), tp, [&] {
                   UnitGrads g = run.grads();
                   state.add_grad(unit, 0, g.params);
                   if (g.borrowed.defined()) {
                     state.add_grad(0, units.layout(0).slot("wte").offset, g.borrowed);
                   }
                   synchronize(g.params);
                   grad = g.input;
                 });
    }
    const auto t0 = Clock::now();
    state.optimizer_step(1.0);
    synchronize(state.unit_params(0));
    d[6] = since(t0);
    if (rep == 0) continue;  // warm-up: allocations, kernel selection
    for (int k = 0; k < 7; ++k) t[k].push_back(d[k]);
  }
  return t;
}

}  // namespace stratagem::measure
