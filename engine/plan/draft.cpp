#include "engine/plan/draft.hpp"

#include <algorithm>
#include <tuple>

#include "engine/scenario/error.hpp"

namespace stratagem::plan {

DraftRef RankDraft::add(Stream stream, const Payload& payload, DraftDeps deps,
                        DraftEffects effects) {
  ops.emplace_back(stream, payload, std::move(deps), std::move(effects));  // in place
  return static_cast<DraftRef>(ops.size()) - 1;
}

void add_dep(RankDraft& d, const Step& step, DraftRef dep) {
  d.op(step.first()).deps.push_back(dep);
}

DraftRef end_compute(const RankDraft& d, const Step& step) {
  for (auto it = step.body.rbegin(); it != step.body.rend(); ++it) {
    if (d.ops[static_cast<std::size_t>(*it)].stream == Stream::compute) return *it;
  }
  return step.last();
}

void add_effect(RankDraft& d, const Step& step, const MemEffect& effect) {
  d.op(effect.at_end ? end_compute(d, step) : step.first()).effects.push_back(effect);
}

Collective draft_collective(const BuildContext& ctx, CollectiveKind kind, CommPurpose purpose,
                            int group, double bytes, int bucket, int u0, int u1) {
  Collective c;
  c.kind = kind;
  c.purpose = purpose;
  c.group = group;
  c.bytes = bytes;
  c.dtype = scenario::compute_dtype(ctx.strategy().precision);
  c.bucket = bucket;
  c.unit_begin = u0;
  c.unit_end = u1;
  return c;
}

void Lowering::lower_rank(const RankDraft& d) {
  std::vector<DraftRef> order;
  order.reserve(d.ops.size());
  auto take = [&order](const std::vector<DraftRef>& refs) {
    order.insert(order.end(), refs.begin(), refs.end());
  };
  take(d.prologue);
  for (const Step& s : d.steps) {
    for (const auto& b : s.before) take(b);
    take(s.body);
    for (const auto& a : s.after) take(a);
  }
  take(d.epilogue);
  if (order.size() != d.ops.size()) {
    throw RuntimeError("plan builder: rank " + std::to_string(d.rank) + " drafted " +
                       std::to_string(d.ops.size()) + " ops but placed " +
                       std::to_string(order.size()));
  }
  reserve(d);
  next_seq_.clear();
  if (group_instances_.size() < ctx_.plan.groups.size())
    group_instances_.resize(ctx_.plan.groups.size());
  std::vector<OpId> ids(d.ops.size(), kNoOp);
  const auto base = static_cast<OpId>(ctx_.plan.ops.size());
  for (std::size_t k = 0; k < order.size(); ++k) {
    ids[static_cast<std::size_t>(order[k])] = base + static_cast<OpId>(k);
  }
  for (DraftRef r : order) emit(d.rank, d.ops[static_cast<std::size_t>(r)], ids);
}

// The plan's arrays are sized once, from the first rank's draft times the built ranks (stages
// differ by an embedding or a head), and each rank's streams from its draft: grown by doubling
// instead, a 150k-op plan touched about three times its final memory (half of the builder's
// time was the kernel zeroing fresh pages).
void Lowering::reserve(const RankDraft& d) {
  StepPlan& plan = ctx_.plan;
  std::array<std::size_t, kStreamCount> per_stream{};
  for (const DraftOp& op : d.ops) ++per_stream[static_cast<int>(op.stream)];
  auto& streams = plan.ranks[d.rank].streams;
  for (int s = 0; s < kStreamCount; ++s) {
    if (per_stream[s] > 0) streams[s].reserve(streams[s].size() + per_stream[s]);
  }
  if (!plan.ops.empty()) return;
  std::size_t deps = 0, effects = 0;
  for (const DraftOp& op : d.ops) {
    deps += op.deps.size();
    effects += op.effects.size();
  }
  std::size_t built = 0;
  for (const RankInfo& r : plan.ranks) built += r.built ? 1 : 0;
  const auto scaled = [built](std::size_t n) { return n * built + n * built / 16 + 64; };
  plan.ops.reserve(scaled(d.ops.size()));
  plan.deps.reserve(scaled(deps));
  plan.mem_effects.reserve(scaled(effects));
}

OpId Lowering::emit(int rank, const DraftOp& draft, const std::vector<OpId>& ids) {
  StepPlan& plan = ctx_.plan;
  // Built in place, its payload copy-constructed (a default Op zeroes 160 bytes first).
  Op& op = plan.ops.emplace_back(
      Op{static_cast<OpId>(plan.ops.size()), rank, draft.stream, draft.chain, draft.payload});
  op.dep_begin = static_cast<std::uint32_t>(plan.deps.size());
  for (DraftRef d : draft.deps) {
    if (d == kNoDraft) continue;
    const OpId dep = ids[static_cast<std::size_t>(d)];
    if (dep >= op.id) {
      throw RuntimeError("plan builder: op " + std::to_string(op.id) + " of rank " +
                         std::to_string(rank) + " depends on a later op");
    }
    plan.deps.push_back(dep);
  }
  op.dep_count = static_cast<std::uint32_t>(plan.deps.size()) - op.dep_begin;
  op.mem_begin = static_cast<std::uint32_t>(plan.mem_effects.size());
  for (const auto& e : draft.effects) {
    if (e.bytes != 0) plan.mem_effects.push_back(e);
  }
  op.mem_count = static_cast<std::uint32_t>(plan.mem_effects.size()) - op.mem_begin;

  if (auto* c = std::get_if<Collective>(&op.payload)) {
    auto seq_it = std::find_if(next_seq_.begin(), next_seq_.end(),
                               [&](const auto& gs) { return gs.first == c->group; });
    if (seq_it == next_seq_.end()) seq_it = next_seq_.insert(seq_it, {c->group, 0});
    const int seq = seq_it->second++;
    auto& instances = group_instances_[static_cast<std::size_t>(c->group)];
    if (seq == static_cast<int>(instances.size())) {
      CollectiveInstance inst;
      inst.group = c->group;
      inst.kind = c->kind;
      inst.bytes = c->bytes;
      plan.collectives.push_back(std::move(inst));
      instances.push_back(static_cast<int>(plan.collectives.size()) - 1);
    }
    const int index = instances[static_cast<std::size_t>(seq)];
    auto& inst = plan.collectives[static_cast<std::size_t>(index)];
    if (inst.kind != c->kind || inst.bytes != c->bytes) {
      throw RuntimeError("plan builder: members of group '" + plan.groups[c->group].label +
                         "' disagree on collective #" + std::to_string(seq));
    }
    c->instance = index;
    inst.ops.push_back(op.id);
  } else if (auto* p = std::get_if<P2P>(&op.payload)) {
    const int src = p->send ? rank : p->peer, dst = p->send ? p->peer : rank;
    auto [it, fresh] = transfer_index_.try_emplace(
        std::make_tuple(src, dst, p->gradient, p->chunk, p->microbatch), -1);
    if (fresh) {
      Transfer t;
      t.src = src;
      t.dst = dst;
      t.bytes = p->bytes;
      t.gather = p->gather;
      plan.transfers.push_back(t);
      it->second = static_cast<int>(plan.transfers.size()) - 1;
    }
    p->transfer = it->second;
    (p->send ? plan.transfers[it->second].send : plan.transfers[it->second].recv) = op.id;
  }
  plan.ranks[rank].streams[static_cast<int>(op.stream)].push_back(op.id);
  return op.id;
}

void Lowering::check_pairs() const {
  const StepPlan& plan = ctx_.plan;
  for (const auto& t : plan.transfers) {
    const bool src_built = plan.ranks[t.src].built, dst_built = plan.ranks[t.dst].built;
    if ((src_built && t.send == kNoOp) || (dst_built && t.recv == kNoOp)) {
      throw RuntimeError("plan builder: unpaired transfer " + std::to_string(t.src) + " → " +
                         std::to_string(t.dst));
    }
  }
}

}  // namespace stratagem::plan
