// Model states: the ZeRO paper's formulas, exactly, and the precision/optimizer variants.
#include <gtest/gtest.h>

#include "engine/memory/model_states.hpp"
#include "engine/scenario/error.hpp"
#include "engine/scenario/units.hpp"

namespace stratagem::memory {
namespace {

scenario::StrategySpec mixed_adam() {
  scenario::StrategySpec s;
  s.precision = scenario::Precision::fp16;
  s.optimizer = scenario::Optimizer::adam;
  return s;
}

// ZeRO paper (Rajbhandari et al. 2020), figure 1: Ψ = 7.5B, N = 64, K = 12.
constexpr double kPsi = 7.5e9;
constexpr int kN = 64;

TEST(ZeroPaper, Figure1Totals) {
  const auto s = mixed_adam();
  EXPECT_DOUBLE_EQ(scenario::zero_k(s), 12.0);
  // baseline (2+2+K)Ψ = 120 GB
  EXPECT_DOUBLE_EQ(zero_model_states(kPsi, kN, 0, s).gpu_bytes(), 120.0 * units::kGB);
  // ZeRO-1: 2Ψ + 2Ψ + KΨ/N = 31.40625 GB (31.4 GB in the figure)
  EXPECT_DOUBLE_EQ(zero_model_states(kPsi, kN, 1, s).gpu_bytes(), 31.40625 * units::kGB);
  // ZeRO-2: 2Ψ + (2+K)Ψ/N = 16.640625 GB (16.6 GB)
  EXPECT_DOUBLE_EQ(zero_model_states(kPsi, kN, 2, s).gpu_bytes(), 16.640625 * units::kGB);
  // ZeRO-3: (2+2+K)Ψ/N = 1.875 GB (1.9 GB)
  EXPECT_DOUBLE_EQ(zero_model_states(kPsi, kN, 3, s).gpu_bytes(), 1.875 * units::kGB);
}

TEST(ZeroPaper, ClassesPerStage) {
  const auto s = mixed_adam();
  const ModelStates z0 = zero_model_states(kPsi, kN, 0, s);
  EXPECT_DOUBLE_EQ(z0.params_bytes, 2 * kPsi);
  EXPECT_DOUBLE_EQ(z0.grads_bytes, 2 * kPsi);
  EXPECT_DOUBLE_EQ(z0.optimizer_bytes, 8 * kPsi);
  EXPECT_DOUBLE_EQ(z0.master_weights_bytes, 4 * kPsi);
  const ModelStates z1 = zero_model_states(kPsi, kN, 1, s);
  EXPECT_DOUBLE_EQ(z1.params_bytes, 2 * kPsi);
  EXPECT_DOUBLE_EQ(z1.grads_bytes, 2 * kPsi);
  EXPECT_DOUBLE_EQ(z1.optimizer_bytes, 8 * kPsi / kN);
  EXPECT_DOUBLE_EQ(z1.master_weights_bytes, 4 * kPsi / kN);
  const ModelStates z2 = zero_model_states(kPsi, kN, 2, s);
  EXPECT_DOUBLE_EQ(z2.params_bytes, 2 * kPsi);
  EXPECT_DOUBLE_EQ(z2.grads_bytes, 2 * kPsi / kN);
  EXPECT_DOUBLE_EQ(z2.optimizer_bytes, 8 * kPsi / kN);
  const ModelStates z3 = zero_model_states(kPsi, kN, 3, s);
  EXPECT_DOUBLE_EQ(z3.params_bytes, 2 * kPsi / kN);
  EXPECT_DOUBLE_EQ(z3.grads_bytes, 2 * kPsi / kN);
  EXPECT_DOUBLE_EQ(z3.master_weights_bytes, 4 * kPsi / kN);
  for (const ModelStates& m : {z0, z1, z2, z3}) EXPECT_DOUBLE_EQ(m.host_bytes, 0.0);
}

TEST(ModelStates, Bf16MatchesFp16ExceptLossScale) {
  auto bf16 = mixed_adam();
  bf16.precision = scenario::Precision::bf16;
  for (int stage = 0; stage <= 3; ++stage) {
    const ModelStates a = zero_model_states(kPsi, kN, stage, bf16);
    const ModelStates b = zero_model_states(kPsi, kN, stage, mixed_adam());
    EXPECT_DOUBLE_EQ(a.gpu_bytes(), b.gpu_bytes());
    EXPECT_DOUBLE_EQ(a.loss_scale_bytes, 0.0);
    EXPECT_DOUBLE_EQ(b.loss_scale_bytes, 8.0);  // fp16: scale + found-inf flag, fp32 each
  }
}

TEST(ModelStates, Fp32IsSixteenBytesPerParamWithoutMaster) {
  scenario::StrategySpec s;  // mixed_precision "no"
  s.optimizer = scenario::Optimizer::adamw;
  const ModelStates m = zero_model_states(kPsi, kN, 0, s);
  EXPECT_DOUBLE_EQ(m.params_bytes, 4 * kPsi);
  EXPECT_DOUBLE_EQ(m.grads_bytes, 4 * kPsi);
  EXPECT_DOUBLE_EQ(m.optimizer_bytes, 8 * kPsi);
  EXPECT_DOUBLE_EQ(m.master_weights_bytes, 0.0);
  EXPECT_DOUBLE_EQ(m.gpu_bytes(), 16 * kPsi);
  EXPECT_DOUBLE_EQ(zero_model_states(kPsi, kN, 1, s).gpu_bytes(), 8 * kPsi + 8 * kPsi / kN);
  EXPECT_DOUBLE_EQ(zero_model_states(kPsi, kN, 2, s).gpu_bytes(), 4 * kPsi + 12 * kPsi / kN);
  EXPECT_DOUBLE_EQ(zero_model_states(kPsi, kN, 3, s).gpu_bytes(), 16 * kPsi / kN);
}

TEST(ModelStates, PureBf16WithoutMasterIsTwelveBytesPerParam) {
  auto s = mixed_adam();
  s.precision = scenario::Precision::bf16;
  s.master_weights = false;
  const ModelStates m = zero_model_states(kPsi, kN, 0, s);
  EXPECT_DOUBLE_EQ(m.master_weights_bytes, 0.0);
  EXPECT_DOUBLE_EQ(m.gpu_bytes(), (2 + 2 + 8) * kPsi);
  EXPECT_DOUBLE_EQ(zero_model_states(kPsi, kN, 3, s).gpu_bytes(), 12 * kPsi / kN);
}

TEST(ModelStates, SgdWithMomentumKeepsFourBytes) {
  auto s = mixed_adam();
  s.optimizer = scenario::Optimizer::sgd;
  EXPECT_DOUBLE_EQ(zero_model_states(kPsi, kN, 0, s).gpu_bytes(), (2 + 2 + 4 + 4) * kPsi);
  s.precision = scenario::Precision::no;
  EXPECT_DOUBLE_EQ(zero_model_states(kPsi, kN, 0, s).gpu_bytes(), (4 + 4 + 4) * kPsi);
}

TEST(ModelStates, OffloadMovesOptimizerAndMasterToHost) {
  auto s = mixed_adam();
  s.offload_optimizer = scenario::Offload::cpu;
  const ModelStates m = zero_model_states(kPsi, kN, 2, s);
  EXPECT_DOUBLE_EQ(m.optimizer_bytes, 0.0);
  EXPECT_DOUBLE_EQ(m.master_weights_bytes, 0.0);
  EXPECT_DOUBLE_EQ(m.host_bytes, 12 * kPsi / kN);
  EXPECT_DOUBLE_EQ(m.gpu_bytes(), 2 * kPsi + 2 * kPsi / kN);
  const ModelStates m3 = zero_model_states(kPsi, kN, 3, s);
  EXPECT_DOUBLE_EQ(m3.gpu_bytes(), 4 * kPsi / kN);
  EXPECT_DOUBLE_EQ(m3.host_bytes, 12 * kPsi / kN);
}

TEST(ModelStates, FsdpShardingsCountLikeZero3) {
  auto s = mixed_adam();
  for (auto sharding : {scenario::Sharding::fsdp_full_shard, scenario::Sharding::fsdp_shard_grad_op,
                        scenario::Sharding::fsdp_hybrid_shard}) {
    s.sharding = sharding;
    EXPECT_DOUBLE_EQ(model_states(kPsi, kN, s).gpu_bytes(), 16 * kPsi / kN);
  }
}

TEST(ModelStates, ZeroStageOutOfRangeIsASpecError) {
  EXPECT_THROW(zero_model_states(kPsi, kN, 4, mixed_adam()), SpecError);
  EXPECT_THROW(zero_model_states(kPsi, kN, -1, mixed_adam()), SpecError);
}

}  // namespace
}  // namespace stratagem::memory
