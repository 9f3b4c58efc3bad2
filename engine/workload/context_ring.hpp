#pragma once
// Context parallelism (cp > 1) as Megatron-LM's CP and torchtitan's ring attention do it: the
// sequence is split over the cp ranks of a ring (2·cp chunks, rank i holding chunks i and
// 2·cp − 1 − i so causal work is balanced); each rank computes norms, projections and the MLP
// for its s/cp tokens, and its queries attend to every key: the K/V blocks travel around the
// ring in cp − 1 point-to-point steps per layer, overlapped with the attention core on the
// blocks already there. Backward passes K/V around again and accumulates dK/dV as they travel
// back to their owners.
//
// Transfer-wise one layer's ring in forward is an all-gather of K and V over the CP group
// (each rank receives every other rank's block once: (cp − 1) steps of s/cp tokens), in
// backward an all-gather of K/V and a reduce-scatter of dK/dV; the plan carries them as those
// collectives on the `cp` stream, each running alongside the attention core's compute (the
// layer's next piece waits for both), so the simulator's ring costs apply. Gradients are then
// reduced, and ZeRO/FSDP shard, over dp × cp (mesh.hpp).
#include <vector>

#include "engine/scenario/scenario.hpp"
#include "engine/workload/chain_piece.hpp"

namespace stratagem::workload {

/// Bytes of one layer's K and V for a whole micro-batch sequence on one TP rank: the all-gather
/// buffer S = 2 · s · b · kv_dim / tp · element bytes (each step moves S/cp).
double context_kv_bytes(const scenario::Scenario& s);

/// The ring's collectives for one block's attention core: forward an all-gather of K/V;
/// backward an all-gather of K/V and a reduce-scatter of dK/dV (all `context`, overlapped).
std::vector<TpPiece> context_exchange(bool forward, double kv_bytes, scenario::DType dtype);

}  // namespace stratagem::workload
