#include "engine/plan/schedule_pass.hpp"

#include <algorithm>

namespace stratagem::plan {

namespace {

// Kernel launches per unit and phase: a transformer block's forward is ~10 kernels
// (2 norms, QKV, attention core, projection, 2 residual adds, MLP in/act/out), backward ~2×.
constexpr int kBlockForwardKernels = 10;
constexpr int kEmbeddingKernels = 2;
constexpr int kHeadForwardKernels = 4;

}  // namespace

Compute units_work(const spec::StrategySpec& st, const std::vector<Unit>& units, Phase phase,
                   int u0, int u1) {
  Compute c;
  c.phase = phase;
  c.unit_begin = u0;
  c.unit_end = u1;
  c.dtype = spec::gemm_dtype(st);
  const bool fp8 = c.dtype == spec::DType::fp8;
  const int last = static_cast<int>(units.size()) - 1;
  c.kernels = 0;
  for (int u = u0; u < u1; ++u) {
    const Unit& unit = units[u];
    const int fwd_kernels = u == 0      ? kEmbeddingKernels
                            : u == last ? kHeadForwardKernels
                                        : kBlockForwardKernels;
    // Under fp8 only the blocks' linear layers run in fp8; the LM head stays in 16 bits.
    double& gemm = fp8 && u == last ? c.flops_16bit : c.flops;
    switch (phase) {
      case Phase::forward:
        gemm += unit.fwd_flops;
        c.attention_flops += unit.attn_fwd_flops;
        c.bytes += unit.full_act_bytes;
        c.gemm_bytes += unit.fwd_gemm_bytes;
        c.kernels += fwd_kernels;
        break;
      case Phase::backward:
        // Backward computes input and weight gradients: twice the forward's GEMM work; the
        // fused attention backward recomputes the scores first (kFlashBackwardRatio).
        gemm += 2.0 * unit.fwd_flops;
        c.attention_flops += kFlashBackwardRatio * unit.attn_fwd_flops;
        c.bytes += 2.0 * unit.full_act_bytes;
        c.gemm_bytes += 2.0 * unit.fwd_gemm_bytes;
        c.kernels += 2 * fwd_kernels;
        break;
      case Phase::recompute:
        gemm += unit.recompute_flops;
        c.attention_flops += unit.recompute_attn_flops;
        c.bytes += unit.full_act_bytes - unit.act_bytes;
        // A full recompute reruns the forward's GEMMs; selective only the attention core's.
        if (unit.fwd_flops > 0) {
          c.gemm_bytes += unit.fwd_gemm_bytes * std::min(1.0, unit.recompute_flops / unit.fwd_flops);
        }
        c.kernels += fwd_kernels;
        break;
      default:
        break;
    }
    if (unit.attn_fwd_flops > 0) {
      c.attention_seq = unit.attention_seq;
      c.head_dim = unit.head_dim;
      c.causal = unit.causal;
      c.attention_kernel = st.attention_kernel;
    }
    if (unit.gemm_dim > 0)
      c.gemm_dim = c.gemm_dim > 0 ? std::min(c.gemm_dim, unit.gemm_dim) : unit.gemm_dim;
  }
  c.kernels = std::max(c.kernels, 1);
  return c;
}

Compute compute_op(const BuildContext& ctx, Phase phase, int stage, int chunk, int mb, int u0,
                   int u1) {
  Compute c = units_work(ctx.strategy(), ctx.layout().units, phase, u0, u1);
  c.stage = stage;
  c.chunk = chunk;
  c.microbatch = mb;
  return c;
}

void build_steps(const BuildContext& ctx, RankDraft& d, const Granularity& g) {
  const auto& st = ctx.strategy();
  const Layout& L = ctx.layout();
  const int stage = d.stage;
  const bool recompute = spec::effective_recompute(st) != spec::Recompute::none;
  const auto order = schedule_order(st.schedule, st.pp, stage, st.chunks, st.grad_accum);
  auto add_step = [&](Phase phase, int item, const ScheduleItem& it, int u0, int u1, bool first,
                      bool chain, std::vector<MemEffect> effects) {
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
    const ScheduleItem& it = order[i];
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
    } else {
      const bool syncs = it.microbatch == st.grad_accum - 1;
      const bool per_unit = syncs ? g.per_unit_backward_sync : g.per_unit_backward;
      if (!per_unit) {
        add_step(Phase::backward, i, it, u0, u1, true, true,
                 {{TensorClass::activations, -ctx.units_act(u0, u1, false), true}});
      } else {
        for (int u = u1 - 1; u >= u0; --u) {
          const Unit& unit = L.units[u];
          if (recompute && unit.recompute_flops > 0) {
            add_step(Phase::recompute, i, it, u, u + 1, u == u1 - 1, true,
                     {{TensorClass::activations, unit.full_act_bytes - unit.act_bytes, false}});
          }
          add_step(Phase::backward, i, it, u, u + 1, u == u1 - 1, true,
                   {{TensorClass::activations, -(recompute ? unit.full_act_bytes : unit.act_bytes),
                     true}});
        }
      }
    }
    d.steps.back().last_of_item = true;
  }
}

}  // namespace stratagem::plan
