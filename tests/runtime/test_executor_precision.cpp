// Mixed precision in the executor: bf16 autocast and fp16 with DeepSpeed's dynamic loss
// scaling (on a CPU: fp16 storage, fp32 compute, fp16 rounding at unit boundaries).
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include "engine/runtime/loss_scaler.hpp"
#include "tests/runtime/test_executor_util.hpp"

namespace stratagem::test {
namespace {

constexpr int kSteps = 5;

std::vector<double> losses_of(const nlohmann::json& strategy, int world, int steps = kSteps) {
  auto run = run_inproc(tiny_scenario(world, strategy), train_options(steps));
  return run.results[0].losses;
}

double max_rel(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::abs(a[i] - b[i]) / std::abs(b[i]));
  return m;
}

// Prints and records a measured difference next to its bound (docs/real-runs.md quotes them).
void report(const std::string& what, double value, double bound) {
  std::cout << "  " << what << ": max relative loss difference " << value << " (bound " << bound
            << ")\n";
  ::testing::Test::RecordProperty(what, std::to_string(value));
}

// Bounds on the largest relative difference of per-step losses over 5 steps of the tiny model
// (lr 1e-3), with what this build measured. bf16 keeps 8 mantissa bits (2^-9 ≈ 2e-3 relative
// rounding per operation), fp16 10; early losses sit near ln(vocab), where the logits are
// small and rounding moves the loss little, so the measured gaps are far below 2e-3.
constexpr double kBf16VsFp32 = 1e-3;  // measured 7.1e-5
// Two bf16 runs that split the batch differently sum their bf16 gradients in another order.
constexpr double kBf16VsBf16 = 5e-4;  // measured 2.2e-5 (DDP on 2 ranks vs one process)
// fp16 on the CPU path (fp16 storage and boundaries, fp32 arithmetic).
constexpr double kFp16VsFp32 = 2e-4;  // measured 1.1e-5 (ZeRO-2 on 2 ranks)

TEST(Precision, Bf16DdpTracksFp32) {
  const auto fp32 = losses_of({{"micro_batch_size", 2}, {"grad_accum", 4}}, 1);
  const auto bf16_single =
      losses_of({{"micro_batch_size", 2}, {"grad_accum", 4}, {"mixed_precision", "bf16"}}, 1);
  const auto bf16_ddp =
      losses_of({{"dp", 2}, {"micro_batch_size", 2}, {"mixed_precision", "bf16"}}, 2);
  report("bf16 vs fp32", max_rel(bf16_single, fp32), kBf16VsFp32);
  report("bf16 DDP vs bf16 one process", max_rel(bf16_ddp, bf16_single), kBf16VsBf16);
  EXPECT_LT(max_rel(bf16_single, fp32), kBf16VsFp32);
  EXPECT_LT(max_rel(bf16_ddp, bf16_single), kBf16VsBf16);
  EXPECT_GT(max_rel(bf16_single, fp32), 0.0) << "bf16 must actually compute in bf16";
}

TEST(Precision, Bf16Zero3AndPipeline) {
  const auto bf16_single =
      losses_of({{"micro_batch_size", 2}, {"grad_accum", 4}, {"mixed_precision", "bf16"}}, 1);
  EXPECT_LT(max_rel(losses_of({{"dp", 2},
                               {"micro_batch_size", 2},
                               {"sharding", "zero3"},
                               {"mixed_precision", "bf16"}},
                              2),
                    bf16_single),
            kBf16VsBf16);
  EXPECT_LT(max_rel(losses_of({{"pp", 2}, {"micro_batch_size", 2}, {"mixed_precision", "bf16"}}, 2),
                    bf16_single),
            kBf16VsBf16);
}

TEST(Precision, Bf16TensorAndSequenceParallel) {
  // Megatron TP + SP in bf16: activations and their gradients cross the TP collectives in
  // bf16, summed in another order than one process sums them.
  const auto bf16_single =
      losses_of({{"micro_batch_size", 2}, {"grad_accum", 4}, {"mixed_precision", "bf16"}}, 1);
  const auto bf16_tp = losses_of({{"tp", 2},
                                  {"sequence_parallel", true},
                                  {"micro_batch_size", 2},
                                  {"grad_accum", 4},
                                  {"mixed_precision", "bf16"}},
                                 2);
  report("bf16 TP 2 + SP vs bf16 one process", max_rel(bf16_tp, bf16_single), kBf16VsBf16);
  EXPECT_LT(max_rel(bf16_tp, bf16_single), kBf16VsBf16);
}

TEST(Precision, Fp16TensorParallelTracksFp32) {
  const auto fp32 = losses_of({{"micro_batch_size", 2}, {"grad_accum", 4}}, 1);
  const auto fp16 = losses_of(
      {{"tp", 2}, {"micro_batch_size", 2}, {"grad_accum", 4}, {"mixed_precision", "fp16"}}, 2);
  report("fp16 TP 2 vs fp32", max_rel(fp16, fp32), kFp16VsFp32);
  EXPECT_LT(max_rel(fp16, fp32), kFp16VsFp32);
  EXPECT_GT(max_rel(fp16, fp32), 0.0);
}

TEST(Precision, Fp16TracksFp32) {
  const auto fp32 = losses_of({{"micro_batch_size", 2}, {"grad_accum", 4}}, 1);
  const auto fp16 = losses_of(
      {{"dp", 2}, {"micro_batch_size", 2}, {"sharding", "zero2"}, {"mixed_precision", "fp16"}}, 2);
  report("fp16 ZeRO-2 vs fp32", max_rel(fp16, fp32), kFp16VsFp32);
  EXPECT_LT(max_rel(fp16, fp32), kFp16VsFp32);
  EXPECT_GT(max_rel(fp16, fp32), 0.0);
}

TEST(Precision, Fp16SkipsInjectedInfHalvesAndRecovers) {
  // Scale 2^8, doubled after 2 clean steps, halved at once on overflow (hysteresis 1).
  auto s = tiny_scenario(2, {{"dp", 2},
                             {"micro_batch_size", 2},
                             {"mixed_precision", "fp16"},
                             {"initial_scale_power", 8},
                             {"loss_scale_window", 2},
                             {"hysteresis", 1}});
  auto opts = train_options(kSteps);
  opts.inject_inf_steps = {2};
  opts.inject_inf_rank = 1;  // rank 0 learns of it through the found-inf all-reduce
  auto run = run_inproc(s, opts);
  for (int r = 0; r < 2; ++r) {
    const auto& res = run.results[r];
    EXPECT_EQ(res.skipped, (std::vector<bool>{false, false, true, false, false})) << "rank " << r;
    EXPECT_EQ(res.loss_scales, (std::vector<double>{256, 256, 512, 256, 256})) << "rank " << r;
    EXPECT_EQ(run.trainers[r]->executor().state().optimizer_steps(), kSteps - 1);
    EXPECT_EQ(run.trainers[r]->executor().scaler()->scale(), 512);
  }
  // Recovery: training goes on learning after the skipped step.
  EXPECT_LT(run.results[0].losses.back(), run.results[0].losses[2]);
}

TEST(Precision, Fp16HugeScaleOverflowsUntilItFits) {
  // 2^40 times a loss gradient overflows fp16 (max 65504) in the backward: the scaler must
  // skip and halve until the scaled gradients fit, as DeepSpeed does on a GPU.
  auto s = tiny_scenario(1, {{"micro_batch_size", 8},
                             {"mixed_precision", "fp16"},
                             {"initial_scale_power", 40},
                             {"hysteresis", 1}});
  auto run = run_inproc(s, train_options(30));
  const auto& res = run.results[0];
  ASSERT_TRUE(res.skipped.front());
  int first_ok = -1;
  for (int i = 0; i < static_cast<int>(res.skipped.size()); ++i) {
    if (!res.skipped[i]) {
      first_ok = i;
      break;
    }
  }
  ASSERT_GT(first_ok, 0) << "the scale never came down far enough";
  for (int i = 0; i < first_ok; ++i) {
    EXPECT_EQ(res.loss_scales[i], std::ldexp(1.0, 40 - i)) << "step " << i;
  }
  EXPECT_TRUE(std::isfinite(res.losses.back()));
}

TEST(LossScaler, DeepSpeedHysteresis) {
  scenario::LossScaleSpec spec;
  spec.initial_scale_power = 4;
  spec.loss_scale_window = 3;
  spec.hysteresis = 2;
  spec.min_loss_scale = 4;
  runtime::DynamicLossScaler s(spec);
  EXPECT_EQ(s.scale(), 16);
  s.update(true);  // first overflow: hysteresis 2 → 1, scale kept
  EXPECT_EQ(s.scale(), 16);
  s.update(true);  // second: halve
  EXPECT_EQ(s.scale(), 8);
  s.update(true);  // hysteresis stays used up: halve again
  EXPECT_EQ(s.scale(), 4);
  s.update(true);  // not below min_loss_scale
  EXPECT_EQ(s.scale(), 4);
  s.update(false);
  s.update(false);
  EXPECT_EQ(s.scale(), 4);
  s.update(false);  // 3 clean steps since the last overflow: double, hysteresis restored
  EXPECT_EQ(s.scale(), 8);
  s.update(true);  // hysteresis 2 again: kept
  EXPECT_EQ(s.scale(), 8);
}

}  // namespace
}  // namespace stratagem::test
