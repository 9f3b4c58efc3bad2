#pragma once
// Pipeline pass: point-to-point transfers between neighbouring (virtual) stages. Before the
// first step of an item that has a previous virtual stage (forward) or a next one (backward)
// it posts the recv of the activations or their gradients (dep: the compute before it, so it
// is posted one op ahead), which the item's first steps wait for; after the item's last step
// it sends its output on. Peers are the same (dp, tp) coordinates on the neighbouring stage;
// with interleaving, virtual stage chunk·pp + stage wraps from the last stage to the first.
// Messages carry each tensor-parallel rank's hidden states: s·b·h in the compute dtype, the
// s·b·h/tp slice with sequence parallelism (a measured model: its block output). Megatron-LM
// without sequence parallelism (stack megatron-legacy) splits the TP-replicated s·b·h too:
// each TP rank sends its 1/tp share and the receiving stage all-gathers the shares over its
// TP group (`--scatter-gather-tensors-in-pipeline`, on by default: megatron/arguments.py;
// megatron/p2p_communication.py `_communicate`, split_tensor_into_1d_equal_chunks and
// gather_split_1d_tensor), so the network carries 1/tp of the bytes and NVLink the gather.
// Megatron-Core dropped it (with sequence parallelism the message is already split).
#include "engine/plan/draft.hpp"

namespace stratagem::plan {

void add_pipeline_transfers(const BuildContext& ctx, RankDraft& draft);

/// Bytes of one activation (or gradient) message between stages, per rank.
double activation_message_bytes(const scenario::Scenario& scenario);

/// The TP ranks that share one message under Megatron-LM's scatter/gather (tp for stack
/// megatron-legacy with tp > 1 and no sequence parallelism), else 1.
int pipeline_gather(const scenario::Scenario& scenario);

}  // namespace stratagem::plan
