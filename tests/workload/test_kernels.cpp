// The kernel lists of one Llama-3-8B block per training stack (engine/workload/kernels.hpp),
// counted by hand from the frameworks' code, and the fusion rule of torch.compile
// (kernel_graph.hpp).
#include <gtest/gtest.h>

#include <functional>

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
nlohmann::json llama3_8b_json(const std::string& stack, bool compile = false) {
  return {{"model", "llama3-8b"},
          {"cluster", {{"preset", "dgx-h100"}, {"nodes", 1}, {"gpus_per_node", 1}}},
          {"strategy",
           {{"dp", 1},
            {"micro_batch_size", 1},
            {"grad_accum", 1},
            {"mixed_precision", "bf16"},
            {"stack", stack},
            {"compile", compile}}},
          {"training", {{"seq_len", 8192}}}};
}

scenario::Scenario llama3_8b(const std::string& stack, bool compile = false) {
  return scenario::parse_scenario(llama3_8b_json(stack, compile));
}

// The same block in fp8 under `recipe` (on `cluster`).
scenario::Scenario llama3_8b_fp8(const std::string& stack, const std::string& recipe,
                                 const std::string& cluster = "dgx-h100") {
  nlohmann::json j = llama3_8b_json(stack);
  j["strategy"]["mixed_precision"] = "fp8";
  j["strategy"]["fp8_recipe"] = recipe;
  j["cluster"]["preset"] = cluster;
  return scenario::parse_scenario(j);
}

