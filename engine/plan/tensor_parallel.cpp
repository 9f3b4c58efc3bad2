#include "engine/plan/tensor_parallel.hpp"

#include <algorithm>
#include <cmath>

#include "engine/plan/context_parallel.hpp"
#include "engine/plan/schedule_pass.hpp"
#include "engine/spec/error.hpp"
#include "engine/spec/tensor_shapes.hpp"

namespace stratagem::plan {

TpChains::TpChains(const spec::Scenario& s) {
  const auto& st = s.strategy;
  tp_ = st.tp > 1;
  sp_ = st.sequence_parallel;
  learned_positions_ = s.model.positions == spec::PositionKind::learned;
  cp_ = st.cp;
  split_ = spec::block_split(s.model, s.training.seq_len, st.tp, sp_,
                             st.attention == spec::Attention::flash);
  // A context-parallel rank's tokens: s/cp of each sequence.
  const double tokens = static_cast<double>(s.training.seq_len) / cp_ * st.micro_batch_size;
  dtype_ = spec::compute_dtype(st.precision);
  const double elem = spec::compute_param_bytes(st.precision);
  act_bytes_ = tokens * static_cast<double>(s.model.hidden) * elem;
  logit_bytes_ = tokens * 4.0;  // one fp32 value per token
  kv_bytes_ = context_kv_bytes(s);
  // The chains depend on the kind of unit (embedding 0, the head, any block: here unit 1 and
  // head false) and the direction only.
  for (int kind = 0; kind < 3; ++kind) {
    for (const bool forward : {false, true}) {
      chains_[kind * 2 + (forward ? 1 : 0)] = make_chain(kind == 0 ? 0 : 1, kind == 1, forward);
    }
  }
}

std::vector<TpPiece> TpChains::attention_half(bool forward) const {
  const double fa = split_.attention_flops_share, ba = split_.attention_bytes_share;
  if (cp_ == 1) return {TpPiece{false, fa, ba, 1.0}};
  // [norm, QKV] [core ‖ ring exchange] [projection]; the core's bytes are the fused kernel's
  // (counted in its efficiency), the half's memory-bound bytes split around it.
  const double fq = split_.qkv_flops_share;
  const TpPiece pre{false, fq, ba / 2, 0.0}, core{false, 0.0, 0.0, 1.0},
      post{false, fa - fq, ba / 2, 0.0};
  std::vector<TpPiece> out = {forward ? pre : post};
  for (const TpPiece& ring : context_exchange(forward, kv_bytes_, dtype_)) out.push_back(ring);
  out.push_back(core);
  out.push_back(forward ? post : pre);
  return out;
}

const std::vector<TpPiece>& TpChains::chain(int u, bool head, bool forward) const {
  return chains_[(u == 0 ? 0 : head ? 1 : 2) * 2 + (forward ? 1 : 0)];
}

std::vector<TpPiece> TpChains::make_chain(int u, bool head, bool forward) const {
  using K = CollectiveKind;
  auto compute = [](double flops, double bytes) { return TpPiece{false, flops, bytes, 1.0}; };
  auto coll = [](K k, double bytes, spec::DType dtype) {
    TpPiece p;
    p.collective = true;
    p.kind = k;
    p.bytes = bytes;
    p.dtype = dtype;
    return p;
  };
  auto act = [&](K k) { return coll(k, act_bytes_, dtype_); };
  const double fa = split_.attention_flops_share, ba = split_.attention_bytes_share;
  if (!tp_) {  // context parallelism alone: only a block's attention half is split
    if (u == 0 || head) return {compute(1, 1)};
    std::vector<TpPiece> out = attention_half(forward);
    const TpPiece mlp{false, 1 - fa, 1 - ba, 0.0};
    if (forward) {
      out.back().flops_share += mlp.flops_share;  // projection and MLP run back to back
      out.back().bytes_share += mlp.bytes_share;
    } else {
      out.front().flops_share += mlp.flops_share;
      out.front().bytes_share += mlp.bytes_share;
    }
    return out;
  }
  if (u == 0) {  // vocab-parallel embedding
    // Megatron-core's LanguageModelEmbedding reduce-scatters the lookup under SP only
    // without learned positions; with them it all-reduces, adds the position table and keeps
    // the rank's part of the sequence (a split, no communication). Backward: an all-gather.
    if (forward) {
      return {compute(1, 1), act(sp_ && !learned_positions_ ? K::reduce_scatter : K::all_reduce)};
    }
    if (sp_) return {act(K::all_gather), compute(1, 1)};
    return {compute(1, 1)};
  }
  if (head) {  // final norm, vocab-parallel LM head and cross-entropy
    if (forward) {
      std::vector<TpPiece> out;
      if (sp_) out.push_back(act(K::all_gather));
      out.push_back(compute(1, 1));
      for (int k = 0; k < 3; ++k)
        out.push_back(coll(K::all_reduce, logit_bytes_, spec::DType::fp32));
      return out;
    }
    return {compute(1, 1), act(sp_ ? K::reduce_scatter : K::all_reduce)};
  }
  const TpPiece mlp{false, 1 - fa, 1 - ba, 0.0};
  std::vector<TpPiece> out;
  auto append = [&](const std::vector<TpPiece>& pieces) {
    out.insert(out.end(), pieces.begin(), pieces.end());
  };
  if (forward) {
    if (sp_) out.push_back(act(K::all_gather));
    append(attention_half(true));
    out.push_back(act(sp_ ? K::reduce_scatter : K::all_reduce));
    if (sp_) out.push_back(act(K::all_gather));
    out.push_back(mlp);
    out.push_back(act(sp_ ? K::reduce_scatter : K::all_reduce));
    return out;
  }
  if (sp_) out.push_back(act(K::all_gather));
  out.push_back(mlp);
  out.push_back(act(sp_ ? K::reduce_scatter : K::all_reduce));
  if (sp_) out.push_back(act(K::all_gather));
  append(attention_half(false));
  out.push_back(act(sp_ ? K::reduce_scatter : K::all_reduce));
  return out;
}

namespace {

class TensorParallel {
 public:
  TensorParallel(BuildContext& ctx, RankDraft& d) : ctx_(ctx), d_(d), chains_(ctx.scenario) {}

