// The Accelerator end to end: user programs started by `stratagem launch` on 2 CPU processes
// (Gloo) against 1 process, data sharding, overlap from the trace, failure reporting, fp16
// skipped steps, save/load, and the trace/export files the rest of Stratagem reads.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "engine/accelerate/data_loader.hpp"
#include "engine/accelerate/options.hpp"
#include "engine/result/result.hpp"
#include "engine/scenario/error.hpp"
#include "tests/accelerate/accel_test_util.hpp"

namespace stratagem::test {
namespace {

namespace fs = std::filesystem;
using accelerate::DataLoaderOptions;
using accelerate::shard_indices;

// ---- data sharding (DistributedSampler's rules) -----------------------------------------

TEST(AccelerateData, ShardsAreDisjointAndCoverTheDataset) {
  for (bool shuffle : {false, true}) {
    for (int world : {1, 2, 3, 4}) {
      for (std::int64_t n : {1, 7, 10, 12, 1000}) {
        DataLoaderOptions o;
        o.shuffle = shuffle;
        std::multiset<std::int64_t> seen;
        std::size_t per_rank = 0;
        for (int r = 0; r < world; ++r) {
          const auto mine = shard_indices(n, r, world, o, /*epoch=*/3);
          if (r == 0) per_rank = mine.size();
          EXPECT_EQ(mine.size(), per_rank) << "every process gets as many samples";
          seen.insert(mine.begin(), mine.end());
        }
        const std::int64_t padded = (n + world - 1) / world * world;
        EXPECT_EQ(static_cast<std::int64_t>(seen.size()), padded);
        for (std::int64_t i = 0; i < n; ++i) EXPECT_GE(seen.count(i), 1u) << "covers " << i;
        // Disjoint but for the padding, which repeats the first (padded − n) of the list.
        std::int64_t repeats = 0;
        for (std::int64_t i = 0; i < n; ++i)
          repeats += static_cast<std::int64_t>(seen.count(i)) - 1;
        EXPECT_EQ(repeats, padded - n) << "n=" << n << " world=" << world;
      }
    }
  }
}

TEST(AccelerateData, DropLastMakesShardsStrictlyDisjoint) {
  DataLoaderOptions o;
  o.shuffle = true;
  o.drop_last = true;
  std::set<std::int64_t> seen;
  for (int r = 0; r < 3; ++r) {
    for (auto i : shard_indices(10, r, 3, o, 0)) EXPECT_TRUE(seen.insert(i).second) << i;
  }
  EXPECT_EQ(seen.size(), 9u);
}

TEST(AccelerateData, SplitBatchesSeeTheSameSamplesAsOneProcess) {
  DataLoaderOptions o;
  o.shuffle = true;
  const auto one = shard_indices(64, 0, 1, o, 1);
  const auto r0 = shard_indices(64, 0, 2, o, 1), r1 = shard_indices(64, 1, 2, o, 1);
  // Global batch 8 = 4 per process: step t's samples are the same set.
  for (int t = 0; t < 8; ++t) {
    std::multiset<std::int64_t> a(one.begin() + 8 * t, one.begin() + 8 * t + 8);
    std::multiset<std::int64_t> b(r0.begin() + 4 * t, r0.begin() + 4 * t + 4);
    b.insert(r1.begin() + 4 * t, r1.begin() + 4 * t + 4);
    EXPECT_EQ(a, b) << "step " << t;
  }
}

TEST(AccelerateOptions, BadVariablesNameThemselves) {
  try {
    accelerate::AcceleratorOptions::from_vars({{"STRATAGEM_MIXED_PRECISION", "fp8"}});
    FAIL();
  } catch (const SpecError& e) {
    EXPECT_EQ(e.path(), "STRATAGEM_MIXED_PRECISION");
  }
  try {
    accelerate::AcceleratorOptions::from_vars({{"STRATAGEM_SHARDING", "zero9"}});
    FAIL();
  } catch (const SpecError& e) {
    EXPECT_EQ(e.path(), "STRATAGEM_SHARDING");
  }
  const auto o = accelerate::AcceleratorOptions::from_vars(
      {{"STRATAGEM_SHARDING", "SHARD_GRAD_OP"}, {"STRATAGEM_FSDP_WRAP_CLS", "Block,Layer"}});
  EXPECT_EQ(o.sharding, scenario::Sharding::fsdp_shard_grad_op);
  EXPECT_EQ(o.fsdp_wrap_cls, (std::vector<std::string>{"Block", "Layer"}));
}

// ---- 2 processes against 1 --------------------------------------------------------------

constexpr const char* kSplit = "STRATAGEM_SPLIT_BATCHES=1";

std::vector<float> reference_params(const TempDir& dir) {
  static std::vector<float> ref;
  if (ref.empty()) {
    const std::string out = dir / "ref.bin";
    const Job r = launch(kSplit, "--num_processes 1", "--steps 5 --batch 16 --out " + out);
    EXPECT_EQ(r.code, 0) << r.output;
    ref = read_floats(out);
  }
  return ref;
}

struct Case {
  const char* name;
  const char* flags;
  int batch;  ///< global batch per micro-step (accumulation halves it: same samples per step)
  const char* program_flags = "";
};

class TwoProcesses : public ::testing::TestWithParam<Case> {};

TEST_P(TwoProcesses, SameParametersAsOneProcessAfterFiveSteps) {
  TempDir dir;
  const auto ref = reference_params(dir);
  ASSERT_FALSE(ref.empty());
  const std::string out = dir / "two.bin";
  const Case c = GetParam();
  const Job r = launch(kSplit, std::string("--num_processes 2 ") + c.flags,
                       std::string(c.program_flags) + " --steps 5 --batch " +
                           std::to_string(c.batch) + " --out " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_LT(max_abs_diff(read_floats(out), ref), 1e-5) << c.flags;
}

INSTANTIATE_TEST_SUITE_P(
    Strategies, TwoProcesses,
    ::testing::Values(
        Case{"DDP", "--sharding ddp", 16}, Case{"ZeRO1", "--zero_stage 1", 16},
        Case{"ZeRO2", "--zero_stage 2", 16},
        Case{"FullShard",
             "--fsdp_sharding_strategy FULL_SHARD --fsdp_transformer_layer_cls_to_wrap Block", 16},
        Case{"ShardGradOp", "--fsdp_sharding_strategy SHARD_GRAD_OP --fsdp_min_num_params 1000",
             16},
        Case{"DDPAccumulation", "--sharding ddp --gradient_accumulation_steps 2", 8},
        Case{"FullShardAccumulation", "--use_fsdp --gradient_accumulation_steps 2", 8},
        // The blocks in a Sequential: freed during the forward too.
        Case{
            "FullShardSequentialAccumulation",
            "--use_fsdp --fsdp_transformer_layer_cls_to_wrap Block --gradient_accumulation_steps 2",
            8, "--seq 1"},
        Case{"DDPSequential", "--sharding ddp", 16, "--seq 1"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(Accelerate, AccelerateConfigFileSetsTheJobAndStrategy) {
  TempDir dir;
  const auto ref = reference_params(dir);
  ASSERT_FALSE(ref.empty());
  {
    std::ofstream yaml(dir / "fsdp.yaml");
    yaml << "compute_environment: LOCAL_MACHINE\n"
            "distributed_type: FSDP\n"
            "fsdp_config:\n"
            "  fsdp_sharding_strategy: FULL_SHARD\n"
            "  fsdp_transformer_layer_cls_to_wrap: Block\n"
            "mixed_precision: 'no'\n"
            "num_machines: 1\n"
            "num_processes: 2\n"
            "use_cpu: true\n";
  }
  const Job r = launch(
      kSplit, "--config_file " + (dir / "fsdp.yaml"),
      "--steps 5 --batch 16 --out " + (dir / "yaml.bin") + " --trace " + (dir / "yaml.json"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_LT(max_abs_diff(read_floats(dir / "yaml.bin"), ref), 1e-5);
  // Three Block units and the root: four reduce-scatters per step.
  const result::RunResult res = result::load_result(dir / "yaml.json");
  ASSERT_EQ(res.ranks.size(), 2u);
  int reduce_scatters = 0;
  for (const auto& s : res.ranks[0].spans)
    reduce_scatters += s.kind == result::SpanKind::reduce_scatter;
  EXPECT_EQ(reduce_scatters, 4);
  // FULL_SHARD really frees: gathered parameters go down unit by unit during the backward and
  // are all back after the step's all-gather.
  const auto& mem = res.ranks[0].memory;
  ASSERT_GE(mem.bytes.size(), 3u);
  const int gathered = static_cast<int>(plan::TensorClass::gathered_params);
  double lo = INFINITY, hi = 0;
  for (const auto& b : mem.bytes) {
    lo = std::min(lo, b[gathered]);
    hi = std::max(hi, b[gathered]);
  }
  EXPECT_GT(hi, 0);
  EXPECT_LT(lo, hi / 2) << "units freed in backward";

  {
    std::ofstream bad(dir / "bad.yaml");
    bad << "distributed_type: MULTI_CPU\nnum_processes: 2\nmixed_precision: fp9\n";
  }
  const Job b = launch("", "--config_file " + (dir / "bad.yaml"), "");
  EXPECT_EQ(b.code, 2) << b.output;
  EXPECT_NE(b.output.find("bad.yaml:3:18: mixed_precision"), std::string::npos) << b.output;
}

TEST(Accelerate, FullShardFreesSequentialUnitsDuringTheForward) {
  // The blocks in a Sequential: each is gathered just before its forward and freed after it,
  // gathered again just before its backward; the result still equals one process.
  TempDir dir;
  const auto ref = reference_params(dir);
  ASSERT_FALSE(ref.empty());
  const Job r = launch(
      kSplit,
      "--num_processes 2 --fsdp_sharding_strategy FULL_SHARD "
      "--fsdp_transformer_layer_cls_to_wrap Block",
      "--seq 1 --steps 5 --batch 16 --out " + (dir / "seq.bin") + " --trace " + (dir / "seq.json"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_LT(max_abs_diff(read_floats(dir / "seq.bin"), ref), 1e-5);
  const result::RunResult res = result::load_result(dir / "seq.json");
  const auto& rank = res.ranks.at(0);
  double fwd_begin = -1, fwd_end = -1;
  int gathers = 0;
  for (const auto& s : rank.spans) {
    if (s.kind == result::SpanKind::forward) fwd_begin = s.start_s, fwd_end = s.end_s;
    gathers += s.kind == result::SpanKind::all_gather;
  }
  ASSERT_GT(fwd_end, fwd_begin);
  // Per step: the root and three blocks after the optimizer, and each block once more before
  // its backward.
  EXPECT_EQ(gathers, 4 + 3) << "all-gathers in the traced step";
  const int gathered = static_cast<int>(plan::TensorClass::gathered_params);
  double hi = 0, at_forward_end = -1;
  for (std::size_t i = 0; i < rank.memory.time_s.size(); ++i) {
    hi = std::max(hi, rank.memory.bytes[i][gathered]);
    if (rank.memory.time_s[i] <= fwd_end) at_forward_end = rank.memory.bytes[i][gathered];
  }
  // At the end of the forward only the root unit (stem, head) is still gathered.
  ASSERT_GE(at_forward_end, 0);
  EXPECT_LT(at_forward_end, hi / 2) << "blocks freed during the forward";
}

// Every "step N loss X" line's X, in order.
std::vector<double> losses(const std::string& output) {
  std::vector<double> v;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    const auto at = line.find("] step ");
    const auto l = line.find(" loss ");
    if (at == std::string::npos || l == std::string::npos) continue;
    v.push_back(std::stod(line.substr(l + 6)));
  }
  return v;
}

class Pipelines : public ::testing::TestWithParam<std::string> {};

TEST_P(Pipelines, TwoStagesLoseLikeOneProcess) {
  TempDir dir;
  const Job one = launch("", "--num_processes 1", "--pipeline 1 --steps 5 --batch 16");
  ASSERT_EQ(one.code, 0) << one.output;
  const Job two = launch("STRATAGEM_PIPELINE_MICRO_BATCHES=4",
                         "--num_processes 2 --pipeline_stages 2 --pipeline_schedule " + GetParam(),
                         "--pipeline 1 --steps 5 --batch 16 --trace " + (dir / "pp.json"));
  ASSERT_EQ(two.code, 0) << two.output;
  const auto a = losses(one.output), b = losses(two.output);
  ASSERT_EQ(a.size(), 5u) << one.output;
  ASSERT_EQ(b.size(), 5u) << two.output;
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << "step " << i + 1;
  const result::RunResult res = result::load_result(dir / "pp.json");
  ASSERT_EQ(res.ranks.size(), 2u);
  int sends = 0, recvs = 0;
  for (const auto& s : res.ranks[0].spans) sends += s.kind == result::SpanKind::send;
  for (const auto& s : res.ranks[1].spans) recvs += s.kind == result::SpanKind::recv;
  EXPECT_EQ(sends, 4) << "stage 0 sends each micro-batch's activations";
  EXPECT_EQ(recvs, 4);
}

INSTANTIATE_TEST_SUITE_P(Schedules, Pipelines, ::testing::Values("gpipe", "1f1b"));

class DataParallelPipelines : public ::testing::TestWithParam<std::string> {};

TEST_P(DataParallelPipelines, TwoPipelinesLoseLikeOneProcess) {
  // 4 processes, 2 stages: two pipelines, each on half of every global batch of 16
  // (split_batches), their stages averaging gradients (or reduce-scattering them and stepping
  // optimizer shards with ZeRO). Process r is stage r / 2 of replica r % 2.
  TempDir dir;
  const Job one = launch("", "--num_processes 1", "--pipeline 1 --steps 4 --batch 16");
  ASSERT_EQ(one.code, 0) << one.output;
  const Job four =
      launch("STRATAGEM_PIPELINE_MICRO_BATCHES=2 STRATAGEM_SPLIT_BATCHES=1",
             "--num_processes 4 --pipeline_stages 2 --pipeline_schedule 1f1b " + GetParam(),
             "--pipeline 1 --steps 4 --batch 16 --trace " + (dir / "dp.json"));
  ASSERT_EQ(four.code, 0) << four.output;
  const auto a = losses(one.output), b = losses(four.output);
  ASSERT_EQ(a.size(), 4u) << one.output;
  ASSERT_EQ(b.size(), 4u) << four.output;
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << "step " << i + 1;
  const result::RunResult res = result::load_result(dir / "dp.json");
  ASSERT_EQ(res.ranks.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    int sends = 0, recvs = 0;
    for (const auto& s : res.ranks[r].spans) {
      sends += s.kind == result::SpanKind::send;
      recvs += s.kind == result::SpanKind::recv;
    }
    // Stage 0 (ranks 0, 1) sends each of its 2 micro-batches; stage 1 (ranks 2, 3) receives.
    EXPECT_EQ(sends, r < 2 ? 2 : 0) << "rank " << r;
    EXPECT_EQ(recvs, r < 2 ? 0 : 2) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Sharding, DataParallelPipelines,
                         ::testing::Values("--sharding ddp", "--zero_stage 1"));

TEST(Accelerate, PipelinesShardOnlyOptimizerStates) {
  for (const std::string flag : {"--use_fsdp", "--zero_stage 2"}) {
    const Job r = launch("", "--num_processes 2 --pipeline_stages 2 " + flag, "--pipeline 1");
    EXPECT_NE(r.code, 0) << flag;
    EXPECT_NE(r.output.find("STRATAGEM_SHARDING"), std::string::npos) << flag << r.output;
  }
}

TEST(Accelerate, Fp16PipelinesScaleTheLossAndSkipOverflowsOnEveryStage) {
  const Job one =
      launch("", "--num_processes 1 --mixed_precision fp16", "--pipeline 1 --steps 4 --batch 16");
  ASSERT_EQ(one.code, 0) << one.output;
  const Job two = launch("STRATAGEM_PIPELINE_MICRO_BATCHES=4",
                         "--num_processes 2 --pipeline_stages 2 --mixed_precision fp16",
                         "--pipeline 1 --steps 4 --batch 16");
  ASSERT_EQ(two.code, 0) << two.output;
  const auto a = losses(one.output), b = losses(two.output);
  ASSERT_EQ(a.size(), 4u) << one.output;
  ASSERT_EQ(b.size(), 4u) << two.output;
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << "step " << i + 1;
  // An inf loss on the last stage: both stages skip the step (hysteresis 2 keeps the scale).
  const Job inf = launch("", "--num_processes 2 --pipeline_stages 2 --mixed_precision fp16",
                         "--pipeline 1 --steps 3 --batch 16 --inf_step 1");
  ASSERT_EQ(inf.code, 0) << inf.output;
  EXPECT_NE(inf.output.find("skipped step 1 (loss scale now 65536)"), std::string::npos)
      << inf.output;
  const auto c = losses(inf.output);
  ASSERT_EQ(c.size(), 3u) << inf.output;
  EXPECT_TRUE(std::isfinite(c[2])) << inf.output;
}

TEST(Accelerate, PipelineStagesMustDivideTheProcesses) {
  const Job r = launch("", "--num_processes 3 --pipeline_stages 2", "--pipeline 1 --steps 1");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("STRATAGEM_PIPELINE_STAGES"), std::string::npos) << r.output;
}

// ---- overlap, failures, fp16, state, trace ------------------------------------------------

TEST(Accelerate, FirstBucketAllReduceStartsBeforeBackwardEnds) {
  TempDir dir;
  const std::string trace = dir / "trace.json";
  // Tiny buckets (100 bytes): one per parameter tensor, so the first is ready long before the last.
  const Job r = launch("STRATAGEM_BUCKET_MB=0.0001", "--num_processes 2",
                       "--steps 3 --batch 64 --trace " + trace);
  ASSERT_EQ(r.code, 0) << r.output;
  const result::RunResult res = result::load_result(trace);
  ASSERT_EQ(res.ranks.size(), 2u);
  EXPECT_EQ(res.executor, "real");
  for (const auto& rank : res.ranks) {
    double backward_end = -1, first_reduce = -1;
    int reduces = 0;
    for (const auto& s : rank.spans) {
      if (s.kind == result::SpanKind::backward) backward_end = s.end_s;
      if (s.kind == result::SpanKind::all_reduce) {
        if (first_reduce < 0 || s.start_s < first_reduce) first_reduce = s.start_s;
        ++reduces;
      }
    }
    EXPECT_GT(reduces, 4) << "one bucket per parameter tensor";
    ASSERT_GE(backward_end, 0);
    EXPECT_LT(first_reduce, backward_end) << "rank " << rank.rank;
  }
}

TEST(Accelerate, AThrowingRankEndsTheJobAndIsNamed) {
  const Job r =
      launch("", "--num_processes 2 --kill_grace 1", "--steps 50 --throw_rank 1 --throw_step 2");
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("rank 1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("injected failure"), std::string::npos) << r.output;
}

TEST(Accelerate, Fp16OverflowSkipsTheStepAndHalvesTheScale) {
  const Job r = launch("", "--num_processes 2 --mixed_precision fp16", "--steps 4 --inf_step 1");
  ASSERT_EQ(r.code, 0) << r.output;
  // DeepSpeed's hysteresis 2: the first overflow keeps the scale, skipping the step.
  EXPECT_NE(r.output.find("skipped step 1 (loss scale now 65536)"), std::string::npos) << r.output;
}

class SaveLoad : public ::testing::TestWithParam<std::string> {};

TEST_P(SaveLoad, ResumesTheSameTrajectory) {
  TempDir dir;
  const std::string flags = "--num_processes 2 " + GetParam();
  const Job full = launch(kSplit, flags, "--steps 6 --batch 16 --out " + (dir / "full.bin"));
  ASSERT_EQ(full.code, 0) << full.output;
  const Job first =
      launch(kSplit, flags, "--steps 3 --batch 16 --save_at 3 --save_dir " + (dir / "ckpt"));
  ASSERT_EQ(first.code, 0) << first.output;
  EXPECT_TRUE(fs::exists(dir / "ckpt/checkpoint-3/manifest.json"));
  const Job resumed =
      launch(kSplit, flags,
             "--steps 6 --batch 16 --resume " + (dir / "ckpt") + " --out " + (dir / "resumed.bin"));
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_LT(max_abs_diff(read_floats(dir / "resumed.bin"), read_floats(dir / "full.bin")), 1e-6);
}

TEST(Accelerate, StateSavedAtAnEpochsEndResumesWithTheNextEpoch) {
  // 512 samples, 16 per step: an epoch is 32 steps.
  TempDir dir;
  const std::string flags = "--num_processes 2";
  const Job full = launch(kSplit, flags, "--steps 34 --batch 16 --out " + (dir / "full.bin"));
  ASSERT_EQ(full.code, 0) << full.output;
  const Job first =
      launch(kSplit, flags, "--steps 32 --batch 16 --save_at 32 --save_dir " + (dir / "ckpt"));
  ASSERT_EQ(first.code, 0) << first.output;
  const Job resumed = launch(
      kSplit, flags,
      "--steps 34 --batch 16 --resume " + (dir / "ckpt") + " --out " + (dir / "resumed.bin"));
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_LT(max_abs_diff(read_floats(dir / "resumed.bin"), read_floats(dir / "full.bin")), 1e-6);
}

// The training loader's position comes back even when an evaluation loader was prepared after
// it (the checkpoint used to keep only the last one prepared: training restarted at epoch 0).
TEST(Accelerate, ASecondLoaderPreparedAfterTheTrainingOneKeepsItsOwnPosition) {
  TempDir dir;
  const std::string flags = "--num_processes 2";
  const Job full =
      launch(kSplit, flags, "--steps 6 --batch 16 --eval_loader 1 --out " + (dir / "full.bin"));
  ASSERT_EQ(full.code, 0) << full.output;
  const Job first = launch(
      kSplit, flags, "--steps 3 --batch 16 --eval_loader 1 --save_at 3 --save_dir " + (dir / "ckpt"));
  ASSERT_EQ(first.code, 0) << first.output;
  const Job resumed = launch(kSplit, flags,
                             "--steps 6 --batch 16 --eval_loader 1 --resume " + (dir / "ckpt") +
                                 " --out " + (dir / "resumed.bin"));
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_LT(max_abs_diff(read_floats(dir / "resumed.bin"), read_floats(dir / "full.bin")), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Strategies, SaveLoad,
                         ::testing::Values("--zero_stage 2",
                                           "--use_fsdp --fsdp_min_num_params 1000",
                                           "--sharding ddp"));

TEST(Accelerate, TraceAndExportAreReadByTheRestOfStratagem) {
  TempDir dir;
  const Job r = launch("", "--num_processes 2 --mixed_precision bf16",
                       "--steps 2 --trace " + (dir / "t.json") + " --export " + (dir / "s.json"));
  ASSERT_EQ(r.code, 0) << r.output;
  const result::RunResult res = result::load_result(dir / "t.json");
  EXPECT_GT(res.metrics.step_time_s, 0);
  EXPECT_EQ(res.metrics.losses.size(), 2u);
  const std::string sim =
      std::string(STRATAGEM_BINARY) + " sim " + (dir / "s.json") + " > /dev/null 2>&1";
  EXPECT_EQ(std::system(sim.c_str()), 0);
}

TEST(Accelerate, ExamplesRun) {
  const std::string dir = STRATAGEM_EXAMPLES_DIR;
  const Job linear = launch("", "--num_processes 2", "1", dir + "/linear_classifier");
  ASSERT_EQ(linear.code, 0) << linear.output;
  EXPECT_NE(linear.output.find("Epoch 1, Loss:"), std::string::npos) << linear.output;
  for (const std::string flags : {"--sharding ddp", "--zero_stage 2",
                                  "--use_fsdp --fsdp_transformer_layer_cls_to_wrap EncoderLayer"}) {
    const Job text = launch("", "--num_processes 2 " + flags, "20", dir + "/text_classifier");
    ASSERT_EQ(text.code, 0) << flags << "\n" << text.output;
    EXPECT_NE(text.output.find("step 20 loss"), std::string::npos) << text.output;
  }
}

TEST(Accelerate, BadLaunchFlagsExitTwoNamingTheFlag) {
  const Job r = launch("", "--num_processes 2 --mixed_precision fp8", "");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("--mixed_precision"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace stratagem::test

namespace stratagem::test {
namespace {

// Tensor parallelism for a user's model (examples/tp_mlp.cpp: ParallelLinear layers and a
// TP plan): 2 processes in one TP group, and 4 as TP 2 × DDP 2 (ZeRO-1, FSDP) train the
// one-process model.
std::string tp_example() { return std::string(STRATAGEM_EXAMPLES_DIR) + "/tp_mlp"; }

TEST(AccelerateTensorParallel, TpGroupsAndTpTimesDdpTrainLikeOneProcess) {
  TempDir dir;
  const std::string args = " --steps 6 --batch 16 --out ";
  const Job one = launch(kSplit, "--num_processes 1", args + dir / "one.bin", tp_example());
  ASSERT_EQ(one.code, 0) << one.output;
  const auto ref = read_floats(dir / "one.bin");
  ASSERT_FALSE(ref.empty());
  // One TP group; TP 2 × DDP 2; torchtitan's 2D (FSDP over the data-parallel ranks); ZeRO-1.
  for (const std::string flags :
       {"--num_processes 2", "--num_processes 4", "--num_processes 4 --zero_stage 1",
        "--num_processes 4 --use_fsdp --fsdp_transformer_layer_cls_to_wrap Block"}) {
    const std::string out = dir / "tp.bin";
    const Job r = launch(kSplit, flags + " --tp_size 2", args + out, tp_example());
    ASSERT_EQ(r.code, 0) << r.output;
    EXPECT_LT(max_abs_diff(read_floats(out), ref), 1e-5) << flags;
  }
}

TEST(AccelerateTensorParallel, StateHoldsTheSlicesAndResumesOnlyWithTheSameTpSize) {
  TempDir dir;
  const std::string tp2 = "--num_processes 2 --tp_size 2";
  const Job straight = launch(kSplit, tp2, "--steps 6 --out " + dir / "straight.bin", tp_example());
  ASSERT_EQ(straight.code, 0) << straight.output;
  const Job first = launch(kSplit, tp2, "--steps 3 --save_dir " + dir / "ckpt", tp_example());
  ASSERT_EQ(first.code, 0) << first.output;
  const Job resumed = launch(
      kSplit, tp2, "--steps 6 --resume " + dir / "ckpt" + " --out " + dir / "resumed.bin",
      tp_example());
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_EQ(max_abs_diff(read_floats(dir / "resumed.bin"), read_floats(dir / "straight.bin")), 0);
  const Job other =
      launch(kSplit, "--num_processes 2", "--steps 6 --resume " + dir / "ckpt", tp_example());
  EXPECT_NE(other.code, 0);
  EXPECT_NE(other.output.find("written with tp_size 2"), std::string::npos) << other.output;
}

TEST(AccelerateTensorParallel, ABadPlanIsOneLineNamingTheEntry) {
  const Job missing =
      launch("", "--num_processes 2 --tp_size 2", "--steps 1 --plan missing", tp_example());
  EXPECT_NE(missing.code, 0);
  EXPECT_NE(missing.output.find("tp_plan"), std::string::npos) << missing.output;
  EXPECT_NE(missing.output.find("\"block2.fc_in\" names no module"), std::string::npos)
      << missing.output;
  const Job plain =
      launch("", "--num_processes 2 --tp_size 2", "--steps 1 --plan plain", tp_example());
  EXPECT_NE(plain.code, 0);
  EXPECT_NE(plain.output.find("\"head\" is a"), std::string::npos) << plain.output;
  EXPECT_NE(plain.output.find("not a stratagem::accelerate::ParallelLinear"), std::string::npos)
      << plain.output;
  const Job three = launch("", "--num_processes 3 --tp_size 3", "--steps 1", tp_example());
  EXPECT_NE(three.code, 0);
  EXPECT_NE(three.output.find("not divisible by tp = 3"), std::string::npos) << three.output;
}

}  // namespace
}  // namespace stratagem::test
