#pragma once
// Pipeline pass: point-to-point transfers between neighbouring (virtual) stages. Before the
// first step of an item that has a previous virtual stage (forward) or a next one (backward)
// it posts the recv of the activations or their gradients (dep: the compute before it, so it
// is posted one op ahead), which the item's first steps wait for; after the item's last step
// it sends its output on. Peers are the same (dp, tp) coordinates on the neighbouring stage;
// with interleaving, virtual stage chunk·pp + stage wraps from the last stage to the first.
// Messages carry each tensor-parallel rank's hidden states: s·b·h in the compute dtype, the
// s·b·h/tp slice with sequence parallelism (a measured model: its block output).
#include "engine/plan/draft.hpp"

namespace stratagem::plan {

void add_pipeline_transfers(const BuildContext& ctx, RankDraft& draft);

/// Bytes of one activation (or gradient) message between stages, per rank.
double activation_message_bytes(const scenario::Scenario& scenario);

}  // namespace stratagem::plan