  void run() {
    // A step waited for the previous step's only op; once split, it waits for its last.
    std::vector<DraftRef> end_of(d_.ops.size(), kNoDraft);  // by the step's first op
    std::size_t pieces = d_.ops.size();
    for (const Step& s : d_.steps) {
      for (int u = s.unit_begin; u < s.unit_end; ++u) {
        pieces += chains_.chain(u, u == last_unit(), s.phase != Phase::backward).size();
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
          spec::effective_recompute(ctx_.strategy()) != spec::Recompute::full) {
        continue;  // selective: the attention core alone, all local
      }
      const DraftRef head = s.first();
      split(s);
      end_of[head] = s.last();
    }
  }

 private:
  void split(Step& s) {
    const DraftRef head = s.first();
    const bool forward = s.phase != Phase::backward;
    auto& chain = chain_;  // reused from step to step (its storage kept)
    chain.clear();
    for (int k = 0; k < s.unit_end - s.unit_begin; ++k) {
      const int u = forward ? s.unit_begin + k : s.unit_end - 1 - k;
      const Compute unit = compute_op(ctx_, s.phase, d_.stage, s.chunk, s.microbatch, u, u + 1);
      const auto& parts = chains_.chain(u, u == last_unit(), forward);
      const int segments = compute_segments(parts);
      for (const TpPiece& p : parts) {
        if (p.collective) {
          const bool ring = p.context;
          Collective c = draft_collective(
              ctx_, p.kind, ring ? CommPurpose::context_parallel : CommPurpose::tensor_parallel,
              ring ? ctx_.cp_group[d_.rank] : ctx_.tp_group[d_.rank], p.bytes, -1, u, u + 1);
          c.dtype = p.dtype;
          chain.emplace_back(ring ? Stream::cp : Stream::tp, c);
          continue;
        }
        chain.emplace_back(Stream::compute, tp_piece_work(unit, p, segments));
      }
    }
    // The step's op becomes the chain's first (keeping its deps and start effects); the rest
    // follow it, each waiting for the one before, except that context collectives (the `cp`
    // stream) and the compute piece after them both wait for the piece before them, and the
    // next piece waits for all of them. End effects move to the last.
    const DraftEffects effects = d_.op(head).effects;
    d_.op(head).stream = chain.front().first;
    d_.op(head).payload = chain.front().second;
    d_.op(head).effects.clear();
    std::vector<DraftRef> body;
    body.reserve(chain.size());
    body.push_back(head);
    DraftRef critical = head;  // what the next piece waits for
    auto& alongside = alongside_;  // context collectives in flight
    alongside.clear();
    bool join_next = false;           // the piece after the overlapped compute joins them
    for (std::size_t k = 1; k < chain.size(); ++k) {
      const auto& [stream, payload] = chain[k];
      if (stream == Stream::cp) {
        body.push_back(d_.add(stream, payload, {critical}));
        alongside.push_back(body.back());
        continue;
      }
      DraftDeps deps = {critical};
      if (join_next) {
        deps.append(alongside.begin(), alongside.end());
        alongside.clear();
      }
      body.push_back(d_.add(stream, payload, std::move(deps)));
      critical = body.back();
      join_next = !alongside.empty();
    }
    if (!alongside.empty()) {
      throw RuntimeError("plan builder: a context-parallel exchange ends its chain at unit " +
                         std::to_string(s.unit_begin) + " with nothing to overlap");
    }
    s.body = std::move(body);
    for (const MemEffect& e : effects) add_effect(d_, s, e);
  }

