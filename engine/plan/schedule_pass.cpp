#include "engine/plan/schedule_pass.hpp"

#include <algorithm>

#include "engine/workload/schedule.hpp"
#include "engine/workload/units.hpp"

namespace stratagem::plan {

Compute compute_op(const BuildContext& ctx, Phase phase, int stage, int chunk, int mb, int u0,
                   int u1) {
  Compute c = workload::units_work(ctx.strategy(), ctx.layout().units, phase, u0, u1);
  c.stage = stage;
  c.chunk = chunk;
  c.microbatch = mb;
  return c;
}

void build_steps(const BuildContext& ctx, RankDraft& d, const workload::Granularity& g) {
  const auto& st = ctx.strategy();
  const Layout& L = ctx.layout();
  const int stage = d.stage;
  const bool recompute = scenario::effective_recompute(st) != scenario::Recompute::none;
  const auto order = workload::schedule_order(st.schedule, st.pp, stage, st.chunks, st.grad_accum);
  auto add_step = [&](Phase phase, int item, const workload::ScheduleItem& it, int u0, int u1,
                      bool first, bool chain, std::vector<MemEffect> effects) {
    Step s;
    s.phase = phase;
    s.item = item;
    s.chunk = it.chunk;
    s.microbatch = it.microbatch;
    s.unit_begin = u0;
    s.unit_end = u1;
    s.first_of_item = first;
    std::vector<DraftRef> deps;
    if (chain) deps.push_back(d.last_compute());
    s.body.push_back(d.add(Stream::compute,
                           compute_op(ctx, phase, stage, it.chunk, it.microbatch, u0, u1),
                           std::move(deps), std::move(effects)));
    d.steps.push_back(std::move(s));
  };
  for (int i = 0; i < static_cast<int>(order.size()); ++i) {
    const workload::ScheduleItem& it = order[i];
    const auto [u0, u1] = L.stage_chunk_units[stage][it.chunk];
    if (it.forward) {
      if (!g.per_unit_forward) {
        add_step(Phase::forward, i, it, u0, u1, true, true,
                 {{TensorClass::activations, ctx.units_act(u0, u1, false), true}});
      } else {
        for (int u = u0; u < u1; ++u) {
          add_step(Phase::forward, i, it, u, u + 1, u == u0, u != u0,
                   {{TensorClass::activations, L.units[u].act_bytes, true}});
        }
      }
    } else if (it.pass == workload::BackwardPass::weight) {
      // A zero-bubble W pass: the weight gradients of the chunk's units, which release the
      // activations the B pass left for them; one op, or one per unit when the last
      // micro-batch's gradients are synced unit by unit.
      const bool per_unit = it.microbatch == st.grad_accum - 1 && g.per_unit_backward_sync;
      auto released = [&](int a, int b) { return ctx.units_act(a, b, recompute); };
      if (!per_unit) {
        add_step(Phase::backward_weight, i, it, u0, u1, true, true,
                 {{TensorClass::activations, -released(u0, u1), true}});
      } else {
        for (int u = u1 - 1; u >= u0; --u) {
          add_step(Phase::backward_weight, i, it, u, u + 1, u == u1 - 1, true,
                   {{TensorClass::activations, -released(u, u + 1), true}});
        }
      }
    } else {
      const bool syncs = it.microbatch == st.grad_accum - 1;
      // A zero-bubble B pass keeps the activations for its W pass; a whole backward releases
      // them.
      const bool input = it.pass == workload::BackwardPass::input;
      const Phase phase = input ? Phase::backward_input : Phase::backward;
      const bool per_unit = syncs && !input ? g.per_unit_backward_sync : g.per_unit_backward;
      if (!per_unit) {
        std::vector<MemEffect> effects;
        if (!input)
          effects.push_back({TensorClass::activations, -ctx.units_act(u0, u1, false), true});
        add_step(phase, i, it, u0, u1, true, true, std::move(effects));
      } else {
        for (int u = u1 - 1; u >= u0; --u) {
          const Unit& unit = L.units[u];
          if (recompute && unit.recompute_flops > 0) {
            add_step(Phase::recompute, i, it, u, u + 1, u == u1 - 1, true,
                     {{TensorClass::activations, unit.full_act_bytes - unit.act_bytes, false}});
          }
          std::vector<MemEffect> effects;
          if (!input) {
            effects.push_back({TensorClass::activations,
                               -(recompute ? unit.full_act_bytes : unit.act_bytes), true});
          }
          add_step(phase, i, it, u, u + 1, u == u1 - 1, true, std::move(effects));
        }
      }
    }
    d.steps.back().last_of_item = true;
  }
}

}  // namespace stratagem::plan
