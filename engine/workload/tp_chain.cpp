#include "engine/workload/tp_chain.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "engine/scenario/error.hpp"
#include "engine/scenario/expert_mesh.hpp"
#include "engine/workload/context_ring.hpp"

namespace stratagem::workload {

namespace {

// Appends `piece`, run as one with a compute piece before it, unless that one runs beside a
// collective (it follows an `alongside` one): what comes after it waits for that collective.
void append_joined(std::vector<TpPiece>& out, const TpPiece& piece) {
  const std::size_t n = out.size();
  if (!piece.collective && n > 0 && !out[n - 1].collective && !(n > 1 && out[n - 2].alongside)) {
    out.back().flops_share += piece.flops_share;
    out.back().bytes_share += piece.bytes_share;
    out.back().attention_share += piece.attention_share;
    return;
  }
  out.push_back(piece);
}

}  // namespace

TpChains::TpChains(const scenario::Scenario& s) {
  const auto& st = s.strategy;
  tp_ = st.tp > 1;
  sp_ = st.sequence_parallel;
  learned_positions_ = s.model.positions == scenario::PositionKind::learned;
  cp_ = st.cp;
  overlap_ = tp_overlap(st);
  split_ = scenario::block_split(s.model, s.training.seq_len, st.tp, sp_,
                                 st.attention == scenario::Attention::flash);
  // A context-parallel rank's tokens: s/cp of each sequence.
  const double tokens = static_cast<double>(s.training.seq_len) / cp_ * st.micro_batch_size;
  dtype_ = scenario::compute_dtype(st.precision);
  const double elem = scenario::compute_param_bytes(st.precision);
  act_bytes_ = tokens * static_cast<double>(s.model.hidden) * elem;
  logit_bytes_ = tokens * 4.0;  // one fp32 value per token
  kv_bytes_ = context_kv_bytes(s);
  if (s.model.moe) {
    moe_ = *s.model.moe;
    ep_ = st.ep;
    etp_ = st.etp;
    allgather_ = st.moe_dispatcher == scenario::MoeDispatcher::allgather;
    const scenario::ExpertRankLoad load = scenario::expert_rank_load(s, elem);
    dispatch_bytes_ = allgather_ ? load.tokens * static_cast<double>(s.model.hidden) * elem
                                 : load.routed * static_cast<double>(s.model.hidden) * elem;
    // Each part's share of the block's GEMM FLOPs (backward's are twice the forward's, part
    // by part) and of its memory-bound bytes, forward and backward.
    const BlockKernels k = block_kernels(s, scenario::BlockKind::moe);
    const KernelTotals total[2] = {totals(k.backward), totals(k.forward)};
    for (int forward = 0; forward < 2; ++forward) {
      const auto& list = forward ? k.forward : k.backward;
      for (const Kernel& kr : list) {
        PartShares& p = moe_parts_[forward][kr.part];
        if (kr.kind == KernelKind::gemm) p.flops += kr.flops / total[forward].gemm_flops;
        if (kr.kind == KernelKind::memory) p.bytes += kr.bytes / total[forward].memory_bytes;
      }
    }
    // The attention half's pieces as a dense block's, rescaled to its share of this block.
    const PartShares& a = moe_parts_[1][kAttentionPart];
    const double rf = a.flops / split_.attention_flops_share,
                 rb = a.bytes / split_.attention_bytes_share;
    moe_split_ = split_;
    moe_split_.attention_flops_share = a.flops;
    moe_split_.attention_bytes_share = a.bytes;
    moe_split_.qkv_flops_share *= rf;
    moe_split_.proj_flops_share *= rf;
    moe_split_.norm_bytes_share *= rb;
  }
  // The chains depend on the kind of unit (embedding, the head, a dense or an MoE block) and
  // the direction only.
  for (int kind = 0; kind < 4; ++kind) {
    if (kind == 3 && !moe_) break;
    for (const bool forward : {false, true}) {
      chains_[kind * 2 + (forward ? 1 : 0)] = make_chain(kind, forward);
    }
  }
}

std::vector<TpPiece> TpChains::attention_half(bool forward,
                                              const scenario::BlockSplit& split) const {
  const double fa = split.attention_flops_share, ba = split.attention_bytes_share;
  if (cp_ == 1) return {TpPiece{false, fa, ba, 1.0}};
  // [norm, QKV] [core ‖ ring exchange] [projection]; the core's bytes are the fused kernel's
  // (counted in its efficiency), the half's memory-bound bytes split around it.
  const double fq = split.qkv_flops_share;
  const TpPiece pre{false, fq, ba / 2, 0.0}, core{false, 0.0, 0.0, 1.0},
      post{false, fa - fq, ba / 2, 0.0};
  std::vector<TpPiece> out = {forward ? pre : post};
  for (const TpPiece& ring : context_exchange(forward, kv_bytes_, dtype_)) out.push_back(ring);
  out.push_back(core);
  out.push_back(forward ? post : pre);
  return out;
}

const std::vector<TpPiece>& TpChains::chain(int u, bool head, bool forward) const {
  const int kind = u == 0 ? 0 : head ? 1 : moe_ && scenario::is_moe_block(*moe_, u - 1) ? 3 : 2;
  return chains_[kind * 2 + (forward ? 1 : 0)];
}

std::vector<TpPiece> TpChains::moe_half(bool forward) const {
  using K = CollectiveKind;
  const auto& parts = moe_parts_[forward ? 1 : 0];
  auto compute = [&](int part) {
    return TpPiece{false, parts[part].flops, parts[part].bytes, 0.0};
  };
  auto coll = [&](K kind, PieceGroup group, double bytes) {
    TpPiece p;
    p.collective = true;
    p.kind = kind;
    p.group = group;
    p.bytes = bytes;
    p.dtype = dtype_;
    return p;
  };
  const bool shared = parts[kSharedPart].flops > 0;
  std::vector<TpPiece> out;
  auto push = [&](const TpPiece& p) { append_joined(out, p); };
  // The dispatch (forward) or the combine's backward: the tokens' way to the experts; the
  // combine or the dispatch's backward: their way back. `beside`: the shared experts run
  // beside the first collective.
  const double group_bytes = static_cast<double>(ep_) * etp_ * dispatch_bytes_;
  const double etp_bytes = static_cast<double>(etp_) * dispatch_bytes_;
  auto to_experts = [&](bool beside_shared) {
    if (ep_ * etp_ == 1) return;
    TpPiece first = allgather_ ? coll(K::all_gather, PieceGroup::ep_etp, group_bytes)
                    : ep_ > 1  ? coll(K::all_to_all, PieceGroup::ep, dispatch_bytes_)
                               : coll(K::all_gather, PieceGroup::etp, etp_bytes);
    first.alongside = beside_shared;
    out.push_back(first);
    if (beside_shared) out.push_back(compute(kSharedPart));
    if (!allgather_ && ep_ > 1 && etp_ > 1)
      out.push_back(coll(K::all_gather, PieceGroup::etp, etp_bytes));
  };
  auto from_experts = [&](bool beside_shared) {
    if (ep_ * etp_ == 1) return;
    if (allgather_) {
      out.push_back(coll(K::reduce_scatter, PieceGroup::ep_etp, group_bytes));
    } else {
      if (etp_ > 1) out.push_back(coll(K::reduce_scatter, PieceGroup::etp, etp_bytes));
      if (ep_ > 1) out.push_back(coll(K::all_to_all, PieceGroup::ep, dispatch_bytes_));
    }
    if (beside_shared) {
      out.back().alongside = true;
      out.push_back(compute(kSharedPart));
    }
  };
  const bool overlap = shared && ep_ * etp_ > 1;
  if (forward) {
    push(compute(kMoePrePart));
    if (shared && !overlap) push(compute(kSharedPart));
    to_experts(overlap);
    push(compute(kExpertsPart));
    from_experts(false);
    push(compute(kMoePostPart));
  } else {
    push(compute(kMoePostPart));
    to_experts(false);
    push(compute(kExpertsPart));
    from_experts(overlap);
    if (shared && !overlap) push(compute(kSharedPart));
    push(compute(kMoePrePart));
  }
  return out;
}

std::vector<TpPiece> TpChains::make_chain(int kind, bool forward) const {
  const int u = kind == 0 ? 0 : 1;
  const bool head = kind == 1, moe = kind == 3;
  const scenario::BlockSplit& split = moe ? moe_split_ : split_;
  using K = CollectiveKind;
  auto compute = [](double flops, double bytes) { return TpPiece{false, flops, bytes, 1.0}; };
  auto coll = [](K k, double bytes, scenario::DType dtype) {
    TpPiece p;
    p.collective = true;
    p.kind = k;
    p.bytes = bytes;
    p.dtype = dtype;
    return p;
  };
  auto act = [&](K k) { return coll(k, act_bytes_, dtype_); };
  const double fa = split.attention_flops_share, ba = split.attention_bytes_share;
  // An MoE block's halves back to back (the MoE half's backward first), the compute pieces
  // where they meet as one unless the first runs beside a collective.
  auto with_moe_half = [&](std::vector<TpPiece> attention) {
    std::vector<TpPiece> out = forward ? std::move(attention) : moe_half(false);
    const std::vector<TpPiece> rest = forward ? moe_half(true) : std::move(attention);
    for (const TpPiece& p : rest) append_joined(out, p);
    return out;
  };
  if (!tp_) {  // context parallelism alone: only a block's attention half is split
    if (u == 0 || head) return {compute(1, 1)};
    if (moe) return with_moe_half(attention_half(forward, split));
    if (cp_ == 1) return {compute(1, 1)};  // expert parallelism alone: nothing to split
    std::vector<TpPiece> out = attention_half(forward, split);
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
        out.push_back(coll(K::all_reduce, logit_bytes_, scenario::DType::fp32));
      return out;
    }
    return {compute(1, 1), act(sp_ ? K::reduce_scatter : K::all_reduce)};
  }
  const TpPiece mlp{false, 1 - fa, 1 - ba, 0.0};
  std::vector<TpPiece> out;
  auto append = [&](const std::vector<TpPiece>& pieces) {
    out.insert(out.end(), pieces.begin(), pieces.end());
  };
  const double nb = split.norm_bytes_share, fq = split.qkv_flops_share, fo = split.proj_flops_share,
               fm = split.mlp_in_flops_share, f2 = split.mlp_out_flops_share;
  auto gemm = [](double share) { return TpPiece{false, share, 0.0, 0.0}; };
  auto norm = [nb] { return TpPiece{false, 0.0, nb, 0.0}; };
  auto beside = [&](K k) {
    TpPiece p = act(k);
    p.alongside = true;
    return p;
  };
  if (forward && overlap_.async) {  // sequence parallelism (async TP needs it)
    std::vector<TpPiece> attention = attention_half(true, split);
    attention.front().flops_share -= fq;  // QKV beside the gather
    attention.front().bytes_share -= nb;  // the norm before it
    attention.back().flops_share -= fo;   // the projection beside the reduce-scatter
    out = {norm(), beside(K::all_gather), gemm(fq)};
    append(attention);
    if (moe) {
      append({beside(K::reduce_scatter), gemm(fo)});
      return with_moe_half(out);
    }
    append({beside(K::reduce_scatter), gemm(fo), norm(), beside(K::all_gather), gemm(fm),
            TpPiece{false, 1 - fa - fm - f2, 1 - ba - 2 * nb, 0.0}, beside(K::reduce_scatter),
            gemm(f2), norm()});
    return out;
  }
  if (forward) {
    if (sp_) out.push_back(act(K::all_gather));
    append(attention_half(true, split));
    out.push_back(act(sp_ ? K::reduce_scatter : K::all_reduce));
    if (moe) return with_moe_half(out);
    if (sp_) out.push_back(act(K::all_gather));
    out.push_back(mlp);
    out.push_back(act(sp_ ? K::reduce_scatter : K::all_reduce));
    return out;
  }
  // The input gradient of a column-parallel layer (MLP-in, QKV) is reduced after the compute
  // piece that ends with its data-gradient GEMM; with reduce_beside_wgrad the reduction runs
  // beside the layer's weight-gradient GEMM, cut from that piece, and the norm before the
  // layer (its backward needs the reduced gradient) follows both. Under SP the output
  // gradient of a row-parallel layer (MLP-out, projection) is gathered first; with async TP
  // beside that layer's data-gradient GEMM, cut from the piece after it. Backward GEMM FLOPs
  // are twice the forward's, so a layer's data or weight gradient is half its forward share.
  bool norm_pending = false;  // a norm's backward ends `out`: the next compute piece takes it
  auto gather_output_gradient = [&](double forward_share) {  // returns the share cut
    norm_pending = false;
    if (!overlap_.async) {
      out.push_back(act(K::all_gather));
      return 0.0;
    }
    out.push_back(beside(K::all_gather));
    out.push_back(gemm(forward_share / 2));
    return forward_share / 2;
  };
  auto reduce_input_gradient = [&](double forward_share) {
    TpPiece red = act(sp_ ? K::reduce_scatter : K::all_reduce);
    if (!overlap_.reduce_beside_wgrad) {
      out.push_back(red);
      return;
    }
    out.back().flops_share -= forward_share / 2;
    out.back().bytes_share -= nb;
    red.alongside = true;
    out.push_back(red);
    out.push_back(gemm(forward_share / 2));
    out.push_back(norm());
    norm_pending = true;
  };
  auto compute_next = [&](const std::vector<TpPiece>& pieces) {
    auto it = pieces.begin();
    if (norm_pending && !it->collective) {
      out.back().flops_share += it->flops_share;
      out.back().bytes_share += it->bytes_share;
      out.back().attention_share += it->attention_share;
      ++it;
    }
    norm_pending = false;
    out.insert(out.end(), it, pieces.end());
  };
  if (moe) {
    append(moe_half(false));
  } else {
    TpPiece mlp_rest = mlp;
    if (sp_) mlp_rest.flops_share -= gather_output_gradient(f2);
    out.push_back(mlp_rest);
    reduce_input_gradient(fm);
  }
  std::vector<TpPiece> attention = attention_half(false, split);
  if (sp_) attention.front().flops_share -= gather_output_gradient(fo);
  compute_next(attention);
  reduce_input_gradient(fq);
  return out;
}