  int last_unit() const { return static_cast<int>(ctx_.layout().units.size()) - 1; }

  BuildContext& ctx_;
  RankDraft& d_;
  TpChains chains_;
  std::vector<std::pair<Stream, Payload>> chain_;  ///< the step being split, as pieces
  std::vector<DraftRef> alongside_;
};

}  // namespace

Compute tp_piece_work(const Compute& unit, const TpPiece& p, int segments) {
  Compute c = unit;
  c.flops = unit.flops * p.flops_share;
  c.flops_16bit = unit.flops_16bit * p.flops_share;
  c.attention_flops = unit.attention_flops * p.attention_share;
  c.bytes = unit.bytes * p.bytes_share;
  c.kernels = std::max(1, static_cast<int>(std::lround(unit.kernels / double(segments))));
  return c;
}

int compute_segments(const std::vector<TpPiece>& chain) {
  return static_cast<int>(
      std::count_if(chain.begin(), chain.end(), [](const TpPiece& p) { return !p.collective; }));
}

void split_tensor_parallel(BuildContext& ctx, RankDraft& d) {
  if (ctx.strategy().tp <= 1 && ctx.strategy().cp <= 1) return;
  TensorParallel(ctx, d).run();
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
        params += spec::head_sequence_parallel_params(ctx.scenario.model);
      else if (u > 0)
        params += spec::block_sequence_parallel_params(ctx.scenario.model);
    }
  }
  if (params <= 0) return;
  // After the data-parallel gradient sync, as Megatron's finalize_model_grads does (the
  // executor's buffers are then final; the sums commute).
  DraftDeps deps;
  deps.append(d.before_step.begin(), d.before_step.end());
  const DraftRef op =
      d.add(Stream::tp,
            draft_collective(ctx, CollectiveKind::all_reduce, CommPurpose::grad_sync,
                             ctx.tp_group[d.rank], ctx.compute_bytes() * params, -1, 0, 0),
            std::move(deps));
  d.epilogue.push_back(op);
  d.before_step.push_back(op);
}

}  // namespace stratagem::plan
