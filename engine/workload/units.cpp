#include "engine/workload/units.hpp"

#include <algorithm>
#include <array>

#include "engine/scenario/expert_mesh.hpp"
#include "engine/scenario/tensor_shapes.hpp"
#include "engine/workload/kernels.hpp"

namespace stratagem::workload {

namespace {

// Kernel launches per unit and phase: a transformer block's forward is ~10 kernels
// (2 norms, QKV, attention core, projection, 2 residual adds, MLP in/act/out), backward ~2×.
constexpr int kBlockForwardKernels = 10;
constexpr int kEmbeddingKernels = 2;
constexpr int kHeadForwardKernels = 4;

// A measured model (export_scenario): its units' figures per sample, times the micro-batch;
// activations scaled from the measured element size to the scenario's.
std::vector<Unit> make_measured_units(const scenario::Scenario& s, double elem) {
  const scenario::MeasuredModel& mm = *s.model.measured;
  const double b = s.strategy.micro_batch_size;
  const double scale = elem / mm.element_bytes;
  const double tokens = b * static_cast<double>(s.training.seq_len);
  const double gemm = std::min(tokens, static_cast<double>(s.model.hidden));
  auto unit = [&](const scenario::MeasuredUnit& u, const std::string& fallback, bool block) {
    Unit out;
    out.name = u.name.empty() ? fallback : u.name;
    out.params = out.gather_params = u.params;
    out.fwd_flops = b * u.forward_flops;
    out.full_act_bytes = b * u.activation_bytes * scale;
    out.act_bytes = out.full_act_bytes;
    if (block && s.strategy.recompute == scenario::Recompute::full) {
      // Only the block's input stays; backward runs the forward again.
      out.act_bytes = std::min(out.full_act_bytes, b * mm.boundary_bytes * scale);
      out.recompute_flops = out.fwd_flops;
    }
    out.gemm_dim = out.fwd_flops > 0 ? gemm : 0.0;
    // A measured unit's FLOPs are its linear layers': their weight gradients do as many.
    out.wgrad_flops = out.fwd_flops;
    return out;
  };
  std::vector<Unit> units;
  units.reserve(mm.blocks.size() + 2);
  units.push_back(unit(mm.input, "input", false));
  for (std::size_t l = 0; l < mm.blocks.size(); ++l) {
    units.push_back(unit(mm.blocks[l], "block " + std::to_string(l + 1), true));
  }
  units.push_back(unit(mm.output, "output", false));
  return units;
}

// e·(MK + KN + MN): an M×K by K×N GEMM reads both operands and writes its output once.
double gemm_io_bytes(double m, double n, double k, double elem) {
  return elem * (m * k + k * n + m * n);
}

// One tensor-parallel rank's forward GEMMs of a quick-form block (no shape given: GPT's
// 12·h² split) on `tokens` tokens, as {m, n, k}: QKV (column-parallel), the attention output
// projection (row-parallel), MLP-in and MLP-out. Shaped blocks take theirs from their stack's
// kernels.
std::vector<std::array<double, 3>> quick_block_gemms(const scenario::ModelSpec& m, double tokens,
                                                     double t) {
  const double h = static_cast<double>(m.hidden);
  return {{tokens, 3.0 * h / t, h},
          {tokens, h, h / t},
          {tokens, 4.0 * h / t, h},
          {tokens, h, 4.0 * h / t}};
}

double quick_block_gemm_bytes(const scenario::ModelSpec& m, double tokens, double t, double elem) {
  double bytes = 0;
  for (const auto& [gm, gn, gk] : quick_block_gemms(m, tokens, t))
    bytes += gemm_io_bytes(gm, gn, gk, elem);
  return bytes;
}

// The linears torchtitan's per-op selective checkpointing runs again in backward (those
// scenario::per_op_checkpoint_saves does not save), as {tokens, out, in} on one TP rank.
std::vector<std::array<double, 3>> recomputed_linears(const scenario::ModelSpec& m, double tokens,
                                                      int tp) {
  const std::vector<scenario::LinearShape> linears = scenario::block_linears(m, tp);
  std::vector<std::array<double, 3>> gemms;
  for (std::size_t i = 0; i < linears.size(); ++i) {
    if (!scenario::per_op_checkpoint_saves(m, i))
      gemms.push_back({tokens, linears[i].out, linears[i].in});
  }
  return gemms;
}

// The forward GEMMs {m, n, k} as a mix, and their backward: each m×k by k×n product's input
// gradient (m×n by n×k) and weight gradient (k×m by m×n), as autograd runs a linear layer.
GemmMixPtr forward_mix(const std::vector<std::array<double, 3>>& gemms, bool wide) {
  GemmMix mix;
  for (const auto& [m, n, k] : gemms) mix.push_back({m, n, k, 2.0 * m * n * k, wide});
  return gemm_mix(std::move(mix));
}

GemmMixPtr backward_mix(const std::vector<std::array<double, 3>>& gemms, bool wide) {
  GemmMix mix;
  for (const auto& [m, n, k] : gemms) {
    mix.push_back({m, k, n, 2.0 * m * n * k, wide});
    mix.push_back({k, n, m, 2.0 * m * n * k, wide});
  }
  return gemm_mix(std::move(mix));
}

// The input-gradient (dgrad) half of backward_mix.
GemmMixPtr input_mix(const std::vector<std::array<double, 3>>& gemms, bool wide) {
  GemmMix mix;
  for (const auto& [m, n, k] : gemms) mix.push_back({m, k, n, 2.0 * m * n * k, wide});
  return gemm_mix(std::move(mix));
}

// The weight gradients of linear layers run as {m, n, k} forward GEMMs: their FLOPs, operand
// bytes (the same three matrices as the forward's), launches and shapes.
void take_weight_gradients(Unit& u, const std::vector<std::array<double, 3>>& gemms, bool wide,
                           double elem) {
  GemmMix mix;
  for (const auto& [m, n, k] : gemms) {
    u.wgrad_flops += 2.0 * m * n * k;
    u.wgrad_gemm_bytes += gemm_io_bytes(m, n, k, elem);
    ++u.wgrad_launches;
    mix.push_back({k, n, m, 2.0 * m * n * k, wide});
  }
  u.wgrad_gemms = gemm_mix(std::move(mix));
  u.input_gemms = input_mix(gemms, wide);
}

// The GEMM mix of `unit` for `phase` (forward, backward or recompute).
const GemmMixPtr& phase_mix(const Unit& unit, Phase phase) {
  switch (phase) {
    case Phase::forward:
      return unit.fwd_gemms;
    case Phase::backward:
      return unit.bwd_gemms;
    case Phase::backward_input:
      return unit.input_gemms;
    case Phase::backward_weight:
      return unit.wgrad_gemms;
    default:
      return unit.recompute_gemms;
  }
}

// The GEMM FLOPs `unit` runs in `phase` (forward, a backward pass or recompute).
double phase_gemm_flops(const Unit& unit, Phase phase) {
  switch (phase) {
    case Phase::forward:
      return unit.fwd_flops;
    case Phase::backward:
      return 2.0 * unit.fwd_flops;
    case Phase::backward_input:
      return 2.0 * unit.fwd_flops - unit.wgrad_flops;
    case Phase::backward_weight:
      return unit.wgrad_flops;
    default:
      return unit.recompute_flops;
  }
}

// The mix of an op over units [u0, u1): the units' own mix when they share one (a run of
// blocks), else their mixes merged; null when a unit with GEMMs in this phase has none.
GemmMixPtr op_mix(const std::vector<Unit>& units, Phase phase, int u0, int u1) {
  if (phase == Phase::optimizer || phase == Phase::loss_scale_check) return nullptr;
  std::vector<std::pair<GemmMixPtr, int>> parts;
  for (int u = u0; u < u1; ++u) {
    const Unit& unit = units[u];
    const bool has_gemms = phase_gemm_flops(unit, phase) > 0;
    if (!has_gemms) continue;
    const GemmMixPtr& mix = phase_mix(unit, phase);
    if (!mix) return nullptr;
    if (!parts.empty() && parts.back().first == mix) {
      ++parts.back().second;
    } else {
      parts.emplace_back(mix, 1);
    }
  }
  if (parts.empty()) return nullptr;
  return parts.size() == 1 ? parts.front().first : merge(parts);
}

// A shaped block's work from its stack's kernel list: what its memory-bound kernels move, its
// GEMMs' operand bytes and shapes, and how many kernels it launches.
void take_kernel_list(Unit& u, const BlockKernels& k) {
  const KernelTotals f = totals(k.forward), b = totals(k.backward);
  u.kernel_list = true;
  u.fwd_bytes = f.memory_bytes;
  u.bwd_bytes = b.memory_bytes;
  u.fwd_gemm_bytes = f.gemm_bytes;
  u.bwd_gemm_bytes = b.gemm_bytes;
  u.fwd_launches = f.launches;
  u.bwd_launches = b.launches;
  u.fwd_gemms = gemm_mix(k.forward);
  u.bwd_gemms = gemm_mix(k.backward);
  std::vector<Kernel> weight, input;
  for (const Kernel& kernel : k.backward) {
    (kernel.weight_gradient ? weight : input).push_back(kernel);
  }
  const KernelTotals w = totals(weight);
  u.wgrad_flops = w.gemm_flops;
  u.wgrad_gemm_bytes = w.gemm_bytes;
  u.wgrad_launches = w.launches;
  u.wgrad_gemms = gemm_mix(weight);
  u.input_gemms = gemm_mix(input);
}

// The attention half of activation_bytes_per_layer's table (Korthikanti et al. 2022, §4.1:
// its norm's input 2, QKV's input 2, Q and K 4/t, V 2/t, the projection's input 2/t, the
// dropout mask 1 — 5c + 8/t bytes per s·b·h, c = 1/t with sequence parallelism, else 1 —
// and the scores), with everything else as that function has it: under full recomputation
// the block keeps its input alone.
double attention_activation_bytes(const scenario::Scenario& s, scenario::Recompute recompute,
                                  double elem, const scenario::ActivationLayout& layout) {
  const auto& m = s.model;
  const double seq = static_cast<double>(s.training.seq_len), b = s.strategy.micro_batch_size;
  const double scale = elem / 2.0, t = layout.tp, local = seq / layout.cp;
  const double c = layout.sequence_parallel ? 1.0 / t : 1.0;
  const double sbh = local * b * static_cast<double>(m.hidden);
  if (recompute == scenario::Recompute::full) return 2.0 * c * sbh * scale;
  double bytes = sbh * (5.0 * c + 8.0 / t) * scale;
  if (layout.fp8_inputs) bytes -= sbh * (c + 1.0 / t);  // QKV's and the projection's inputs
  if (recompute == scenario::Recompute::selective) return bytes;
  const double a = static_cast<double>(m.heads);
  if (layout.flash) return bytes + 4.0 * a / t * local * b;
  return bytes + 5.0 * a * seq * seq * b / t * scale;
}

// An MoE block (model.moe) on one rank: the dense block's attention half, the MoE half from its
// stack's kernel graph (block_moe.cpp) — the router, the rank's share of the routed experts
// (expert_mesh.hpp), the shared experts. Its GEMM FLOPs are what the rank runs: the busiest
// expert's rows on every local expert (moe_load_imbalance) and the router's GEMM, so they exceed
// the model's FLOP count (training_flops_per_token) when the load is not balanced.
Unit moe_block_unit(const scenario::Scenario& s, const Unit& dense, scenario::Recompute recompute,
                    double elem, const scenario::ActivationLayout& layout) {
  const auto& m = s.model;
  const auto& st = s.strategy;
  const double t = st.tp;
  const scenario::BlockParamsBreakdown p =
      scenario::block_params_breakdown(m, scenario::BlockKind::moe);
  const scenario::ExpertRankLoad load = scenario::expert_rank_load(s, elem);
  const double shared =
      p.mlp - static_cast<double>(m.moe->experts) * scenario::routed_expert_params(m);
  Unit u = dense;
  u.expert_params = load.expert_params;
  u.params = p.attention / t + p.norms + p.router + shared / t + load.expert_params;
  u.gather_params = u.params;
  u.linear_params = p.attention / t + shared / t + load.expert_params;
  const BlockKernels k = block_kernels(s, scenario::BlockKind::moe);
  take_kernel_list(u, k);
  const KernelTotals f = totals(k.forward);
  u.fwd_flops = f.gemm_flops;
  u.attn_fwd_flops = f.attention_flops;
  // The MoE half's saved tensors; among them the block's output (kept: the next block's input),
  // which stands for the MoE norm's input h1 (the same s·b·h, made in the attention half).
  double moe_saved = 0;
  for (int part = kMoePrePart; part < kBlockPartCount; ++part) moe_saved += k.saved[part];
  u.full_act_bytes =
      attention_activation_bytes(s, scenario::Recompute::none, elem, layout) + moe_saved;
  // Under full recomputation the block keeps its input alone (attention_activation_bytes's).
  u.act_bytes = attention_activation_bytes(s, recompute, elem, layout) +
                (recompute == scenario::Recompute::full ? 0.0 : moe_saved);
  switch (recompute) {
    case scenario::Recompute::full:
      u.recompute_flops = u.fwd_flops;
      u.recompute_attn_flops = u.attn_fwd_flops;
      u.recompute_gemms = u.fwd_gemms;
      break;
    case scenario::Recompute::selective:
      u.recompute_gemms = gemm_mix(k.forward, {kScoresGemm, kValuesGemm});
      break;
    default:
      break;
  }
  u.gemm_dim = std::min(dense.gemm_dim, load.expert_gemm_rows);
  return u;
}

}  // namespace

std::vector<Unit> make_units(const scenario::Scenario& s) {
  const auto& m = s.model;
  const auto& st = s.strategy;
  const double b = st.micro_batch_size;
  const double seq = static_cast<double>(s.training.seq_len);
  // A context-parallel rank holds s/cp tokens of each sequence (attending to all s keys).
  const double tokens = b * seq / st.cp;
  const double elem = st.precision == scenario::Precision::no ? 4.0 : 2.0;
  if (m.measured) return make_measured_units(s, elem);
  // One tensor-parallel rank's share (tensor_shapes.hpp); tp = 1 is the whole model.
  const int tp = st.tp;
  const double t = tp;
  const double vocab = static_cast<double>(scenario::padded_vocab(m, tp));
  const double word_table = scenario::word_table_params_tp(m, tp);
  const scenario::Recompute recompute = scenario::effective_recompute(st);
  const bool flash = st.attention == scenario::Attention::flash;
  std::vector<Unit> units;
  units.reserve(static_cast<std::size_t>(m.layers) + 2);

  Unit embedding;
  embedding.name = "embedding";
  embedding.params = scenario::embedding_params_tp(m, tp);
  embedding.gather_params = embedding.params;
  units.push_back(embedding);  // a lookup: no FLOPs; its output is block 1's saved input

  Unit block;
  block.params = scenario::block_params_tp(m, tp);
  block.gather_params = block.params;
  // The attention core, Q·Kᵀ and attention·V: 4·s·h FLOPs per token (Megatron's count, no
  // causal saving), /tp (heads are split). Eager attention runs it as batched GEMMs; the fused
  // kernel skips the masked half of a causal model's s×s blocks (FlashAttention counts it so).
  const double head_dim = static_cast<double>(scenario::attention_head_dim(m));
  const double q_width = static_cast<double>(m.heads) * head_dim;  // h unless model.head_dim
  const double core = 4.0 * tokens * seq * q_width / t;
  block.fwd_flops = tokens * scenario::block_forward_flops_per_token(m, s.training.seq_len) / t;
  if (flash) {
    block.fwd_flops -= core;
    block.attn_fwd_flops = core * (m.kind == scenario::ModelKind::decoder ? 0.5 : 1.0);
    block.attention_seq = seq;
    block.head_dim = head_dim;
    block.causal = m.kind == scenario::ModelKind::decoder;
  }
  const scenario::ActivationLayout act{tp, st.sequence_parallel, st.cp, flash,
                                       st.precision == scenario::Precision::fp8};
  block.act_bytes = scenario::activation_bytes_per_layer(m, s.training.seq_len, st.micro_batch_size,
                                                         recompute, elem, act);
  block.full_act_bytes = scenario::activation_bytes_per_layer(
      m, s.training.seq_len, st.micro_batch_size, scenario::Recompute::none, elem, act);
  switch (recompute) {
    case scenario::Recompute::none:
      block.recompute_flops = 0;
      break;
    case scenario::Recompute::full:
      block.recompute_flops = block.fwd_flops;
      block.recompute_attn_flops = block.attn_fwd_flops;
      break;
    case scenario::Recompute::selective:
      // Only the (eager) attention core, softmax(QKᵀ)·V, is recomputed: 4·b·s²·h FLOPs /tp.
      block.recompute_flops = core;
      break;
    case scenario::Recompute::selective_op: {
      // torchtitan's per-op policy: the linears it does not save run again, and so does
      // every pointwise op (and eager attention's matmuls and softmax; the fused kernel's
      // output is saved).
      for (const auto& [gm, gn, gk] : recomputed_linears(m, tokens, tp)) {
        block.recompute_flops += 2.0 * gm * gn * gk;
      }
      if (!flash) block.recompute_flops += core;
      break;
    }
  }
  // The smallest GEMM dimension; tensor parallelism shards the hidden one (QKV and MLP-in
  // outputs, projection and MLP-out inputs).
  block.gemm_dim = std::min(tokens, static_cast<double>(m.hidden) / t);
  block.linear_params = scenario::block_matmul_params(m) / t;
  if (m.params_given > 0) {
    block.fwd_gemm_bytes = quick_block_gemm_bytes(m, tokens, t, elem);
    block.fwd_gemms = forward_mix(quick_block_gemms(m, tokens, t), false);
    block.bwd_gemms = backward_mix(quick_block_gemms(m, tokens, t), false);
    take_weight_gradients(block, quick_block_gemms(m, tokens, t), false, elem);
    if (recompute == scenario::Recompute::full) block.recompute_gemms = block.fwd_gemms;
    if (recompute == scenario::Recompute::selective_op)
      block.recompute_gemms = forward_mix(recomputed_linears(m, tokens, tp), false);
  } else {
    // The stack's kernels: what its memory-bound kernels move and how many it launches.
    const BlockKernels k = block_kernels(s);
    take_kernel_list(block, k);
    // A full recompute reruns the forward; selective the eager attention core's GEMMs;
    // torchtitan's per-op policy the linears it does not save (and eager attention's core).
    if (recompute == scenario::Recompute::full) {
      block.recompute_gemms = block.fwd_gemms;
    } else if (recompute == scenario::Recompute::selective_op) {
      const GemmMixPtr core_gemms = gemm_mix(k.forward, {kScoresGemm, kValuesGemm});
      block.recompute_gemms = merge({{forward_mix(recomputed_linears(m, tokens, tp), false), 1},
                                     {flash ? nullptr : core_gemms, 1}});
    } else {
      block.recompute_gemms = gemm_mix(k.forward, {kScoresGemm, kValuesGemm});
    }
  }
  if (m.moe) {
    Unit moe = moe_block_unit(s, block, recompute, elem, act);
    for (std::int64_t l = 1; l <= m.layers; ++l) {
      Unit& unit = scenario::is_moe_block(*m.moe, l - 1) ? moe : block;
      unit.name = "block " + std::to_string(l);
      units.push_back(unit);
    }
  } else {
    for (std::int64_t l = 1; l <= m.layers; ++l) {
      block.name = "block " + std::to_string(l);
      units.push_back(block);
    }
  }

  Unit head;
  head.name = "head";
  head.params = scenario::head_params_tp(m, tp);
  // With tied embeddings split over a pipeline, the last stage keeps its own copy of the
  // word embeddings for the LM head and syncs its gradient with the first stage (Megatron).
  if (m.tied_embeddings && st.ends_apart()) head.params += word_table;
  head.gather_params = head.params;
  if (m.tied_embeddings && !st.ends_apart() && scenario::shards_parameters(st.sharding) &&
      scenario::reshards_after_forward(st.sharding)) {
    head.gather_params += word_table;
  }
  head.fwd_flops = tokens * scenario::head_forward_flops_per_token(m, s.training.seq_len);
  if (tp > 1) head.fwd_flops *= vocab / static_cast<double>(m.vocab) / t;
  head.act_bytes = head.full_act_bytes =
      m.vocab > 0
          ? scenario::head_activation_bytes(m, s.training.seq_len, st.micro_batch_size, elem, act)
          : 0.0;
  head.gemm_dim = std::min(tokens, static_cast<double>(m.hidden));
  if (head.fwd_flops > 0) {
    head.fwd_gemm_bytes = gemm_io_bytes(tokens, vocab / t, static_cast<double>(m.hidden), elem);
    // Under fp8 the head stays in 16 bits (the op's flops_16bit).
    const bool wide = scenario::gemm_dtype(st) == scenario::DType::fp8;
    const std::vector<std::array<double, 3>> logits{
        {tokens, vocab / t, static_cast<double>(m.hidden)}};
    head.fwd_gemms = forward_mix(logits, wide);
    head.bwd_gemms = backward_mix(logits, wide);
    take_weight_gradients(head, logits, wide, elem);
  }
  units.push_back(head);
  return units;
}

Compute units_work(const scenario::StrategySpec& st, const std::vector<Unit>& units, Phase phase,
                   int u0, int u1) {
  Compute c;
  c.phase = phase;
  c.unit_begin = u0;
  c.unit_end = u1;
  c.dtype = scenario::gemm_dtype(st);
  const bool fp8 = c.dtype == scenario::DType::fp8;
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
        c.bytes += unit.kernel_list ? unit.fwd_bytes : unit.full_act_bytes;
        c.gemm_bytes += unit.fwd_gemm_bytes;
        c.kernels += unit.kernel_list ? unit.fwd_launches : fwd_kernels;
        break;
      case Phase::backward:
      case Phase::backward_input:
      case Phase::backward_weight: {
        // Backward computes input and weight gradients: twice the forward's GEMM work; the
        // fused attention backward recomputes the scores first (kFlashBackwardRatio). A zero-
        // bubble schedule splits it: W is the weight-gradient GEMMs, B all the rest (B + W is
        // the whole backward).
        gemm += phase_gemm_flops(unit, phase);
        if (phase == Phase::backward_weight) {
          c.gemm_bytes += unit.wgrad_gemm_bytes;
          c.kernels += unit.wgrad_launches;
          break;
        }
        const bool input = phase == Phase::backward_input;
        c.attention_flops += kFlashBackwardRatio * unit.attn_fwd_flops;
        c.bytes += unit.kernel_list ? unit.bwd_bytes : 2.0 * unit.full_act_bytes;
        c.gemm_bytes += (unit.kernel_list ? unit.bwd_gemm_bytes : 2.0 * unit.fwd_gemm_bytes) -
                        (input ? unit.wgrad_gemm_bytes : 0.0);
        c.kernels += (unit.kernel_list ? unit.bwd_launches : 2 * fwd_kernels) -
                     (input ? unit.wgrad_launches : 0);
        break;
      }
      case Phase::recompute:
        gemm += unit.recompute_flops;
        c.attention_flops += unit.recompute_attn_flops;
        // A full recompute reruns the forward's kernels; selective only the attention core's
        // (its saved s×s tensors' traffic).
        // torchtitan's per-op checkpointing reruns every pointwise op of the forward too.
        if (unit.kernel_list && ((unit.recompute_flops >= unit.fwd_flops && unit.fwd_flops > 0) ||
                                 st.recompute == scenario::Recompute::selective_op)) {
          c.bytes += unit.fwd_bytes;
          c.kernels += unit.fwd_launches;
        } else {
          c.bytes += unit.full_act_bytes - unit.act_bytes;
          c.kernels += fwd_kernels;
        }
        if (unit.fwd_flops > 0) {
          c.gemm_bytes +=
              unit.fwd_gemm_bytes * std::min(1.0, unit.recompute_flops / unit.fwd_flops);
        }
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
  c.gemms = op_mix(units, phase, u0, u1);
  c.kernels = std::max(c.kernels, 1);
  return c;
}

}  // namespace stratagem::workload
