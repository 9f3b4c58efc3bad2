#include "engine/plan/tensor_parallel.hpp"

#include <algorithm>
#include <cmath>

#include "engine/plan/schedule_pass.hpp"
#include "engine/scenario/error.hpp"
#include "engine/scenario/tensor_shapes.hpp"
#include "engine/workload/chain_piece.hpp"
#include "engine/workload/tp_chain.hpp"

namespace stratagem::plan {

namespace {

class TensorParallel {
 public:
  TensorParallel(BuildContext& ctx, RankDraft& d, const workload::TpChains& chains)
      : ctx_(ctx), d_(d), chains_(chains) {}

  void run() {
    // A step waited for the previous step's only op; once split, it waits for its last.
    std::vector<DraftRef> end_of(d_.ops.size(), kNoDraft);  // by the step's first op
    std::size_t pieces = d_.ops.size();
    for (const Step& s : d_.steps) {
      for (int u = s.unit_begin; u < s.unit_end; ++u) {
        pieces += chains_.chain(u, u == last_unit(), forward_chain(s.phase)).size();
      }
    }
    d_.ops.reserve(pieces);
    for (Step& s : d_.steps) {
      for (DraftRef& dep : d_.op(s.first()).deps) {
        if (dep >= 0 && dep < static_cast<DraftRef>(end_of.size()) && end_of[dep] != kNoDraft) {
          dep = end_of[dep];
        }
      }
      if (s.phase == Phase::recompute &&
          scenario::effective_recompute(ctx_.strategy()) != scenario::Recompute::full) {
        continue;  // selective: the attention core alone, all local
      }
      // A zero-bubble W pass: the weight-gradient GEMMs, on inputs and output gradients the
      // B pass already has (its chain gathered and reduced them), all local.
      if (s.phase == Phase::backward_weight) continue;
      const DraftRef head = s.first();
      split(s);
      end_of[head] = s.last();
    }
  }

 private:
  void split(Step& s) {
    const DraftRef head = s.first();
    const bool forward = forward_chain(s.phase);
    auto& chain = chain_;  // reused from step to step (its storage kept)
    chain.clear();
    auto& links = links_;
    links.clear();
    auto& beside = beside_;
    beside.clear();
    for (int k = 0; k < s.unit_end - s.unit_begin; ++k) {
      const int u = forward ? s.unit_begin + k : s.unit_end - 1 - k;
      const Compute unit = compute_op(ctx_, s.phase, d_.stage, s.chunk, s.microbatch, u, u + 1);
      const auto& parts = chains_.chain(u, u == last_unit(), forward);
      const int segments = workload::compute_segments(parts);
      for (std::size_t k = 0; k < parts.size(); ++k) {
        links.push_back({static_cast<std::int16_t>(k), static_cast<std::int16_t>(parts.size())});
      }
      for (const workload::TpPiece& p : parts) {
        beside.push_back(p.alongside);
        if (p.collective) {
          const auto [stream, purpose, group] = where(p.group);
          Collective c = draft_collective(ctx_, p.kind, purpose, group, p.bytes, -1, u, u + 1);
          c.dtype = p.dtype;
          chain.emplace_back(stream, c);
          continue;
        }
        chain.emplace_back(Stream::compute, workload::tp_piece_work(unit, p, segments));
      }
    }
    // The step's op becomes the chain's first (keeping its deps and start effects); the rest
    // follow it, each waiting for the one before, except that `alongside` collectives (the
    // context ring's exchange, Megatron's input-gradient reduction) and the compute piece
    // after them both wait for the piece before them, and the next piece waits for all of
    // them. End effects move to the last.
    const DraftEffects effects = d_.op(head).effects;
    d_.op(head).stream = chain.front().first;
    d_.op(head).payload = chain.front().second;
    d_.op(head).effects.clear();
    d_.op(head).chain = links.front();
    std::vector<DraftRef> body;
    body.reserve(chain.size());
    body.push_back(head);
    DraftRef critical = head;  // what the next piece waits for
    auto& alongside = alongside_;  // collectives in flight beside the next compute piece
    alongside.clear();
    bool join_next = false;           // the piece after the overlapped compute joins them
    for (std::size_t k = 1; k < chain.size(); ++k) {
      const auto& [stream, payload] = chain[k];
      if (beside[k]) {
        body.push_back(d_.add(stream, payload, {critical}));
        d_.op(body.back()).chain = links[k];
        alongside.push_back(body.back());
        continue;
      }
      DraftDeps deps = {critical};
      if (join_next) {
        deps.append(alongside.begin(), alongside.end());
        alongside.clear();
      }
      body.push_back(d_.add(stream, payload, std::move(deps)));
      d_.op(body.back()).chain = links[k];
      critical = body.back();
      join_next = !alongside.empty();
    }
    if (!alongside.empty()) {
      throw RuntimeError("plan builder: an overlapped collective ends its chain at unit " +
                         std::to_string(s.unit_begin) + " with nothing to overlap");
    }
    s.body = std::move(body);
    for (const MemEffect& e : effects) add_effect(d_, s, e);
  }

