// Megatron tensor and sequence parallelism executed for real: every TP strategy trains the
// same model as one process — same losses (1e-5 relative) and, reassembled from the TP
// ranks' slices, the same parameters (1e-5) after 5 fp32 steps on the same global batch —
// and its TP collectives carry exactly the plan's bytes. Ranks are threads over the
// in-process communicator.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/plan/builder.hpp"
#include "engine/runtime/executor_run.hpp"
#include "engine/scenario/error.hpp"
#include "tests/runtime/test_executor_util.hpp"

namespace stratagem::test {
namespace {

constexpr int kSteps = 5;
constexpr double kLossRel = 1e-5;
constexpr double kParamAbs = 1e-5;

// A vocabulary of 300 padded to 512 for tp 2: both ranks hold real rows and padding.
nlohmann::json with_vocab(nlohmann::json model) {
  if (!model.contains("vocab")) model["vocab"] = 300;
  return model;
}

const Reference& reference(const nlohmann::json& model) { return one_process(model, kSteps); }

// The plan's TP collective bytes of `rank` (what the runtime must measure per step).
double plan_tp_bytes(const plan::StepPlan& p, int rank) {
  double bytes = 0;
  for (const auto& list : p.ranks[rank].streams) {
    for (plan::OpId id : list) {
      const auto* c = std::get_if<plan::Collective>(&p.ops[id].payload);
      if (c && c->purpose == plan::CommPurpose::tensor_parallel) bytes += c->bytes;
    }
  }
  return bytes;
}

void expect_same_training(const nlohmann::json& strategy, int world, nlohmann::json model = {}) {
  model = with_vocab(model);
  const auto& ref = reference(model);
  auto s = tiny_scenario(world, strategy, model);
  auto run = run_inproc(s, train_options(kSteps));
  expect_same_losses(run, ref.losses, kLossRel);
  for (int r = 0; r < world; ++r) {
    const double want = plan_tp_bytes(run.trainers[r]->plan(), r);
    EXPECT_GT(want, 0) << "rank " << r;
    for (double got : run.results[r].tp_bytes) EXPECT_EQ(got, want) << "rank " << r;
  }
  expect_same_params(run, ref.params, s, kParamAbs);
}

const nlohmann::json kLlama = {{"norm", "rmsnorm"}, {"mlp", "swiglu"}, {"positions", "rotary"},
                               {"kv_heads", 2},     {"bias", false},   {"ffn_hidden", 96}};

TEST(ExecutorTp, TensorParallel) {
  expect_same_training({{"tp", 2}, {"micro_batch_size", 2}, {"grad_accum", 4}}, 2);
}
TEST(ExecutorTp, SequenceParallel) {
  expect_same_training(
      {{"tp", 2}, {"sequence_parallel", true}, {"micro_batch_size", 2}, {"grad_accum", 4}}, 2);
}
TEST(ExecutorTp, SequenceParallelModernBlocks) {
  // RMSNorm, SwiGLU, rotary positions (the embedding reduce-scatters), grouped-query
  // attention with one K/V head per TP rank, no biases.
  expect_same_training(
      {{"tp", 2}, {"sequence_parallel", true}, {"micro_batch_size", 2}, {"grad_accum", 4}}, 2,
      kLlama);
}
TEST(ExecutorTp, MegatronStackReducesInputGradientsBesideWeightGradients) {
  // The plan's block backward under strategy.stack megatron: [.. dgrad] reduce ‖ [wgrad]
  // [norm]; the runtime computes both gradients in the first piece and trains the same model.
  for (const bool sp : {false, true}) {
    expect_same_training({{"tp", 2},
                          {"sequence_parallel", sp},
                          {"stack", "megatron"},
                          {"micro_batch_size", 2},
                          {"grad_accum", 4}},
                         2, kLlama);
  }
}
TEST(ExecutorTp, MegatronStackWithPipelineAndFullRecompute) {
  expect_same_training({{"tp", 2},
                        {"pp", 2},
                        {"sequence_parallel", true},
                        {"stack", "megatron-legacy"},
                        {"recompute", "full"},
                        {"micro_batch_size", 2},
                        {"grad_accum", 4}},
                       4);
}
TEST(ExecutorTp, AsyncTpTrainsTheSameModel) {
  // Every all-gather and reduce-scatter of a block beside a GEMM piece of the plan's (the
  // runtime runs that GEMM with the piece after or before it).
  expect_same_training({{"tp", 2},
                        {"sequence_parallel", true},
                        {"stack", "megatron"},
                        {"async_tp", true},
                        {"micro_batch_size", 2},
                        {"grad_accum", 4}},
                       2, kLlama);
  expect_same_training({{"tp", 2},
                        {"pp", 2},
                        {"sequence_parallel", true},
                        {"compile", true},
                        {"async_tp", true},
                        {"recompute", "full"},
                        {"micro_batch_size", 2},
                        {"grad_accum", 4}},
                       4);
}
TEST(ExecutorTp, WithDataParallel) {
  expect_same_training({{"tp", 2}, {"dp", 2}, {"micro_batch_size", 2}, {"grad_accum", 2}}, 4);
}
TEST(ExecutorTp, WithPipeline) {
  expect_same_training({{"tp", 2}, {"pp", 2}, {"sequence_parallel", true},
                        {"micro_batch_size", 2}, {"grad_accum", 4}},
                       4);
}
TEST(ExecutorTp, WithFullShard) {
  // torchtitan's 2D: FSDP over the data-parallel ranks of each TP index.
  expect_same_training({{"tp", 2}, {"dp", 2}, {"sequence_parallel", true},
                        {"sharding", "FULL_SHARD"}, {"micro_batch_size", 2}, {"grad_accum", 2}},
                       4);
}
TEST(ExecutorTp, WithZero1AndPipeline) {
  // Megatron's distributed optimizer with TP and PP (2 × 2 × 2 = 8 ranks).
  expect_same_training({{"tp", 2}, {"pp", 2}, {"dp", 2}, {"sharding", "zero1"},
                        {"sequence_parallel", true}, {"micro_batch_size", 2}, {"grad_accum", 2}},
                       8);
}
TEST(ExecutorTp, FullRecompute) {
  expect_same_training({{"tp", 2}, {"sequence_parallel", true}, {"recompute", "full"},
                        {"micro_batch_size", 2}, {"grad_accum", 4}},
                       2);
}
TEST(ExecutorTp, SelectiveRecompute) {
  expect_same_training({{"tp", 2}, {"recompute", "selective"}, {"attention", "eager"},
                        {"micro_batch_size", 2}, {"grad_accum", 4}},
                       2);
}
TEST(ExecutorTp, TiedOneStage) {
  expect_same_training({{"tp", 2}, {"sequence_parallel", true}, {"micro_batch_size", 2},
                        {"grad_accum", 4}},
                       2, {{"tied_embeddings", true}});
}
TEST(ExecutorTp, TiedPipeline) {
  expect_same_training({{"tp", 2}, {"pp", 2}, {"micro_batch_size", 2}, {"grad_accum", 4}}, 4,
                       {{"tied_embeddings", true}});
}

TEST(ExecutorTp, APlanWhoseChainIsBrokenIsOneClearError) {
  auto s = tiny_scenario(2, {{"tp", 2}, {"sequence_parallel", true}, {"micro_batch_size", 2}},
                         with_vocab({}));
  auto p = plan::build_plan(s, {.fold = false});
  EXPECT_FALSE(runtime::index_tp_chains(p, 0).empty());
  for (auto& op : p.ops) {  // rank 0's first chain loses its second piece's mark
    if (op.rank == 0 && op.chain.piece == 1) {
      op.chain.piece = 2;
      break;
    }
  }
  try {
    runtime::index_tp_chains(p, 0);
    FAIL() << "expected an error";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor-parallel chain"), std::string::npos) << e.what();
  }
}

TEST(ExecutorTp, AModelTpDoesNotDivideIsOneClearError) {
  // 4 heads over tp 8 is refused by the scenario's mesh check before any tensor exists.
  try {
    auto s = tiny_scenario(8, {{"tp", 8}, {"micro_batch_size", 2}}, with_vocab({}));
    run_inproc(s, train_options(1));
    FAIL() << "expected an error";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("strategy.tp"), std::string::npos) << e.what();
  }
}

TEST(ExecutorTp, WithZero1SequenceParallel) {
  // The norms' gradients are summed over TP after the data-parallel reduce-scatter.
  expect_same_training({{"tp", 2}, {"dp", 2}, {"sharding", "zero1"}, {"sequence_parallel", true},
                        {"micro_batch_size", 2}, {"grad_accum", 2}},
                       4);
}
TEST(ExecutorTp, WithFullShardNoSequenceParallel) {
  expect_same_training(
      {{"tp", 2}, {"dp", 2}, {"sharding", "FULL_SHARD"}, {"micro_batch_size", 2}, {"grad_accum", 2}},
      4);
}
TEST(ExecutorTp, InterleavedPipeline) {
  expect_same_training({{"tp", 2}, {"pp", 2}, {"schedule", "interleaved"}, {"chunks", 2},
                        {"sequence_parallel", true}, {"micro_batch_size", 2}},
                       4);
}
}  // namespace
}  // namespace stratagem::test
