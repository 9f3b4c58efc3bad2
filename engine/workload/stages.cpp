#include "engine/workload/stages.hpp"

#include "engine/workload/schedule.hpp"

namespace stratagem::workload {

std::vector<std::vector<std::pair<int, int>>> split_stages(int layers, int pp, int chunks,
                                                           bool embedding_as_layer,
                                                           bool loss_as_layer,
                                                           scenario::Schedule schedule) {
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
    const auto [stage, chunk] = stage_chunk(schedule, pp, vs);
    out[stage][chunk] = {begin, end};
  }
  return out;
}

std::vector<std::vector<std::pair<int, int>>> split_stages(std::int64_t layers,
                                                           const scenario::StrategySpec& st) {
  return split_stages(static_cast<int>(layers), st.pp, st.chunks, st.embedding_as_layer,
                      st.loss_as_layer, st.schedule);
}

}  // namespace stratagem::workload
