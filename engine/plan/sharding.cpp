#include "engine/plan/sharding.hpp"

#include <set>

#include "engine/plan/builder.hpp"
#include "engine/scenario/error.hpp"
#include "engine/workload/weights.hpp"

namespace stratagem::plan {

namespace {

constexpr double kLossScaleBytes = 8.0;  // fp16 scale + found-inf flag

}  // namespace

void set_resident(BuildContext& ctx, int r) {
  const auto& st = ctx.strategy();
  auto& info = ctx.plan.ranks[r];
  const double psi = ctx.stage_params(ctx.layout().coords[r].stage);
  const double n = ctx.group_size(ctx.shard_group[r]);
  const double c = ctx.compute_bytes();
  auto set = [&](TensorClass cls, double bytes) { info.initial[static_cast<int>(cls)] = bytes; };
  set(TensorClass::params, c * psi / (scenario::shards_parameters(st.sharding) ? n : 1.0));
  set(TensorClass::grads, c * psi / (scenario::shards_gradients(st.sharding) ? n : 1.0));
  // The parameters whose states this rank keeps (an MoE stage's routed experts sharded over
  // the expert-data-parallel group, the rest over the shard group).
  const double opt_psi = ctx.optimizer_params(r);
  const double states = scenario::optimizer_state_bytes_per_param(st.optimizer) * opt_psi;
  const double master = scenario::has_master_weights(st) ? 4.0 * opt_psi : 0.0;
  if (st.offload_optimizer == scenario::Offload::cpu) {
    info.host_bytes = states + master;
  } else {
    set(TensorClass::optimizer, states);
    set(TensorClass::master_weights, master);
  }
  set(TensorClass::loss_scale, st.precision == scenario::Precision::fp16 ? kLossScaleBytes : 0.0);
  const Layout& L = ctx.layout();
  set(TensorClass::fp8_weights,
      workload::fp8_resident_bytes(st, L.units, L.stage_chunk_units[L.coords[r].stage]));
}

void add_parameter_gathers(BuildContext& ctx, RankDraft& d) {
  if (!ctx.gathers_params(d.rank)) return;
  const auto& st = ctx.strategy();
  const Layout& L = ctx.layout();
  const bool reshard = scenario::reshards_after_forward(st.sharding);
  const int group = ctx.shard_group[d.rank];

  // The units in the order compute needs them.
  std::vector<int> need;
  for (const Step& s : d.steps) {
    if (s.phase == Phase::forward) need.push_back(s.unit_begin);
    if (s.phase == Phase::backward && reshard) need.push_back(s.unit_begin);
  }
  std::vector<DraftRef> gathers;
  std::vector<DraftRef> consumers(need.size(), kNoDraft);
  auto make_gather = [&](std::size_t k) {
    std::vector<DraftRef> deps;
    const auto limit = static_cast<std::ptrdiff_t>(k) - 1 - st.prefetch;
    if (limit >= 0) deps.push_back(consumers[static_cast<std::size_t>(limit)]);
    const int unit = need[k];
    const double bytes = workload::gather_bytes(st, L.units[unit]);
    Collective gather = draft_collective(ctx, CollectiveKind::all_gather,
                                         CommPurpose::param_gather, group, bytes, unit, unit,
                                         unit + 1);
    if (st.fp8_all_gather && L.units[unit].linear_params > 0) gather.dtype = scenario::DType::fp8;
    gathers.push_back(d.add(
        Stream::gather, gather, std::move(deps),
        {{TensorClass::gathered_params, workload::gathered_bytes(st, L.units[unit]), false}}));
    return gathers.back();
  };
  for (std::size_t k = 0; k < need.size() && k <= static_cast<std::size_t>(st.prefetch); ++k) {
    d.prologue.push_back(make_gather(k));
  }
  std::size_t taken = 0;  // gathers handed to their consumers so far
  auto gather_for = [&](int unit) -> DraftRef {
    if (taken >= need.size() || need[taken] != unit) {
      throw RuntimeError("plan builder: gather order disagrees with compute order at unit " +
                         std::to_string(unit));
    }
    return gathers[taken++];
  };
  // `step` used the last gather handed out: the gather prefetch + 1 places later may go.
  auto consumed = [&](Step& step) {
    consumers[taken - 1] = step.last();
    const std::size_t next = taken + static_cast<std::size_t>(st.prefetch);
    if (next < need.size())
      step.after[static_cast<int>(Anchor::gather)].push_back(make_gather(next));
  };

  std::set<std::pair<int, int>> kept;  // (micro-batch, unit) gathered in forward and kept
  // A unit's recompute step (right before its backward) takes the gather both share.
  bool recompute_took = false;
  DraftRef shared = kNoDraft;
  auto gather_of = [&](const Step& s) {
    return kept.count({s.microbatch, s.unit_begin}) ? kNoDraft : gather_for(s.unit_begin);
  };
  for (Step& s : d.steps) {
    const int u = s.unit_begin;
    const double gbytes = workload::gathered_bytes(st, L.units[u]);
    switch (s.phase) {
      case Phase::forward: {
        add_dep(d, s, gather_for(u));
        if (reshard) add_effect(d, s, {TensorClass::gathered_params, -gbytes, true});
        consumed(s);
        if (!reshard) kept.insert({s.microbatch, u});
        break;
      }
      case Phase::recompute:
        shared = gather_of(s);
        recompute_took = true;
        add_dep(d, s, shared);
        break;
      case Phase::backward: {
        if (!recompute_took) shared = gather_of(s);
        recompute_took = false;
        kept.erase({s.microbatch, u});
        add_dep(d, s, shared);
        add_effect(d, s, {TensorClass::gathered_params, -gbytes, true});
        if (shared != kNoDraft) consumed(s);
        break;
      }
      default:
        break;
    }
  }
}

}  // namespace stratagem::plan
