#pragma once
// One tensor-parallel rank's share of a transformer, in Megatron-LM's layout (Shoeybi et al.
// 2019; Korthikanti et al. 2022): QKV and MLP-in are column-parallel (weights and biases split
// over tp), the attention projection and MLP-out row-parallel (weights split, biases whole),
// the word embedding and LM head vocab-parallel over the padded vocabulary (padded_vocab);
// norms and learned position/type embeddings are replicated. With tp = 1 every function
// returns exactly the unsharded figure of model.hpp.
#include "engine/scenario/model.hpp"

namespace stratagem::scenario {

/// Parameters of one block on one TP rank: (attention + MLP matrices + column-parallel
/// biases)/tp + row-parallel biases + norms.
double block_params_tp(const ModelSpec& m, int tp);
/// The parameters every TP rank holds whole whose gradients come from its own part of the
/// sequence under sequence parallelism (norms and row-parallel biases of one block):
/// Megatron all-reduces their gradients over the TP group.
double block_sequence_parallel_params(const ModelSpec& m);
/// The input unit on one TP rank: the word table's vocabulary shard (padded V·h/tp) and the
/// replicated position/type embeddings (and BERT's embedding norm).
double embedding_params_tp(const ModelSpec& m, int tp);
/// The output unit on one TP rank: final norm, the untied LM head's vocabulary shard, pooler.
double head_params_tp(const ModelSpec& m, int tp);
/// The head's final norm (replicated; all-reduced under sequence parallelism).
double head_sequence_parallel_params(const ModelSpec& m);
/// The word table on one TP rank (padded V·h/tp).
double word_table_params_tp(const ModelSpec& m, int tp);

/// How one block's forward splits where tensor parallelism communicates: the attention half
/// (norm, QKV, core, projection) and the MLP half. Shares of the block's GEMM FLOPs and of its
/// memory-bound bytes (Korthikanti's activation terms: attention 5 + 8/t + 5·a·s/(h·t), MLP
/// 5 + 16/t, in units of s·b·h at 16 bits; with sequence parallelism (13 + 5·a·s/h)/t and
/// 21/t) that the attention half carries. With flash attention the core is not a GEMM (its
/// FLOPs are counted apart) and keeps no s×s terms. `qkv_flops_share`: the QKV projection's
/// part of the block's GEMM FLOPs (where context parallelism exchanges K and V);
/// `mlp_in_flops_share` the MLP's column-parallel GEMM(s) (fc1, or gate and up); the two
/// column-parallel layers whose weight gradients Megatron computes while their input gradient
/// is reduced; `proj_flops_share` and `mlp_out_flops_share` the row-parallel ones, beside
/// whose GEMMs async TP runs the reduce-scatter (backward: the all-gather). `norm_bytes_share`: one
/// norm's bytes, 2 of the units above (it reads x and writes its output; 2/t with sequence
/// parallelism).
struct BlockSplit {
  double attention_flops_share = 0.5;
  double attention_bytes_share = 0.5;
  double qkv_flops_share = 0.25;
  double mlp_in_flops_share = 0.25;  ///< the column-parallel MLP-in GEMM(s)
  double proj_flops_share = 0.1;     ///< the row-parallel attention projection
  double mlp_out_flops_share = 0.2;  ///< the row-parallel MLP-out GEMM
  double norm_bytes_share = 0.05;    ///< one norm (read x, write its output)
};
BlockSplit block_split(const ModelSpec& m, std::int64_t seq_len, int tp, bool sequence_parallel,
                       bool flash = false);

}  // namespace stratagem::scenario
