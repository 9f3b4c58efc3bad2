#pragma once
// Mesh pass (the first): the parallelism mesh of named axes tp × cp × dp × pp, as torchtitan's
// ParallelDims and Megatron-LM's parallel_state lay it out. Fills the layout (rank
// coordinates, nodes, units, stage → units) and every rank's process groups:
//   world; dp — the replicas of (stage, tp index) with all their context-parallel ranks
//   (dp × cp), which gradient sync and ZeRO/FSDP shard over; shard/replica — HYBRID_SHARD's
//   in-node shard and cross-node replica groups; tied — first and last stage of one
//   (dp, tp, cp) for tied embeddings with pp > 1; tp — the
//   tensor-parallel peers of (stage, dp index, cp index) (only with tp > 1); cp — the
//   context-parallel ring of (stage, dp index, tp index) (only with cp > 1).
// Rank order (Megatron-LM): tp fastest, then cp, then dp, then pp:
// rank = ((stage·dp + d)·cp + k)·tp + t.
// Also decides which ranks are built (folding: data-, context- and tensor-parallel index 0
// of each stage; the others run identical ops on symmetric links) and their representatives.
#include "engine/plan/build_context.hpp"

namespace stratagem::plan {

void build_mesh(BuildContext& ctx);

}  // namespace stratagem::plan
