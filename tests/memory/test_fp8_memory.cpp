// fp8 training's memory per tensor class for Llama 2 7B on a DGX H100 (Transformer Engine's
// conventions, engine/plan/builder.hpp): bf16 parameters and gradients, fp32 master weights
// and Adam states as with bf16, fp8 weight copies and transposes plus delayed-scaling state,
// the linear layers' saved inputs in fp8; FSDP casts per gathered unit or gathers in fp8.
#include <gtest/gtest.h>

#include "engine/memory/memory.hpp"
#include "engine/plan/builder.hpp"

namespace stratagem::memory {
namespace {

using plan::TensorClass;

// Llama 2 7B: P = 6,738,415,616; per block 4h² + 3hf = 202,375,168 linear weights (h 4096,
// f 11008) and 2h of RMSNorm; 32 blocks.
constexpr double kParams = 6'738'415'616.0;
constexpr double kLinearPerBlock = 202'375'168.0;
constexpr double kAmaxPerBlock = 4 * 3 * (1024 + 2) * 4.0;  // 4 linears × 3 tensors, fp32

scenario::Scenario llama(const std::string& precision, const std::string& sharding,
                         bool fp8_gather = false) {
  nlohmann::json j = {
      {"model", "llama2-7b"},
      {"cluster", "dgx-h100"},
      {"strategy",
       {{"dp", 8}, {"micro_batch_size", 1}, {"grad_accum", 1}, {"mixed_precision", precision},
        {"sharding", sharding}}},
      {"training", {{"seq_len", 4096}}}};
  if (fp8_gather) j["strategy"]["fp8_all_gather"] = true;
  return scenario::parse_scenario(j);
}

double cls(const MemoryReport& m, TensorClass c) {
  return m.stages[0].bytes[static_cast<int>(c)];
}

TEST(Fp8Memory, ReplicatedParametersKeepFp8CopiesAndScalingState) {
  const MemoryReport f = estimate_memory(llama("fp8", "none"));
  const MemoryReport b = estimate_memory(llama("bf16", "none"));
  EXPECT_DOUBLE_EQ(cls(f, TensorClass::params), 2 * kParams);
  EXPECT_DOUBLE_EQ(cls(f, TensorClass::grads), 2 * kParams);
  EXPECT_DOUBLE_EQ(cls(f, TensorClass::master_weights), 4 * kParams);
  EXPECT_DOUBLE_EQ(cls(f, TensorClass::optimizer), 8 * kParams);
  // Weight + transpose in fp8 (2 bytes per linear weight) and the amax history: 12.95 GB.
  EXPECT_DOUBLE_EQ(cls(f, TensorClass::fp8_weights), 32 * (2 * kLinearPerBlock + kAmaxPerBlock));
  EXPECT_DOUBLE_EQ(cls(f, TensorClass::fp8_weights), 12'953'586'688.0);
  EXPECT_DOUBLE_EQ(cls(b, TensorClass::fp8_weights), 0);
  // Saved linear inputs in fp8: 7·s·b·h less per layer (s 4096, b 1): 32 × 117,440,512.
  EXPECT_DOUBLE_EQ(cls(b, TensorClass::activations) - cls(f, TensorClass::activations),
                   32 * 7.0 * 4096 * 4096);
}

TEST(Fp8Memory, FsdpCastsEachGatheredUnitOrGathersInFp8) {
  const MemoryReport sharded = estimate_memory(llama("fp8", "FULL_SHARD"));
  EXPECT_DOUBLE_EQ(cls(sharded, TensorClass::fp8_weights), 32 * kAmaxPerBlock);
  EXPECT_DOUBLE_EQ(cls(sharded, TensorClass::params), 2 * kParams / 8);
  // A block's all-gather: bf16 (2 bytes per parameter), or with fp8_all_gather its linear
  // weights in fp8 and its norms in bf16 (torchao).
  auto block_gather = [](const scenario::Scenario& s) {
    const auto p = plan::build_plan(s);
    for (const auto& op : p.ops) {
      const auto* c = std::get_if<plan::Collective>(&op.payload);
      if (c && c->purpose == plan::CommPurpose::param_gather && c->unit_begin == 1) {
        return c->bytes;
      }
    }
    return 0.0;
  };
  const double block = kLinearPerBlock + 2 * 4096;
  EXPECT_DOUBLE_EQ(block_gather(llama("fp8", "FULL_SHARD")), 2 * block);
  EXPECT_DOUBLE_EQ(block_gather(llama("fp8", "FULL_SHARD", true)),
                   kLinearPerBlock + 2 * (block - kLinearPerBlock));
  // Cast per unit: the gathered bf16 block plus its fp8 weight and transpose while in use;
  // the fp8 gather holds only what it gathered.
  const MemoryReport cast = sharded;
  const MemoryReport gathered = estimate_memory(llama("fp8", "FULL_SHARD", true));
  EXPECT_GT(cls(cast, TensorClass::gathered_params), cls(gathered, TensorClass::gathered_params));
}

}  // namespace
}  // namespace stratagem::memory