// The block's forward + backward time, each kernel on the roofline (as `stratagem kernels`).
double block_s(const scenario::Scenario& s) {
  double t = 0;
  const sim::RooflineModel roofline = sim::scenario_roofline(s, sim::default_host(8));
  const BlockKernels k = block_kernels(s);
  for (const auto* list : {&k.forward, &k.backward}) {
    for (const Kernel& kernel : *list) {
      t += sim::kernel_cost(kernel, roofline, s.strategy.attention_kernel).seconds;
    }
  }
  return t;
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

TEST(Fp8Recipes, RowwiseAddsTorchaosCastsAndRescales) {
  // Per linear layer (G: output-gradient elements, I: input elements, W: weight elements):
  // tensorwise casts its input with an amax pass (2 B/element read, 4 B written) and a cast
  // (2 + 4 read, 1 written); rowwise in one kernel (2 read, 1 fp8 + 2 bf16-transpose written):
  // forward 7 kernels and 7 × 8 bytes fewer. Backward, tensorwise's output gradient 5G + 8
  // in 2 kernels; rowwise's 5G + 3G (cast, then its transpose's cast), the kept input's cast 3I,
  // the dgrad and wgrad rescales 4I + 4W: 5 kernels.
  const BlockKernels tw = block_kernels(llama3_8b_fp8("pytorch", "tensorwise"));
  const BlockKernels rw = block_kernels(llama3_8b_fp8("pytorch", "rowwise"));
  EXPECT_EQ(rw.forward.size() + 7, tw.forward.size());
  EXPECT_DOUBLE_EQ(memory_bytes(tw.forward) - memory_bytes(rw.forward), 7 * 8);
  EXPECT_EQ(rw.backward.size(), tw.backward.size() + 7 * 3);
  // wq, wk, wv, wo, w1, w3, w2: ΣG = (1 + 1/4 + 1/4 + 1 + 3.5 + 3.5 + 1) E = 10.5E,
  // ΣI = 6E + 3.5E, ΣW = (1 + 1/4 + 1/4 + 1 + 3 × 3.5) H².
  EXPECT_DOUBLE_EQ(memory_bytes(rw.backward) - memory_bytes(tw.backward),
                   3 * 10.5 * E + 7 * 9.5 * E + 4 * 13 * H * H - 7 * 8);
  EXPECT_DOUBLE_EQ(totals(rw.forward).gemm_flops, totals(tw.forward).gemm_flops);
  // On an H100 the extra traffic makes the block slower (no GEMM rate of its own: torchao's
  // roofline takes rowwise GEMMs at the tensorwise rate).
  EXPECT_GT(block_s(llama3_8b_fp8("pytorch", "rowwise")),
            1.02 * block_s(llama3_8b_fp8("pytorch", "tensorwise")));
}

TEST(Fp8Recipes, TransformerEnginesBlockAndMxQuantizersWriteBothCopiesInOnePass) {
  const BlockKernels tw = block_kernels(llama3_8b_fp8("megatron", "tensorwise"));
  const BlockKernels bw = block_kernels(llama3_8b_fp8("megatron", "blockwise"));
  // Forward: proj and fc2 quantize their inputs (QKV and fc1 read the norm's fp8 output):
  // amax + cast (5 B/element + 8) against one pass writing both copies with their scales
  // (2 + 2 × 1.03125).
  EXPECT_EQ(bw.forward.size() + 2, tw.forward.size());
  // Backward: each of the 4 GEMMs' output gradient likewise.
  EXPECT_EQ(bw.backward.size() + 4, tw.backward.size());
  // Float8BlockScaling's GEMMs at 0.82 of per-tensor (TE's GEMM profiling guide, H200):
  // slower on an H100 than tensorwise despite the cheaper quantization, as the guide measured.
  EXPECT_GT(block_s(llama3_8b_fp8("megatron", "blockwise")),
            block_s(llama3_8b_fp8("megatron", "tensorwise")));
  // MXFP8 on Blackwell: TE's quantizer in one pass; torchao's two casts per operand.
  const BlockKernels te_mx = block_kernels(llama3_8b_fp8("megatron", "mxfp8", "dgx-b200"));
  EXPECT_EQ(te_mx.forward.size(), bw.forward.size());
  const BlockKernels ao_mx = block_kernels(llama3_8b_fp8("pytorch", "mxfp8", "dgx-b200"));
  const BlockKernels ao_tw = block_kernels(llama3_8b_fp8("pytorch", "tensorwise", "dgx-b200"));
  EXPECT_EQ(ao_mx.forward.size() + 7, ao_tw.forward.size());    // dim0 cast only
  EXPECT_EQ(ao_mx.backward.size(), ao_tw.backward.size() + 7);  // dim0, dim1, input's dim1
}

TEST(Fp8Recipes, EachRecipeIsRefusedWhereItDoesNotRun) {
  auto path = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const SpecError& e) {
      return e.path();
    }
    return std::string();
  };
  EXPECT_EQ(path([] { llama3_8b_fp8("megatron", "rowwise"); }), "strategy.fp8_recipe");
  EXPECT_EQ(path([] { llama3_8b_fp8("pytorch", "blockwise"); }), "strategy.fp8_recipe");
  EXPECT_EQ(path([] { llama3_8b_fp8("megatron", "mxfp8"); }), "strategy.fp8_recipe");  // H100
  EXPECT_EQ(path([] { llama3_8b_fp8("pytorch", "sixteenwise"); }), "strategy.fp8_recipe");
  nlohmann::json j = llama3_8b_json("pytorch");
  j["strategy"]["fp8_recipe"] = "rowwise";  // bf16 training
  EXPECT_EQ(path([&] { scenario::parse_scenario(j); }), "strategy.fp8_recipe");
  EXPECT_EQ(path([] { llama3_8b_fp8("megatron", "mxfp8", "gb200-nvl72"); }), "");
  // Written only when not the default; read back the same.
  const auto s = llama3_8b_fp8("pytorch", "rowwise");
  EXPECT_EQ(scenario::to_json(s.strategy)["fp8_recipe"], "rowwise");
  EXPECT_FALSE(
      scenario::to_json(llama3_8b_fp8("pytorch", "tensorwise").strategy).contains("fp8_recipe"));
  // The command line's --stack is named when it is what conflicts.
  scenario::StrategySpec st = s.strategy;
  EXPECT_EQ(path([&] {
              scenario::apply_stack_flags(st, {"megatron", false, ""}, s.cluster.gpu);
            }),
            "--stack");
  scenario::StrategySpec st2 = s.strategy;  // an H100 has no MX tensor cores
  EXPECT_EQ(path([&] {
              scenario::apply_stack_flags(st2, {"", false, "mxfp8"}, s.cluster.gpu);
            }),
            "--fp8_recipe");
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
