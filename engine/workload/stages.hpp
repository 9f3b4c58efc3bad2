#pragma once
// The pipeline split: which units each (stage, chunk) runs.
#include <cstdint>
#include <utility>
#include <vector>

#include "engine/scenario/strategy.hpp"

namespace stratagem::workload {

/// Splits units 0..L+1 over pp·chunks virtual stages (embedding with the first, head with
/// the last; blocks as even as possible, earlier stages take the remainder). With
/// `embedding_as_layer` (`loss_as_layer`) the embedding (head and loss) counts as one layer of
/// the division, as Megatron-LM's account_for_embedding/loss_in_pipeline_split: L + 2 layers
/// over 64 virtual stages puts one block with the embedding and one with the head. Virtual
/// stage vs runs on the (stage, chunk) of workload::stage_chunk for `schedule` (zbv: a V).
std::vector<std::vector<std::pair<int, int>>> split_stages(
    int layers, int pp, int chunks, bool embedding_as_layer = false, bool loss_as_layer = false,
    scenario::Schedule schedule = scenario::Schedule::interleaved);
/// The scenario's split: its pp, chunks and counted ends.
std::vector<std::vector<std::pair<int, int>>> split_stages(std::int64_t layers,
                                                           const scenario::StrategySpec& st);

}  // namespace stratagem::workload
