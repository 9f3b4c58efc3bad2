#pragma once
// One piece of a tensor- or context-parallel chain (tp_chain.hpp).
#include "engine/scenario/scenario.hpp"
#include "engine/workload/work.hpp"

namespace stratagem::workload {

/// One piece of a unit's chain: a share of its compute op (GEMM FLOPs, fused-attention FLOPs
/// and memory-bound bytes), or a collective (bytes: the full buffer on each rank) on the TP
/// group or, `context`, on the context-parallel ring. An `alongside` collective runs alongside
/// the compute piece that follows it (ring attention overlaps the K/V exchange with the
/// attention core; Megatron reduces a column-parallel layer's input gradient while it computes
/// the layer's weight gradient), and the piece after that waits for both.
struct TpPiece {
  bool collective = false;
  double flops_share = 0, bytes_share = 0, attention_share = 0;
  CollectiveKind kind = CollectiveKind::all_reduce;
  double bytes = 0;
  scenario::DType dtype = scenario::DType::bf16;
  bool context = false;
  bool alongside = false;
};

}  // namespace stratagem::workload
