// Accelerate's training-loop semantics, each with 1 against 2 processes (Gloo): the loop of
// tests/accelerate/programs/accel_loop.cpp with clipping, a scheduler, accumulation and the
// loader-end sync, no_sync, gather_for_metrics, trackers, resume after SIGKILL, and the
// mistakes the Accelerator names.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/accelerate/accel_test_util.hpp"

namespace stratagem::test {
namespace {

constexpr const char* kLoop = STRATAGEM_ACCEL_LOOP;
constexpr const char* kSplit = "STRATAGEM_SPLIT_BATCHES=1";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Step {
  long long n;
  double lr, norm;
  bool skipped;
};

// The "step S loss L lr R norm N skipped K" lines (the loss is rank 0's micro-batch's: not
// compared).
std::vector<Step> steps_of(const std::string& out) {
  std::vector<Step> v;
  static const std::regex re(R"(step (\d+) loss \S+ lr (\S+) norm (\S+) skipped (\d))");
  for (std::sregex_iterator it(out.begin(), out.end(), re), end; it != end; ++it) {
    v.push_back({std::stoll((*it)[1]), std::stod((*it)[2]), std::stod((*it)[3]),
                 (*it)[4] == "1"});
  }
  return v;
}

std::vector<std::string> lines_with(const std::string& out, const std::string& what) {
  std::vector<std::string> v;
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);) {
    if (l.find(what) != std::string::npos) v.push_back(l);
  }
  return v;
}

Job loop(const std::string& env, const std::string& flags, const std::string& args) {
  return launch(env, flags, args, kLoop);
}

// ---- the whole loop, 1 vs 2 processes ----------------------------------------------------------

struct Strategy {
  const char* name;
  const char* flags;
};

class LoopStrategies : public ::testing::TestWithParam<Strategy> {};

TEST_P(LoopStrategies, ClippedScheduledAccumulatedTrainingMatchesOneProcess) {
  TempDir dir;
  const std::string args = "--clip 0.5 --out ";
  const Job one = loop("", "--num_processes 1 --gradient_accumulation_steps 4", args + (dir / "1"));
  ASSERT_EQ(one.code, 0) << one.output;
  const Job two = loop(kSplit,
                       std::string("--num_processes 2 --gradient_accumulation_steps 4 ") +
                           GetParam().flags,
                       args + (dir / "2"));
  ASSERT_EQ(two.code, 0) << two.output;
  EXPECT_LT(max_abs_diff(read_floats(dir / "1"), read_floats(dir / "2")), 1e-6);
  const auto a = steps_of(one.output), b = steps_of(two.output);
  // 30 batches an epoch in cycles of 4: 7 steps and one more for the 2 left at the loader's
  // end, twice.
  ASSERT_EQ(a.size(), 16u) << one.output;
  ASSERT_EQ(b.size(), 16u) << two.output;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].lr, b[i].lr) << "step " << i + 1;
    EXPECT_NEAR(a[i].norm, b[i].norm, 1e-6 * a[i].norm) << "step " << i + 1;
    EXPECT_GT(a[i].norm, 0.5) << "the test should clip";
  }
  // StepLR(10, 0.5), stepped once per optimizer step with split batches (LibTorch's halves
  // on its 11th step).
  EXPECT_EQ(a[9].lr, 0.05);
  EXPECT_EQ(a[10].lr, 0.025);
  EXPECT_EQ(lines_with(one.output, "eval rows 201").size(), 2u);
  EXPECT_EQ(lines_with(two.output, "eval rows 201").size(), 2u) << two.output;
}

