#pragma once
// One piece of a tensor- or context-parallel chain (tp_chain.hpp).
#include "engine/scenario/scenario.hpp"
#include "engine/workload/work.hpp"

namespace stratagem::workload {

/// The group a chain's collective runs on: the tensor-parallel group, the context-parallel
/// ring, or for an MoE block's tokens the expert-parallel group (all-to-all), the expert-
/// tensor-parallel group, or both together (expert_mesh.hpp; the allgather dispatcher).
enum class PieceGroup : std::uint8_t { tp, cp, ep, etp, ep_etp };

/// One piece of a unit's chain: a share of its compute op (GEMM FLOPs, fused-attention FLOPs
/// and memory-bound bytes), or a collective (bytes: the full buffer on each rank) on `group`.
/// An `alongside` collective runs alongside
/// the compute piece that follows it (ring attention overlaps the K/V exchange with the
/// attention core; Megatron reduces a column-parallel layer's input gradient while it computes
/// the layer's weight gradient), and the piece after that waits for both.
struct TpPiece {
  bool collective = false;
  double flops_share = 0, bytes_share = 0, attention_share = 0;
  CollectiveKind kind = CollectiveKind::all_reduce;
  double bytes = 0;
  scenario::DType dtype = scenario::DType::bf16;
  PieceGroup group = PieceGroup::tp;
  bool alongside = false;
};

}  // namespace stratagem::workload
