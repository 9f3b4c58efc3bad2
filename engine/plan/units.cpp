// Model units: the embedding, each transformer block, the head. They are the granularity of
// compute ops, parameter sharding (ZeRO-3/FSDP wrap one unit each) and pipeline splits.
#include <algorithm>

#include "engine/plan/builder.hpp"
#include "engine/spec/tensor_shapes.hpp"

namespace stratagem::plan {

namespace {

// A measured model (export_scenario): its units' figures per sample, times the micro-batch;
// activations scaled from the measured element size to the scenario's.
std::vector<Unit> make_measured_units(const spec::Scenario& s, double elem) {
  const spec::MeasuredModel& mm = *s.model.measured;
  const double b = s.strategy.micro_batch_size;
  const double scale = elem / mm.element_bytes;
  const double tokens = b * static_cast<double>(s.training.seq_len);
  const double gemm = std::min(tokens, static_cast<double>(s.model.hidden));
  auto unit = [&](const spec::MeasuredUnit& u, const std::string& fallback, bool block) {
    Unit out;
    out.name = u.name.empty() ? fallback : u.name;
    out.params = out.gather_params = u.params;
    out.fwd_flops = b * u.forward_flops;
    out.full_act_bytes = b * u.activation_bytes * scale;
    out.act_bytes = out.full_act_bytes;
    if (block && s.strategy.recompute == spec::Recompute::full) {
      // Only the block's input stays; backward runs the forward again.
      out.act_bytes = std::min(out.full_act_bytes, b * mm.boundary_bytes * scale);
      out.recompute_flops = out.fwd_flops;
    }
    out.gemm_dim = out.fwd_flops > 0 ? gemm : 0.0;
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

// One tensor-parallel rank's forward GEMMs of a block on `tokens` tokens: QKV (column-
// parallel), the attention output projection (row-parallel), MLP-in (gate and up with SwiGLU)
// and MLP-out. A quick-form model (no shape given) is taken as GPT's 12·h² split the same way.
double block_gemm_bytes(const spec::ModelSpec& m, double tokens, double t, double elem) {
  const double h = static_cast<double>(m.hidden);
  const bool shaped = m.params_given <= 0;
  const double qkv = shaped ? h + 2.0 * spec::kv_dim(m) : 3.0 * h;
  const double f = shaped ? static_cast<double>(m.ffn_hidden) : 4.0 * h;
  const double in = shaped && m.mlp == spec::MlpKind::swiglu ? 2.0 * f : f;
  return gemm_io_bytes(tokens, qkv / t, h, elem) + gemm_io_bytes(tokens, h, h / t, elem) +
         gemm_io_bytes(tokens, in / t, h, elem) + gemm_io_bytes(tokens, h, f / t, elem);
}

}  // namespace

std::vector<Unit> make_units(const spec::Scenario& s) {
  const auto& m = s.model;
  const auto& st = s.strategy;
  const double b = st.micro_batch_size;
  const double seq = static_cast<double>(s.training.seq_len);
  // A context-parallel rank holds s/cp tokens of each sequence (attending to all s keys).
  const double tokens = b * seq / st.cp;
  const double elem = st.precision == spec::Precision::no ? 4.0 : 2.0;
  if (m.measured) return make_measured_units(s, elem);
  // One tensor-parallel rank's share (tensor_shapes.hpp); tp = 1 is the whole model.
  const int tp = st.tp;
  const double t = tp;
  const double vocab = static_cast<double>(spec::padded_vocab(m, tp));
  const double word_table = spec::word_table_params_tp(m, tp);
  const spec::Recompute recompute = spec::effective_recompute(st);
  const bool flash = st.attention == spec::Attention::flash;
  std::vector<Unit> units;
  units.reserve(static_cast<std::size_t>(m.layers) + 2);

  Unit embedding;
  embedding.name = "embedding";
  embedding.params = spec::embedding_params_tp(m, tp);
  embedding.gather_params = embedding.params;
  units.push_back(embedding);  // a lookup: no FLOPs; its output is block 1's saved input

  Unit block;
  block.params = spec::block_params_tp(m, tp);
  block.gather_params = block.params;
  // The attention core, Q·Kᵀ and attention·V: 4·s·h FLOPs per token (Megatron's count, no
  // causal saving), /tp (heads are split). Eager attention runs it as batched GEMMs; the fused
  // kernel skips the masked half of a causal model's s×s blocks (FlashAttention counts it so).
  const double core = 4.0 * tokens * seq * static_cast<double>(m.hidden) / t;
  block.fwd_flops = tokens * spec::block_forward_flops_per_token(m, s.training.seq_len) / t;
  if (flash) {
    block.fwd_flops -= core;
    block.attn_fwd_flops = core * (m.kind == spec::ModelKind::decoder ? 0.5 : 1.0);
    block.attention_seq = seq;
    block.head_dim = static_cast<double>(m.hidden) / static_cast<double>(m.heads);
    block.causal = m.kind == spec::ModelKind::decoder;
  }
  const spec::ActivationLayout act{tp, st.sequence_parallel, st.cp, flash,
                                   st.precision == spec::Precision::fp8};
  block.act_bytes = spec::activation_bytes_per_layer(m, s.training.seq_len, st.micro_batch_size,
                                                     recompute, elem, act);
  block.full_act_bytes = spec::activation_bytes_per_layer(
      m, s.training.seq_len, st.micro_batch_size, spec::Recompute::none, elem, act);
  switch (recompute) {
    case spec::Recompute::none:
      block.recompute_flops = 0;
      break;
    case spec::Recompute::full:
      block.recompute_flops = block.fwd_flops;
      block.recompute_attn_flops = block.attn_fwd_flops;
      break;
    case spec::Recompute::selective:
      // Only the (eager) attention core, softmax(QKᵀ)·V, is recomputed: 4·b·s²·h FLOPs /tp.
      block.recompute_flops = core;
      break;
  }
  // The smallest GEMM dimension; tensor parallelism shards the hidden one (QKV and MLP-in
  // outputs, projection and MLP-out inputs).
  block.gemm_dim = std::min(tokens, static_cast<double>(m.hidden) / t);
  block.linear_params = spec::block_matmul_params(m) / t;
  block.fwd_gemm_bytes = block_gemm_bytes(m, tokens, t, elem);
  for (std::int64_t l = 1; l <= m.layers; ++l) {
    block.name = "block " + std::to_string(l);
    units.push_back(block);
  }

  Unit head;
  head.name = "head";
  head.params = spec::head_params_tp(m, tp);
  // With tied embeddings split over a pipeline, the last stage keeps its own copy of the
  // word embeddings for the LM head and syncs its gradient with the first stage (Megatron).
  if (m.tied_embeddings && st.pp > 1) head.params += word_table;
  head.gather_params = head.params;
  if (m.tied_embeddings && st.pp == 1 && spec::shards_parameters(st.sharding) &&
      spec::reshards_after_forward(st.sharding)) {
    head.gather_params += word_table;
  }
  head.fwd_flops = tokens * spec::head_forward_flops_per_token(m, s.training.seq_len);
  if (tp > 1) head.fwd_flops *= vocab / static_cast<double>(m.vocab) / t;
  head.act_bytes = head.full_act_bytes =
      m.vocab > 0
          ? spec::head_activation_bytes(m, s.training.seq_len, st.micro_batch_size, elem, act)
          : 0.0;
  head.gemm_dim = std::min(tokens, static_cast<double>(m.hidden));
  if (head.fwd_flops > 0) {
    head.fwd_gemm_bytes = gemm_io_bytes(tokens, vocab / t, static_cast<double>(m.hidden), elem);
  }
  units.push_back(head);
  return units;
}

double gather_bytes(const spec::StrategySpec& st, const Unit& u) {
  const double c = spec::compute_param_bytes(st.precision);
  if (st.fp8_all_gather) return u.linear_params + c * (u.gather_params - u.linear_params);
  return c * u.gather_params;
}

double gathered_bytes(const spec::StrategySpec& st, const Unit& u) {
  const bool casts = st.precision == spec::Precision::fp8 && !st.fp8_all_gather;
  return gather_bytes(st, u) + (casts ? kFp8CopyBytesPerParam * u.linear_params : 0.0);
}

double fp8_resident_bytes(const spec::StrategySpec& st, const std::vector<Unit>& units,
                          const std::vector<std::pair<int, int>>& chunks) {
  if (st.precision != spec::Precision::fp8) return 0;
  const bool copies = !spec::shards_parameters(st.sharding);
  double bytes = 0;
  for (const auto& [b, e] : chunks) {
    for (int u = b; u < e; ++u) {
      if (units[u].linear_params <= 0) continue;
      if (copies) bytes += kFp8CopyBytesPerParam * units[u].linear_params;
      bytes += kFp8LinearsPerBlock * kFp8TensorsPerLinear * (kFp8AmaxHistory + 2) * 4.0;
    }
  }
  return bytes;
}

std::vector<std::vector<std::pair<int, int>>> split_stages(int layers, int pp, int chunks,
                                                          bool embedding_as_layer,
                                                          bool loss_as_layer) {
  const int virtual_stages = pp * chunks;
  const int lead = embedding_as_layer ? 1 : 0, trail = loss_as_layer ? 1 : 0;
  const int slots = layers + lead + trail;  // what is divided: blocks and counted ends
  const int base = slots / virtual_stages, extra = slots % virtual_stages;
  std::vector<std::vector<std::pair<int, int>>> out(
      pp, std::vector<std::pair<int, int>>(chunks, {0, 0}));
  int next_block = 1;
  for (int vs = 0; vs < virtual_stages; ++vs) {
    int blocks = base + (vs < extra ? 1 : 0);
    if (vs == 0) blocks -= lead;                    // the embedding takes a layer's place
    if (vs == virtual_stages - 1) blocks -= trail;  // so do the head and loss
    // ≥ 0: every virtual stage gets ≥ 1 slot (pp ≤ layers, and interleaving divides them
    // evenly), and a counted end is on a stage of its own (both need pp ≥ 2); a stage may hold
    // the embedding or the head alone.
    int begin = next_block, end = next_block + blocks;
    next_block = end;
    if (vs == 0) begin = 0;                          // the embedding goes first
    if (vs == virtual_stages - 1) end = layers + 2;  // the head goes last
    out[vs % pp][vs / pp] = {begin, end};
  }
  return out;
}

std::vector<std::vector<std::pair<int, int>>> split_stages(std::int64_t layers,
                                                          const spec::StrategySpec& st) {
  return split_stages(static_cast<int>(layers), st.pp, st.chunks, st.embedding_as_layer,
                      st.loss_as_layer);
}

}  // namespace stratagem::plan
