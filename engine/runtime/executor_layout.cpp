#include "engine/runtime/executor_layout.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "engine/scenario/error.hpp"

namespace stratagem::runtime {

namespace {

bool is_param_gather(const plan::Op& op) {
  const auto* c = std::get_if<plan::Collective>(&op.payload);
  return c && c->kind == plan::CollectiveKind::all_gather &&
         c->purpose == plan::CommPurpose::param_gather;
}

}  // namespace

const Segment& RankLayout::segment_of(int unit) const {
  const int s =
      unit >= 0 && unit < static_cast<int>(segment_of_unit.size()) ? segment_of_unit[unit] : -1;
  if (s < 0) {
    throw RuntimeError("rank " + std::to_string(rank) + " does not own unit " +
                       std::to_string(unit));
  }
  return segments[s];
}

std::int64_t RankLayout::offset_in_segment(int unit) const {
  const Segment& seg = segment_of(unit);
  const auto it = std::find(seg.units.begin(), seg.units.end(), unit);
  return seg.unit_offset[static_cast<std::size_t>(it - seg.units.begin())];
}

std::vector<plan::OpId> rank_ops(const plan::StepPlan& plan, int rank) {
  std::vector<plan::OpId> ids;
  for (const auto& stream : plan.ranks[rank].streams)
    ids.insert(ids.end(), stream.begin(), stream.end());
  std::sort(ids.begin(), ids.end());
  return ids;
}

RankLayout derive_rank_layout(const plan::StepPlan& plan, int rank,
                              const std::vector<std::int64_t>& unit_numel) {
  if (!plan.ranks[rank].built) {
    throw RuntimeError("rank " + std::to_string(rank) +
                       " has no ops of its own: the executor needs an unfolded plan");
  }
  const auto& L = plan.layout;
  RankLayout out;
  out.rank = rank;
  const int stage = L.coords[rank].stage;
  std::set<int> owned;
  for (const auto& [b, e] : L.stage_chunk_units[stage]) {
    for (int u = b; u < e; ++u) owned.insert(u);
  }
  out.units.assign(owned.begin(), owned.end());
  for (int u : out.units) {
    const auto planned = static_cast<std::int64_t>(std::llround(L.units[u].params));
    if (unit_numel[u] != planned) {
      throw RuntimeError("unit " + std::to_string(u) + " (" + L.units[u].name + ") has " +
                         std::to_string(unit_numel[u]) + " parameters in the runtime model but " +
                         std::to_string(planned) + " in the plan");
    }
  }

  // Segments: the unit sets of the gradient collectives, in op order; then leftovers.
  std::vector<std::vector<int>> sets;
  std::vector<std::vector<int>> groups;
  std::vector<bool> reduce_scattered;
  const auto ids = rank_ops(plan, rank);
  for (plan::OpId id : ids) {
    const auto& op = plan.ops[id];
    if (const auto* c = std::get_if<plan::Compute>(&op.payload)) {
      if (c->phase == plan::Phase::optimizer) out.optimizer_op = id;
      if (c->phase == plan::Phase::backward) {
        for (const auto& e : plan.effects_of(op)) {
          if (e.cls == plan::TensorClass::comm_buckets && e.bytes > 0) out.grads_staged = true;
        }
      }
      continue;
    }
    const auto* c = std::get_if<plan::Collective>(&op.payload);
    if (!c || c->purpose != plan::CommPurpose::grad_sync) continue;
    std::vector<int> units;
    for (int u = c->unit_begin; u < c->unit_end; ++u) {
      if (owned.count(u)) units.push_back(u);
    }
    if (units.empty()) continue;
    const auto it = std::find(sets.begin(), sets.end(), units);
    if (it != sets.end()) continue;  // a later micro-batch's sync, or HYBRID's replica step
    const bool rs = c->kind == plan::CollectiveKind::reduce_scatter;
    sets.push_back(units);
    groups.push_back(rs ? plan.groups[c->group].ranks : std::vector<int>{rank});
    reduce_scattered.push_back(rs);
  }
  for (int u : out.units) {
    const bool covered = std::any_of(sets.begin(), sets.end(), [&](const auto& s) {
      return std::find(s.begin(), s.end(), u) != s.end();
    });
    if (!covered) {
      sets.push_back({u});
      groups.push_back({rank});
      reduce_scattered.push_back(false);
    }
  }
  if (out.optimizer_op == plan::kNoOp) {
    throw RuntimeError("rank " + std::to_string(rank) + " has no optimizer op in the plan");
  }
  for (plan::OpId id : ids) {
    if (id < out.optimizer_op && is_param_gather(plan.ops[id])) out.params_sharded = true;
  }
  out.opt_sharded =
      std::any_of(reduce_scattered.begin(), reduce_scattered.end(), [](bool b) { return b; });
  if (out.opt_sharded &&
      !std::all_of(reduce_scattered.begin(), reduce_scattered.end(), [](bool b) { return b; })) {
    throw RuntimeError("rank " + std::to_string(rank) +
                       ": the plan reduce-scatters some gradient buckets and all-reduces others");
  }
  if ((out.params_sharded || out.grads_staged) && !out.opt_sharded) {
    throw RuntimeError("rank " + std::to_string(rank) +
                       ": sharded parameters or staged gradients without a reduce-scatter");
  }

  // Order segments by first unit and assign offsets.
  std::vector<std::size_t> order(sets.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    std::sort(sets[i].begin(), sets[i].end());
    order[i] = i;
  }
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return sets[a].front() < sets[b].front(); });
  out.segment_of_unit.assign(L.units.size(), -1);
  for (std::size_t i : order) {
    Segment seg;
    seg.units = sets[i];
    for (int u : seg.units) {
      if (out.segment_of_unit[u] >= 0) {
        throw RuntimeError("unit " + std::to_string(u) + " is in two gradient buckets");
      }
      out.segment_of_unit[u] = static_cast<int>(out.segments.size());
      seg.unit_offset.push_back(seg.numel);
      seg.numel += unit_numel[u];
    }
    seg.shard_group = groups[i];
    const auto pos = std::find(seg.shard_group.begin(), seg.shard_group.end(), rank);
    seg.shard_index = static_cast<int>(pos - seg.shard_group.begin());
    const auto n = static_cast<std::int64_t>(seg.shard_group.size());
    seg.padded = (seg.numel + n - 1) / n * n;
    seg.shard = seg.padded / n;
    seg.full_offset = out.full_numel;
    seg.shard_offset = out.shard_numel;
    out.full_numel += seg.padded;
    out.shard_numel += seg.shard;
    seg.opt_numel = out.opt_sharded ? seg.shard : seg.padded;
    seg.opt_offset = out.opt_sharded ? seg.shard_offset : seg.full_offset;
    out.segments.push_back(std::move(seg));
  }
  out.opt_numel = out.opt_sharded ? out.shard_numel : out.full_numel;
  return out;
}

}  // namespace stratagem::runtime