TpOverlap tp_overlap(const scenario::StrategySpec& st) {
  TpOverlap o;
  if (st.tp <= 1) return o;
  // Megatron-LM's ColumnParallelLinear (LinearWithGradAccumulationAndAsyncCommunication) and
  // Transformer Engine's Linear / LayerNormLinear launch the input gradient's all-reduce
  // (reduce-scatter under SP) asynchronously and compute the weight gradient meanwhile.
  o.async = st.async_tp && st.sequence_parallel;
  o.reduce_beside_wgrad = o.async || st.stack == scenario::Stack::megatron ||
                          st.stack == scenario::Stack::megatron_legacy;
  return o;
}

Compute tp_piece_work(const Compute& unit, const TpPiece& p, int segments) {
  Compute c = unit;
  c.flops = unit.flops * p.flops_share;
  c.flops_16bit = unit.flops_16bit * p.flops_share;
  c.attention_flops = unit.attention_flops * p.attention_share;
  c.bytes = unit.bytes * p.bytes_share;
  c.gemm_bytes = unit.gemm_bytes * p.flops_share;  // the GEMMs' operands go with their FLOPs
  c.kernels = std::max(1, static_cast<int>(std::lround(unit.kernels / double(segments))));
  return c;
}

int compute_segments(const std::vector<TpPiece>& chain) {
  return static_cast<int>(
      std::count_if(chain.begin(), chain.end(), [](const TpPiece& p) { return !p.collective; }));
}

}  // namespace stratagem::workload
