#pragma once
// Scenarios of growing size for the benchmarks: GPT-3 175B on 8 … 4,096 simulated A100s.
#include <nlohmann/json.hpp>

#include "engine/scenario/scenario.hpp"

namespace stratagem::bench {

/// GPT-3 175B, ZeRO-1, 1F1B on `gpus` A100-80GB (8 per node): pp 16 (or fewer when the
/// cluster is small), dp the rest, 128 micro-batches (fewer when dp is small).
inline scenario::Scenario gpt3_on(int gpus, int pp = 16, int microbatches = 128) {
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
  return scenario::parse_scenario(j);
}

/// GPT-3 175B in Megatron's 3D layout on `gpus` A100-80GB: tp 8 with sequence parallelism
/// inside each node, pp 16, dp the rest, 1F1B, ZeRO-1 (distributed optimizer), selective
/// recomputation, 128 micro-batches.
inline scenario::Scenario gpt3_3d_on(int gpus, int microbatches = 128) {
  const int tp = 8, pp = 16, dp = gpus / (tp * pp);
  nlohmann::json j = {{"name", "gpt3-175b 3d on " + std::to_string(gpus) + " A100"},
                      {"model", "gpt3-175b"},
                      {"cluster", {{"preset", "dgx-a100-80gb"}, {"nodes", gpus / 8}}},
                      {"strategy",
                       {{"dp", dp},
                        {"tp", tp},
                        {"sequence_parallel", true},
                        {"pp", pp},
                        {"schedule", "1f1b"},
                        {"micro_batch_size", 1},
                        {"grad_accum", microbatches},
                        {"sharding", "zero1"},
                        {"mixed_precision", "bf16"},
                        {"recompute", "selective"}}},
                      {"training", {{"seq_len", 2048}}}};
  return scenario::parse_scenario(j);
}

/// Pure data parallelism on `gpus` A100-80GB: GPT-2 (124 M), one sample per GPU, DDP with
/// bucketed all-reduce. The scale case: everything but the GPU count stays small.
inline scenario::Scenario gpt2_dp_on(int gpus) {
  nlohmann::json j = {{"name", "gpt2 dp on " + std::to_string(gpus) + " A100"},
                      {"model", "gpt2"},
                      {"cluster", {{"preset", "dgx-a100-80gb"}, {"nodes", gpus / 8}}},
                      {"strategy", {{"dp", gpus}, {"micro_batch_size", 1}}},
                      {"training", {{"seq_len", 1024}, {"global_batch", gpus}}}};
  return scenario::parse_scenario(j);
}

}  // namespace stratagem::bench
