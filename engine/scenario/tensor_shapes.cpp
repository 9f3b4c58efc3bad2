#include "engine/scenario/tensor_shapes.hpp"

namespace stratagem::scenario {

double block_params_tp(const ModelSpec& m, int tp) {
  if (tp <= 1) return block_params(m);
  const double h = m.hidden, f = m.ffn_hidden, t = tp;
  const double q = static_cast<double>(m.heads) * static_cast<double>(attention_head_dim(m));
  double sharded = 2.0 * h * q + 2.0 * h * kv_dim(m);         // q, o and k, v
  sharded += (m.mlp == MlpKind::swiglu ? 3.0 : 2.0) * h * f;  // MLP in (gate), out
  if (m.bias) sharded += q + 2.0 * kv_dim(m) + (m.mlp == MlpKind::swiglu ? 2.0 * f : f);
  // Per-head query and key norms: one weight of the head dimension each, on every TP rank.
  const double qk_norms = m.qk_norm ? 2.0 * static_cast<double>(attention_head_dim(m)) : 0.0;
  return sharded / t + block_sequence_parallel_params(m) + qk_norms;
}

double block_sequence_parallel_params(const ModelSpec& m) {
  const double row_biases = m.bias ? 2.0 * m.hidden : 0.0;  // projection and MLP-out
  return 2.0 * norm_params(m) + row_biases;
}

double word_table_params_tp(const ModelSpec& m, int tp) {
  return static_cast<double>(padded_vocab(m, tp)) / tp * static_cast<double>(m.hidden);
}

double embedding_params_tp(const ModelSpec& m, int tp) {
  if (tp <= 1) return embedding_params(m);
  return embedding_params(m) - static_cast<double>(m.vocab) * static_cast<double>(m.hidden) +
         word_table_params_tp(m, tp);
}

double head_sequence_parallel_params(const ModelSpec& m) {
  return m.kind == ModelKind::decoder ? norm_params(m) : 0.0;
}

double head_params_tp(const ModelSpec& m, int tp) {
  if (tp <= 1) return head_params(m);
  double p = head_params(m);
  if (!m.tied_embeddings) {
    p += word_table_params_tp(m, tp) - static_cast<double>(m.vocab) * m.hidden;
  }
  return p;
}

BlockSplit block_split(const ModelSpec& m, std::int64_t seq_len, int tp, bool sp, bool flash) {
  const double h = m.hidden, f = m.ffn_hidden, s = static_cast<double>(seq_len),
               a = static_cast<double>(m.heads), t = tp;
  BlockSplit out;
  // q and the attention output: heads × head_dim wide (h unless model.head_dim says otherwise).
  const double q = a * static_cast<double>(attention_head_dim(m));
  const double qkv_flops = 2.0 * (h * q + 2.0 * h * kv_dim(m));
  const double attention_flops =
      2.0 * (2.0 * h * q + 2.0 * h * kv_dim(m)) + (flash ? 0.0 : 4.0 * q * s);
  const double mlp_flops = 2.0 * (m.mlp == MlpKind::swiglu ? 3.0 : 2.0) * h * f;
  out.attention_flops_share = attention_flops / (attention_flops + mlp_flops);
  out.qkv_flops_share = qkv_flops / (attention_flops + mlp_flops);
  out.mlp_in_flops_share =
      2.0 * (m.mlp == MlpKind::swiglu ? 2.0 : 1.0) * h * f / (attention_flops + mlp_flops);
  out.proj_flops_share = 2.0 * h * q / (attention_flops + mlp_flops);
  out.mlp_out_flops_share = 2.0 * h * f / (attention_flops + mlp_flops);
  const double scores = flash ? 0.0 : 5.0 * a * s / h;
  const double attention_bytes = sp ? (13.0 + scores) / t : 5.0 + (8.0 + scores) / t;
  const double mlp_bytes = sp ? 21.0 / t : 5.0 + 16.0 / t;
  out.attention_bytes_share = attention_bytes / (attention_bytes + mlp_bytes);
  out.norm_bytes_share = (sp ? 2.0 / t : 2.0) / (attention_bytes + mlp_bytes);
  return out;
}

}  // namespace stratagem::scenario
