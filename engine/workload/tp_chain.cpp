#include "engine/workload/tp_chain.hpp"

#include <algorithm>
#include <cmath>

#include "engine/scenario/error.hpp"
#include "engine/workload/context_ring.hpp"

namespace stratagem::workload {

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
  auto coll = [](K k, double bytes, scenario::DType dtype) {
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
  const double nb = split_.norm_bytes_share, fq = split_.qkv_flops_share,
               fo = split_.proj_flops_share, fm = split_.mlp_in_flops_share,
               f2 = split_.mlp_out_flops_share;
  auto gemm = [](double share) { return TpPiece{false, share, 0.0, 0.0}; };
  auto norm = [nb] { return TpPiece{false, 0.0, nb, 0.0}; };
  auto beside = [&](K k) {
    TpPiece p = act(k);
    p.alongside = true;
    return p;
  };
  if (forward && overlap_.async) {  // sequence parallelism (async TP needs it)
    std::vector<TpPiece> attention = attention_half(true);
    attention.front().flops_share -= fq;  // QKV beside the gather
    attention.front().bytes_share -= nb;  // the norm before it
    attention.back().flops_share -= fo;   // the projection beside the reduce-scatter
    out = {norm(), beside(K::all_gather), gemm(fq)};
    append(attention);
    append({beside(K::reduce_scatter), gemm(fo), norm(), beside(K::all_gather), gemm(fm),
            TpPiece{false, 1 - fa - fm - f2, 1 - ba - 2 * nb, 0.0}, beside(K::reduce_scatter),
            gemm(f2), norm()});
    return out;
  }
  if (forward) {
    if (sp_) out.push_back(act(K::all_gather));
    append(attention_half(true));
    out.push_back(act(sp_ ? K::reduce_scatter : K::all_reduce));
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
  TpPiece mlp_rest = mlp;
  if (sp_) mlp_rest.flops_share -= gather_output_gradient(f2);
  out.push_back(mlp_rest);
  reduce_input_gradient(fm);
  std::vector<TpPiece> attention = attention_half(false);
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
