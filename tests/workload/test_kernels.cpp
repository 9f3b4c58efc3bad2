// The kernel lists of one Llama-3-8B block per training stack (engine/workload/kernels.hpp),
// counted by hand from the frameworks' code, and the fusion rule of torch.compile
// (kernel_graph.hpp).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/scenario/error.hpp"
#include "engine/scenario/scenario.hpp"
#include "engine/workload/kernels.hpp"
#include "engine/workload/units.hpp"
#include "sim/kernel_cost.hpp"

namespace stratagem::workload {
namespace {

// Llama 3 8B (h 4096, 32 heads, 8 KV heads, ffn 14336, RMSNorm, RoPE, SwiGLU), one micro-batch
// of 8192 tokens on one H100, bf16.
scenario::Scenario llama3_8b(const std::string& stack, bool compile = false) {
  nlohmann::json j = {{"model", "llama3-8b"},
                      {"cluster", {{"preset", "dgx-h100"}, {"nodes", 1}, {"gpus_per_node", 1}}},
                      {"strategy",
                       {{"dp", 1},
                        {"micro_batch_size", 1},
                        {"grad_accum", 1},
                        {"mixed_precision", "bf16"},
                        {"stack", stack},
                        {"compile", compile}}},
                      {"training", {{"seq_len", 8192}}}};
  return scenario::parse_scenario(j);
}

constexpr double N = 8192, H = 4096;
constexpr double E = N * H;             // one [tokens × hidden] tensor's elements
constexpr double F = 8192.0 * 128 * 4;  // the RoPE table: s × d/2 complex64

double memory_bytes(const std::vector<Kernel>& ks) {
  return totals(ks).memory_bytes;
}

TEST(BlockKernels, EagerPyTorchRunsEachOpAsItsOwnKernel) {
  const BlockKernels k = block_kernels(llama3_8b("pytorch"));
  // Forward: composite RMSNorm 8 kernels ×2, wq/wk/wv, RoPE 3 per tensor ×2, repeat_kv ×2,
  // SDPA, the output's contiguous copy, wo, residual add ×2, w1, w3, silu, mul, w2.
  EXPECT_EQ(k.forward.size(), 37u);
  // Bytes (E = tokens·hidden elements): each norm 36E + 24N + 2h (to fp32 6E, pow 8E,
  // mean 4E + 4N, add eps 8N, rsqrt 8N, mul rstd 8E + 4N, type_as 6E, weight 4E + 2h);
  // RoPE q 20E + F, k 5E + F; repeat_kv 2 × 2.5E; contiguous 4E; residual adds 2 × 6E;
  // silu 14E; mul 21E.
  EXPECT_DOUBLE_EQ(memory_bytes(k.forward), 153 * E + 48 * N + 4 * H + 2 * F);
  const KernelTotals t = totals(k.forward);
  // GEMM FLOPs are the workload's: 2·tokens·(block matmul params).
  const double matmul = H * (H + 2 * 1024) + H * H + 3 * H * 14336;
  EXPECT_DOUBLE_EQ(t.gemm_flops, 2 * N * matmul);
  EXPECT_DOUBLE_EQ(t.attention_flops, 4 * N * 8192 * H / 2);  // causal: half executed
  EXPECT_EQ(k.backward.size(), 60u);
}

TEST(BlockKernels, TorchCompileFusesEachChainBetweenGemms) {
  const BlockKernels k = block_kernels(llama3_8b("pytorch", true));
  // norm 4E + 4N + 2h; RoPE q 4E + F; RoPE k with k's repeat_kv 2.5E + F; v's repeat 2.5E;
  // contiguous 4E; residual add + ffn_norm 8E + 4N + 2h; silu·mul 21E; residual add 6E.
  EXPECT_EQ(k.forward.size(), 16u);
  EXPECT_DOUBLE_EQ(memory_bytes(k.forward), 52 * E + 8 * N + 4 * H + 2 * F);
  EXPECT_EQ(k.backward.size(), 22u);
  EXPECT_DOUBLE_EQ(totals(k.backward).gemm_flops, 2 * totals(k.forward).gemm_flops);
}

TEST(BlockKernels, MegatronWithTransformerEngineFusesNormsRopeAndSwiglu) {
  const BlockKernels k = block_kernels(llama3_8b("megatron"));
  // Norm (in LayerNormLinear) 4E + 4N + 2h ×2, fused RoPE q 4E + F and k E + F,
  // bias-dropout-add 6E ×2, fused SwiGLU 21E; one QKV GEMM, proj, fc1 (gate + up), fc2.
  EXPECT_EQ(k.forward.size(), 12u);
  EXPECT_DOUBLE_EQ(memory_bytes(k.forward), 46 * E + 8 * N + 4 * H + 2 * F);
  // Backward: fc2, SwiGLU backward (reads 7E + 14E, writes 14E), fc1, norm backward
  // (6E + 4N + 6h) ×2, residual gradient sums 6E ×2, RoPE backward 4E + F and E + F, the
  // q/k/v gradients into one tensor 6E, proj, attention, QKV.
  EXPECT_EQ(k.backward.size(), 17u);
  EXPECT_DOUBLE_EQ(memory_bytes(k.backward), 70 * E + 8 * N + 12 * H + 2 * F);
  EXPECT_DOUBLE_EQ(totals(k.forward).gemm_flops,
                   totals(block_kernels(llama3_8b("pytorch")).forward).gemm_flops);
}

TEST(BlockKernels, StacksOrderAsTheirFusionSays) {
  // On the GPU: compile and Megatron's fused layer beat eager PyTorch by the memory-bound
  // traffic eager moves (153E vs 46-52E forward); Megatron-LM's apex layer sits between.
  auto block_s = [](const scenario::Scenario& s) {
    double t = 0;
    const sim::RooflineModel roofline(s.cluster.gpu, sim::default_host(8));
    const BlockKernels k = block_kernels(s);
    for (const auto* list : {&k.forward, &k.backward}) {
      for (const Kernel& kernel : *list) {
        t += sim::kernel_cost(kernel, roofline, s.strategy.attention_kernel).seconds;
      }
    }
    return t;
  };
  const double eager = block_s(llama3_8b("pytorch"));
  const double compiled = block_s(llama3_8b("pytorch", true));
  const double megatron = block_s(llama3_8b("megatron"));
  const double legacy = block_s(llama3_8b("megatron-legacy"));
  EXPECT_GT(eager / compiled, 1.10);
  EXPECT_LT(eager / compiled, 1.40);
  EXPECT_GT(eager / megatron, 1.10);
  EXPECT_LT(megatron, legacy);
  EXPECT_LT(legacy, eager);
}

TEST(BlockKernels, RefusesModelsWithoutAShape) {
  nlohmann::json j = {{"model", {{"params", 7e9}, {"layers", 32}}},
                      {"cluster", {{"preset", "dgx-h100"}, {"nodes", 1}}},
                      {"strategy", {{"dp", 8}}}};
  EXPECT_THROW(block_kernels(scenario::parse_scenario(j)), SpecError);
}

TEST(OpGraph, FusedChainsReadOutsideInputsOnceAndWriteOnlyWhatIsUsedLater) {
  OpGraph g;
  const int a = g.tensor(100, 2), b = g.tensor(100, 2), c = g.tensor(100, 2), d = g.tensor(100, 2);
  const int w = g.tensor(10, 2, true), out = g.tensor(100, 2);
  g.op("x", {a}, {b});
  g.op("y", {b, w}, {c});
  g.op("z", {c}, {d});
  g.gemm("mm", 10, 10, 1, scenario::DType::bf16, d, w, out);
  // Eager: 400 + 420 + 400 bytes; fused: reads a and w, writes d (the GEMM reads it).
  const auto eager = g.eager(), fused = g.fused();
  ASSERT_EQ(eager.size(), 4u);
  EXPECT_DOUBLE_EQ(eager[0].bytes + eager[1].bytes + eager[2].bytes, 400 + 420 + 400);
  ASSERT_EQ(fused.size(), 2u);
  EXPECT_DOUBLE_EQ(fused[0].bytes, 200 + 20 + 200);
  EXPECT_EQ(fused[0].name, "x+y+z");
  // Kept intermediates are written too.
  OpGraph h;
  const int p = h.tensor(100, 2), q = h.tensor(100, 2), r = h.tensor(100, 2);
  h.op("x", {p}, {q});
  h.op("y", {q}, {r});
  h.keep(q);
  h.keep(r);
  EXPECT_DOUBLE_EQ(h.fused().at(0).bytes, 600);
}

TEST(StackKeys, ParseAndRefuse) {
  EXPECT_EQ(llama3_8b("megatron-legacy").strategy.stack, scenario::Stack::megatron_legacy);
  EXPECT_THROW(llama3_8b("tensorflow"), SpecError);
  EXPECT_THROW(llama3_8b("megatron", true), SpecError);  // compile: eager stacks only
  try {
    llama3_8b("megatron", true);
  } catch (const SpecError& e) {
    EXPECT_EQ(e.path(), "strategy.compile");
  }
  EXPECT_EQ(scenario::to_json(llama3_8b("deepspeed", true).strategy)["stack"], "deepspeed");
  // The default stays out of the scenario's JSON (plans and their digests are unchanged).
  EXPECT_FALSE(scenario::to_json(llama3_8b("pytorch").strategy).contains("stack"));
}

}  // namespace
}  // namespace stratagem::workload
