#include "engine/plan/tensor_parallel.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "engine/plan/schedule_pass.hpp"
#include "engine/spec/tensor_shapes.hpp"

namespace stratagem::plan {

TpChains::TpChains(const spec::Scenario& s) {
  sp_ = s.strategy.sequence_parallel;
  split_ = spec::block_split(s.model, s.training.seq_len, s.strategy.tp, sp_);
  const double tokens = static_cast<double>(s.training.seq_len) * s.strategy.micro_batch_size;
  dtype_ = spec::compute_dtype(s.strategy.precision);
  act_bytes_ = tokens * static_cast<double>(s.model.hidden) *
               spec::compute_param_bytes(s.strategy.precision);
  logit_bytes_ = tokens * 4.0;  // one fp32 value per token
}

std::vector<TpPiece> TpChains::chain(int u, bool head, bool forward) const {
  using K = CollectiveKind;
  auto compute = [](double flops, double bytes) { return TpPiece{false, flops, bytes}; };
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
  if (u == 0) {  // vocab-parallel embedding
    if (forward) return {compute(1, 1), act(sp_ ? K::reduce_scatter : K::all_reduce)};
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
  if (forward) {
    if (sp_) {
      return {act(K::all_gather), compute(fa, ba),         act(K::reduce_scatter),
              act(K::all_gather), compute(1 - fa, 1 - ba), act(K::reduce_scatter)};
    }
    return {compute(fa, ba), act(K::all_reduce), compute(1 - fa, 1 - ba), act(K::all_reduce)};
  }
  if (sp_) {
    return {act(K::all_gather), compute(1 - fa, 1 - ba), act(K::reduce_scatter),
            act(K::all_gather), compute(fa, ba),         act(K::reduce_scatter)};
  }
  return {compute(1 - fa, 1 - ba), act(K::all_reduce), compute(fa, ba), act(K::all_reduce)};
}

namespace {

class TensorParallel {
 public:
  TensorParallel(BuildContext& ctx, RankDraft& d) : ctx_(ctx), d_(d), chains_(ctx.scenario) {}

  void run() {
    // A step waited for the previous step's only op; once split, it waits for its last.
    std::map<DraftRef, DraftRef> end_of;
    for (Step& s : d_.steps) {
      for (DraftRef& dep : d_.op(s.first()).deps) {
        if (auto it = end_of.find(dep); it != end_of.end()) dep = it->second;
      }
      if (s.phase == Phase::recompute && ctx_.strategy().recompute != spec::Recompute::full) {
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
    std::vector<std::pair<Stream, Payload>> chain;
    for (int k = 0; k < s.unit_end - s.unit_begin; ++k) {
      const int u = forward ? s.unit_begin + k : s.unit_end - 1 - k;
      const Compute unit = compute_op(ctx_, s.phase, d_.stage, s.chunk, s.microbatch, u, u + 1);
      const auto parts = chains_.chain(u, u == last_unit(), forward);
      const int segments = static_cast<int>(std::count_if(
          parts.begin(), parts.end(), [](const TpPiece& p) { return !p.collective; }));
      for (const TpPiece& p : parts) {
        if (p.collective) {
          Collective c = draft_collective(ctx_, p.kind, CommPurpose::tensor_parallel,
                                          ctx_.tp_group[d_.rank], p.bytes, -1, u, u + 1);
          c.dtype = p.dtype;
          chain.emplace_back(Stream::tp, c);
          continue;
        }
        Compute c = unit;
        c.flops = unit.flops * p.flops_share;
        c.bytes = unit.bytes * p.bytes_share;
        c.kernels = std::max(1, static_cast<int>(std::lround(unit.kernels / double(segments))));
        chain.emplace_back(Stream::compute, c);
      }
    }
    // The step's op becomes the chain's first (keeping its deps and start effects); the rest
    // follow it, each waiting for the one before; end effects move to the last.
    std::vector<MemEffect> effects = std::move(d_.op(head).effects);
    d_.op(head).stream = chain.front().first;
    d_.op(head).payload = chain.front().second;
    d_.op(head).effects.clear();
    std::vector<DraftRef> body = {head};
    for (std::size_t k = 1; k < chain.size(); ++k) {
      body.push_back(d_.add(chain[k].first, chain[k].second, {body.back()}));
    }
    s.body = std::move(body);
    for (const MemEffect& e : effects) add_effect(d_, s, e);
  }

  int last_unit() const { return static_cast<int>(ctx_.layout().units.size()) - 1; }

  BuildContext& ctx_;
  RankDraft& d_;
  TpChains chains_;
};

}  // namespace

void split_tensor_parallel(BuildContext& ctx, RankDraft& d) {
  if (ctx.strategy().tp <= 1) return;
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
  const DraftRef op =
      d.add(Stream::tp,
            draft_collective(ctx, CollectiveKind::all_reduce, CommPurpose::grad_sync,
                             ctx.tp_group[d.rank], ctx.compute_bytes() * params, -1, 0, 0),
            {d.last_compute()});
  d.epilogue.push_back(op);
  d.before_step.push_back(op);
}

}  // namespace stratagem::plan