  // Forward and recompute steps run a unit's forward chain; backward and B steps its backward.
  static bool forward_chain(Phase p) { return p == Phase::forward || p == Phase::recompute; }

  int last_unit() const { return static_cast<int>(ctx_.layout().units.size()) - 1; }

  struct Where {
    Stream stream;
    CommPurpose purpose;
    int group;
  };
  // The stream, purpose and process group of a chain's collective on this rank.
  Where where(workload::PieceGroup g) const {
    const int r = d_.rank;
    switch (g) {
      case workload::PieceGroup::tp:
        return {Stream::tp, CommPurpose::tensor_parallel, ctx_.tp_group[r]};
      case workload::PieceGroup::cp:
        return {Stream::cp, CommPurpose::context_parallel, ctx_.cp_group[r]};
      case workload::PieceGroup::ep:
        return {Stream::ep, CommPurpose::expert_parallel, ctx_.ep_group[r]};
      case workload::PieceGroup::etp:
        return {Stream::ep, CommPurpose::expert_parallel, ctx_.etp_group[r]};
      case workload::PieceGroup::ep_etp:
        break;
    }
    return {Stream::ep, CommPurpose::expert_parallel, ctx_.expert_group[r]};
  }

  BuildContext& ctx_;
  RankDraft& d_;
  const workload::TpChains& chains_;
  std::vector<std::pair<Stream, Payload>> chain_;  ///< the step being split, as pieces
  std::vector<ChainLink> links_;                   ///< each piece's place in its unit's chain
  std::vector<bool> beside_;                       ///< each piece's `alongside`
  std::vector<DraftRef> alongside_;
};

}  // namespace

void split_tensor_parallel(BuildContext& ctx, RankDraft& d) {
  const auto& st = ctx.strategy();
  if (st.tp <= 1 && st.cp <= 1 && !(ctx.scenario.model.moe && st.ep * st.etp > 1)) return;
  if (!ctx.tp_chains) ctx.tp_chains = std::make_shared<const workload::TpChains>(ctx.scenario);
  TensorParallel(ctx, d, *ctx.tp_chains).run();
}

void add_sequence_parallel_norm_sync(BuildContext& ctx, RankDraft& d) {
  const auto& st = ctx.strategy();
  if (st.tp <= 1 || !st.sequence_parallel) return;
  const Layout& L = ctx.layout();
  const int last = static_cast<int>(L.units.size()) - 1;
  double params = 0;
  for (const auto& [b, e] : L.stage_chunk_units[d.stage]) {
    for (int u = b; u < e; ++u) {
      if (u == last)
        params += scenario::head_sequence_parallel_params(ctx.scenario.model);
      else if (u > 0)
        params += scenario::block_sequence_parallel_params(ctx.scenario.model);
    }
  }
  if (params <= 0) return;
  // After the data-parallel gradient sync, as Megatron's finalize_model_grads does (the
  // executor's buffers are then final; the sums commute).
  DraftDeps deps;
  deps.append(d.before_step.begin(), d.before_step.end());
  const DraftRef op =
      d.add(Stream::tp,
            draft_collective(ctx, CollectiveKind::all_reduce, CommPurpose::sequence_parallel_grads,
                             ctx.tp_group[d.rank], ctx.compute_bytes() * params, -1, 0, 0),
            std::move(deps));
  d.epilogue.push_back(op);
  d.before_step.push_back(op);
}

}  // namespace stratagem::plan
