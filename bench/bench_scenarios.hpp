#pragma once
// Scenarios of growing size for the benchmarks: GPT-3 175B on 8 … 4,096 simulated A100s.
#include <nlohmann/json.hpp>

#include "engine/spec/scenario.hpp"

namespace stratagem::bench {

/// GPT-3 175B, ZeRO-1, 1F1B on `gpus` A100-80GB (8 per node): pp 16 (or fewer when the
/// cluster is small), dp the rest, 128 micro-batches (fewer when dp is small).
inline spec::Scenario gpt3_on(int gpus, int pp = 16, int microbatches = 128) {
  if (gpus < pp) pp = gpus;
  const int dp = gpus / pp;
  nlohmann::json j = {{"name", "gpt3-175b on " + std::to_string(gpus) + " A100"},
                      {"model", "gpt3-175b"},
                      {"cluster", {{"preset", "dgx-a100-80gb"}, {"nodes", gpus / 8}}},
                      {"strategy",
                       {{"dp", dp},
                        {"pp", pp},
                        {"schedule", "1f1b"},
                        {"micro_batch_size", 1},
                        {"grad_accum", microbatches},
                        {"sharding", "zero1"},
                        {"mixed_precision", "bf16"},
                        {"recompute", "full"}}},
                      {"training", {{"seq_len", 2048}}}};
  return spec::parse_scenario(j);
}

}  // namespace stratagem::bench