INSTANTIATE_TEST_SUITE_P(
    Accelerate, LoopStrategies,
    ::testing::Values(Strategy{"DDP", "--sharding ddp"}, Strategy{"ZeRO1", "--zero_stage 1"},
                      Strategy{"ZeRO2", "--zero_stage 2"},
                      Strategy{"FullShard", "--use_fsdp --fsdp_transformer_layer_cls_to_wrap Linear"},
                      Strategy{"ShardGradOp", "--fsdp_sharding_strategy SHARD_GRAD_OP"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(LoopSemantics, NoSyncAccumulatesLikeOneProcess) {
  TempDir dir;
  const std::string args = "--no_sync_every 3 --sched none --out ";
  const Job one = loop("", "--num_processes 1", args + (dir / "1"));
  const Job two = loop(kSplit, "--num_processes 2 --zero_stage 2", args + (dir / "2"));
  ASSERT_EQ(one.code, 0) << one.output;
  ASSERT_EQ(two.code, 0) << two.output;
  EXPECT_EQ(steps_of(one.output).size(), 20u);  // every third of 30 batches steps, twice
  // fp32 sums in another order over 20 steps: the strategy tests' 1e-5 (1.1e-6 on one VM's
  // OpenBLAS kernels, under 1e-6 on another's).
  EXPECT_LT(max_abs_diff(read_floats(dir / "1"), read_floats(dir / "2")), 1e-5);
}

TEST(LoopSemantics, ClipGradValueMatchesOneProcess) {
  TempDir dir;
  const std::string args = "--clip_value 0.05 --epochs 1 --out ";
  const Job one = loop("", "--num_processes 1", args + (dir / "1"));
  const Job two = loop(kSplit, "--num_processes 2 --use_fsdp", args + (dir / "2"));
  const Job free = loop("", "--num_processes 1", "--epochs 1 --out " + (dir / "free"));
  ASSERT_EQ(one.code, 0) << one.output;
  ASSERT_EQ(two.code, 0) << two.output;
  ASSERT_EQ(free.code, 0) << free.output;
  EXPECT_LT(max_abs_diff(read_floats(dir / "1"), read_floats(dir / "2")), 1e-6);
  EXPECT_GT(max_abs_diff(read_floats(dir / "1"), read_floats(dir / "free")), 1e-3) << "the test should clip";
}

TEST(LoopSemantics, StratagemSeedSeedsTheShuffle) {
  const Job a = loop("STRATAGEM_SEED=5", "--num_processes 2", "--epochs 1 --clip 100");
  const Job b = loop("STRATAGEM_SEED=5", "--num_processes 2", "--epochs 1 --clip 100");
  const Job c = loop("", "--num_processes 2", "--epochs 1 --clip 100");
  ASSERT_EQ(a.code, 0) << a.output;
  EXPECT_EQ(lines_with(a.output, "step "), lines_with(b.output, "step "));
  EXPECT_NE(lines_with(a.output, "step 1 "), lines_with(c.output, "step 1 "));
}

// ---- precision and the scheduler ---------------------------------------------------------------

TEST(LoopSemantics, ClippingUnderFp16SeesUnscaledGradients) {
  const Job fp32 = loop("", "--num_processes 2", "--clip 0.5 --epochs 1");
  const Job fp16 = loop("", "--num_processes 2 --mixed_precision fp16", "--clip 0.5 --epochs 1");
  ASSERT_EQ(fp32.code, 0) << fp32.output;
  ASSERT_EQ(fp16.code, 0) << fp16.output;
  const auto a = steps_of(fp32.output), b = steps_of(fp16.output);
  ASSERT_FALSE(a.empty());
  ASSERT_EQ(a.size(), b.size());
  double lo = INFINITY, hi = 0;
  for (const Step& s : a) {
    lo = std::min(lo, s.norm);
    hi = std::max(hi, s.norm);
  }
  // The loss scale starts at 2^16 (DeepSpeed's) and halves on overflows: a norm of scaled
  // gradients would be thousands of times the fp32 run's. An overflowed step reports inf.
  int stepped = 0;
  for (const Step& s : b) {
    if (s.skipped) {
      EXPECT_TRUE(std::isinf(s.norm)) << "step " << s.n;
      continue;
    }
    ++stepped;
    EXPECT_GT(s.norm, lo / 3) << "step " << s.n;
    EXPECT_LT(s.norm, hi * 3) << "step " << s.n;
  }
  EXPECT_GT(stepped, 5) << fp16.output;
}

TEST(LoopSemantics, SchedulerStepsOncePerReplicaWithoutSplitBatches) {
  const Job r = loop("", "--num_processes 2", "--epochs 1");
  ASSERT_EQ(r.code, 0) << r.output;
  const auto s = steps_of(r.output);
  ASSERT_EQ(s.size(), 15u);  // 240 samples per process, batches of 16
  for (const Step& st : s) {
    // After step k the scheduler was stepped 2k times; LibTorch's StepLR(10) halves the
    // rate on its 11th, 21st, ... step: 0.05 · 0.5^floor((2k - 1) / 10).
    EXPECT_DOUBLE_EQ(st.lr, 0.05 * std::pow(0.5, std::floor((2.0 * st.n - 1) / 10))) << st.n;
  }
}

TEST(LoopSemantics, ASchedulerOnEitherOptimizerDrivesTheRate) {
  const Job a = loop(kSplit, "--num_processes 2 --zero_stage 1", "--sched original --epochs 1");
  const Job b = loop(kSplit, "--num_processes 2 --zero_stage 1", "--sched prepared --epochs 1");
  const Job none = loop(kSplit, "--num_processes 2 --zero_stage 1", "--sched none --epochs 1");
  ASSERT_EQ(a.code, 0) << a.output;
  ASSERT_EQ(b.code, 0) << b.output;
  EXPECT_EQ(lines_with(a.output, "step "), lines_with(b.output, "step "));
  EXPECT_NE(lines_with(a.output, "step "), lines_with(none.output, "step "));
}

TEST(LoopSemantics, AnOverflowedFp16StepDoesNotStepTheScheduler) {
  const Job r = loop(kSplit, "--num_processes 2 --mixed_precision fp16", "--epochs 1 --inf_step 12");
  ASSERT_EQ(r.code, 0) << r.output;
  const auto s = steps_of(r.output);
  ASSERT_EQ(s.size(), 30u);
  EXPECT_TRUE(s[12].skipped) << "step 13 had an inf loss";
  // The scheduler steps once per step that was not skipped (the early ones overflow while
  // the loss scale comes down from 2^16): 0.05 · 0.5^floor((calls - 1) / 10).
  int calls = 0;
  for (const Step& st : s) {
    calls += st.skipped ? 0 : 1;
    const double want = calls == 0 ? 0.05 : 0.05 * std::pow(0.5, std::floor((calls - 1) / 10.0));
    EXPECT_DOUBLE_EQ(st.lr, want) << "step " << st.n;
  }
}

// ---- data -----------------------------------------------------------------------------------

TEST(LoopSemantics, GatherForMetricsCountsEverySampleOnce) {
  const Job one = loop("", "--num_processes 1", "--epochs 1 --sched none");
  const Job even = loop(kSplit, "--num_processes 2", "--epochs 1 --sched none");
  const Job uneven = loop(std::string(kSplit) + " STRATAGEM_EVEN_BATCHES=0", "--num_processes 2",
                          "--epochs 1 --sched none");
  ASSERT_EQ(one.code, 0) << one.output;
  ASSERT_EQ(even.code, 0) << even.output;
  ASSERT_EQ(uneven.code, 0) << uneven.output;
  // 201 samples over 2 processes: 101 each, one a padding duplicate that is dropped (or,
  // without even batches, 101 and 100); the same model as one process (split batches), so
  // the same sum of its predictions over the evaluation set.
  auto eval_of = [](const std::string& out) {
    static const std::regex re(R"(eval rows (\d+) sum (\S+))");
    std::smatch m;
    return std::regex_search(out, m, re) ? std::pair{std::stoll(m[1]), std::stod(m[2])}
                                         : std::pair{-1LL, 0.0};
  };
  const auto [n1, s1] = eval_of(one.output);
  const auto [n2, s2] = eval_of(even.output);
  const auto [n3, s3] = eval_of(uneven.output);
  EXPECT_EQ(n1, 201);
  EXPECT_EQ(n2, 201) << even.output;
  EXPECT_EQ(n3, 201) << uneven.output;
  EXPECT_NEAR(s2, s1, 1e-3);  // 201 predictions of a model equal to ~1e-7
  EXPECT_NEAR(s3, s1, 1e-3);
}

// ---- checkpoints ----------------------------------------------------------------------------

class Resume : public ::testing::TestWithParam<std::pair<const char*, int>> {};

TEST_P(Resume, AfterSigkillIsBitIdentical) {
  TempDir dir;
  const auto [order, save_at] = GetParam();
  const std::string flags = "--num_processes 2 --zero_stage 1 --gradient_accumulation_steps 2";
  const std::string common = std::string(order) + " --clip 1 --out ";
  const Job full = loop(kSplit, flags, common + (dir / "full"));
  ASSERT_EQ(full.code, 0) << full.output;
  const std::string save = " --save_dir " + (dir / "ckpt") + " --save_at " + std::to_string(save_at);
  const Job killed = loop(kSplit, flags, common + (dir / "x") + save + " --die_after_save 1");
  ASSERT_NE(killed.code, 0) << killed.output;
  const Job resumed = loop(kSplit, flags, common + (dir / "resumed") + " --resume " + (dir / "ckpt"));
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_EQ(read_file(dir / "resumed"), read_file(dir / "full"));
  EXPECT_FALSE(read_file(dir / "full").empty());
  // The same steps, rates and norms after the save; the registered counter carried over.
  auto after = [&](const std::string& out) {
    std::vector<std::string> v;
    for (const auto& l : lines_with(out, "step ")) {
      if (std::stoll(l.substr(l.find("step ") + 5)) > save_at) v.push_back(l);
    }
    return v;
  };
  EXPECT_EQ(after(resumed.output), after(full.output));
  EXPECT_EQ(lines_with(resumed.output, "seen "), lines_with(full.output, "seen "));
}

// Step 15 ends the first epoch (30 batches, accumulation 2): the resumed run starts epoch 2.
INSTANTIATE_TEST_SUITE_P(Accelerate, Resume,
                         ::testing::Values(std::pair{"", 9}, std::pair{"--eval_first 1", 9},
                                           std::pair{"--eval_first 1", 15}),
                         [](const auto& info) {
                           return std::string(info.param.first[0] ? "EvalFirst" : "TrainFirst") +
                                  "At" + std::to_string(info.param.second);
                         });

TEST(LoopSemantics, TrackersWriteOnTheMainProcessOnly) {
  TempDir dir;
  const Job r = loop("STRATAGEM_PROJECT_DIR=" + (dir / "runs"), "--num_processes 2",
                     "--epochs 1 --log_dir 1");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string jsonl = read_file(dir / "runs/loop/metrics.jsonl");
  const auto records = lines_with(jsonl, "\"loss\"");
  EXPECT_EQ(records.size(), 15u) << jsonl;
  EXPECT_EQ(lines_with(jsonl, "\"event\":\"init\"").size(), 1u) << jsonl;
}

// ---- mistakes, logs, free_memory ----------------------------------------------------------------

TEST(LoopSemantics, MistakesAreNamedOnTheFirstStep) {
  struct Mistake {
    const char* env;
    const char* flags;
    const char* args;
    const char* says;
  };
  for (const Mistake& m : {
           Mistake{"", "--sharding ddp", "--mistake plain_backward",
                   "loss.backward() ran on the prepared model's loss"},
           Mistake{"", "--sharding ddp", "--mistake original_step", "prepare() returned"},
           Mistake{"", "--zero_stage 1", "--mistake original_step",
                   "the optimizer given to prepare() was stepped"},
           Mistake{"", "--zero_stage 2", "--mistake original_step", "prepare() returned"},
           Mistake{"", "", "--mistake prepare_twice", "was prepared already"},
           Mistake{"", "--use_fsdp --fsdp_transformer_layer_cls_to_wrap Linaer", "",
                   "no module of the model has type \"Linaer\""},
       }) {
    const Job r = loop(m.env, std::string("--num_processes 2 ") + m.flags, m.args);
    EXPECT_NE(r.code, 0) << m.args << "\n" << r.output;
    EXPECT_NE(r.output.find(m.says), std::string::npos) << m.args << "\n" << r.output;
    EXPECT_EQ(lines_with(r.output, "step 2 ").size(), 0u) << "caught late: " << r.output;
  }
}

TEST(LoopSemantics, LibTorchWarningsOnlyWithDebug) {
  // The model measurement profiles the first forwards: LibTorch's allocator warns then.
  const Job quiet = launch("", "--num_processes 2 --gradient_accumulation_steps 2", "--steps 3");
  const Job debug =
      launch("", "--num_processes 2 --gradient_accumulation_steps 2 --debug", "--steps 3");
  ASSERT_EQ(quiet.code, 0) << quiet.output;
  ASSERT_EQ(debug.code, 0) << debug.output;
  EXPECT_EQ(quiet.output.find("CPUAllocator"), std::string::npos) << quiet.output;
  EXPECT_EQ(quiet.output.find("Logging before"), std::string::npos) << quiet.output;
  EXPECT_NE(debug.output.find("profil"), std::string::npos) << debug.output;
}

TEST(LoopSemantics, FreeMemoryLetsPrepareRunAgain) {
  const Job r = loop("", "--num_processes 2 --use_fsdp --fsdp_transformer_layer_cls_to_wrap Linear",
                     "--epochs 1 --free_memory 1");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(lines_with(r.output, "re-prepared: 17 steps").size(), 1u) << r.output;
}

TEST(LoopSemantics, HybridShardIsRefusedBeforeAnyWorkerStarts) {
  const Job r = loop("", "--num_processes 2 --fsdp_sharding_strategy HYBRID_SHARD", "");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_EQ(lines_with(r.output, "error:").size(), 1u) << r.output;
  EXPECT_EQ(r.output.find("[rank"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace stratagem::test
