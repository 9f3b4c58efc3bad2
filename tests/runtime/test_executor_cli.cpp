// Real multi-process runs through the CLI (`stratagem run`, Gloo over TCP): the same losses as
// one process, a worker killed during a checkpoint leaves the previous one usable and the
// resumed run continues the trajectory exactly, and a hang ends the job naming where each rank
// was.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/result/result.hpp"
#include "tests/runtime/cli_process.hpp"
#include "tests/runtime/test_executor_util.hpp"

namespace stratagem::test {
namespace {

namespace fs = std::filesystem;

// The tiny model on a GPU cluster preset: `--cpu` turns it into 2 CPU processes.
fs::path write_scenario(const fs::path& dir, const std::string& sharding,
                        const nlohmann::json& strategy = {}) {
  const nlohmann::json j = {
      {"name", "tiny-" + sharding},
      {"model",
       {{"name", "tiny-gpt"},
        {"layers", 4},
        {"hidden", 32},
        {"heads", 4},
        {"vocab", 64},
        {"max_positions", 16},
        {"ffn_hidden", 128},
        {"tied_embeddings", false}}},
      {"cluster", {{"preset", "dgx-a100-80gb"}, {"gpus_per_node", 2}}},
      {"strategy", {{"dp", 2}, {"micro_batch_size", 2}, {"sharding", sharding}}},
      {"training", {{"seq_len", 16}, {"global_batch", 8}, {"seed", 7}, {"steps", 5}}}};
  nlohmann::json out = j;
  for (const auto& [k, v] : strategy.items()) out["strategy"][k] = v;
  const auto path =
      dir / (strategy.empty() ? std::string("scenario.json")
                              : "scenario-tp" + std::to_string(out["strategy"].value("tp", 1)) + ".json");
  std::ofstream(path) << out.dump(2);
  return path;
}

std::vector<double> losses_in(const fs::path& result) {
  return result::load_result(result.string()).metrics.losses;
}

TEST(RunCli, TwoProcessesTrainLikeOne) {
  const auto dir = work_dir("equal");
  const auto scenario = write_scenario(dir, "zero2");
  const auto r =
      stratagem("run " + scenario.string() + " --num_processes 2 --cpu --main_process_port 0 -o " +
                    (dir / "r.json").string(),
                dir);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("【train】 epoch：1/1 step：5/5 loss："), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("[rank 1] 【train】"), std::string::npos) << "progress from rank 0 only";
  const auto result = result::load_result((dir / "r.json").string());
  EXPECT_EQ(result.executor, "real");
  ASSERT_EQ(result.ranks.size(), 2u);
  EXPECT_GT(result.metrics.step_time_s, 0);
  EXPECT_FALSE(result.ranks[1].spans.empty());

  // The same scenario in one process, in this test's threads.
  auto one = tiny_scenario(1, {{"micro_batch_size", 2}, {"grad_accum", 4}});
  const auto ref = run_inproc(one, train_options(5)).results[0].losses;
  ASSERT_EQ(result.metrics.losses.size(), ref.size());
  for (std::size_t i = 0; i < ref.size(); ++i) {
    EXPECT_NEAR(result.metrics.losses[i], ref[i], 1e-5 * ref[i]) << "step " << i;
  }
  fs::remove_all(dir);
}

TEST(RunCli, KilledDuringSaveLeavesThePreviousCheckpointAndResumeIsExact) {
  const auto dir = work_dir("kill");
  const auto scenario = write_scenario(dir, "zero1");
  const std::string base =
      "run " + scenario.string() + " --num_processes 2 --cpu " + "--main_process_port 0 --steps 6 ";
  const auto straight = stratagem(base + "-o " + (dir / "straight.json").string(), dir);
  ASSERT_EQ(straight.exit_code, 0) << straight.err;

  const auto ckpt = dir / "ckpt";
  const auto killed = stratagem(
      base + "--save_dir " + ckpt.string() + " --save_every 2 --kill_during_save 4:1", dir);
  EXPECT_NE(killed.exit_code, 0);
  EXPECT_NE(killed.err.find("rank 1"), std::string::npos) << killed.err;
  EXPECT_NE(killed.err.find("SIGKILL"), std::string::npos) << killed.err;
  EXPECT_TRUE(fs::exists(ckpt / "step-2" / "manifest.json"));
  EXPECT_FALSE(fs::exists(ckpt / "step-4" / "manifest.json"));
  EXPECT_TRUE(fs::exists(ckpt / "step-4" / "rank-1.ckpt.tmp"));

  const auto resumed = stratagem("run " + scenario.string() +
                                     " --num_processes 2 --cpu --main_process_port 0 --steps 4 "
                                     "--resume " +
                                     ckpt.string() + " -o " + (dir / "resumed.json").string(),
                                 dir);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("step：3/6"), std::string::npos) << resumed.out;
  const auto all = losses_in(dir / "straight.json");
  const auto tail = losses_in(dir / "resumed.json");
  ASSERT_EQ(all.size(), 6u);
  ASSERT_EQ(tail.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(tail[i], all[2 + i]) << "step " << 2 + i;
  fs::remove_all(dir);
}

TEST(RunCli, AHangEndsTheJobNamingWhereRanksWere) {
  const auto dir = work_dir("hang");
  const auto scenario = write_scenario(dir, "none");
  const auto r = stratagem("run " + scenario.string() +
                               " --num_processes 2 --cpu --main_process_port 0 --steps 4 "
                               "--timeout 3 --stall 2:1",
                           dir);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_LT(r.seconds, 30);
  EXPECT_NE(r.err.find("ranks were last at"), std::string::npos) << r.err;
  // Rank 1 stopped after agreeing on step 2's loss; rank 0 waits in step 3's all-reduce.
  EXPECT_NE(r.err.find("rank 1 loss all-reduce of step 2"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("rank 0 op"), std::string::npos) << r.err;
  fs::remove_all(dir);
}

TEST(RunCli, TensorAndSequenceParallelOverGlooTrainLikeOneAndResumeOnlyWithTheSameTp) {
  const auto dir = work_dir("tp");
  const auto scenario = write_scenario(
      dir, "none", {{"dp", 1}, {"tp", 2}, {"sequence_parallel", true}, {"grad_accum", 4}});
  const auto ckpt = dir / "ckpt";
  const auto r = stratagem("run " + scenario.string() +
                               " --num_processes 2 --cpu --main_process_port 0 --save_dir " +
                               ckpt.string() + " -o " + (dir / "r.json").string(),
                           dir);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto result = result::load_result((dir / "r.json").string());
  ASSERT_EQ(result.ranks.size(), 2u);
  int tp_spans = 0;
  for (const auto& sp : result.ranks[1].spans) tp_spans += sp.stream == plan::Stream::tp;
  EXPECT_GT(tp_spans, 0) << "the TP collectives are recorded on their stream";
  auto one = tiny_scenario(1, {{"micro_batch_size", 2}, {"grad_accum", 4}});
  const auto ref = run_inproc(one, train_options(5)).results[0].losses;
  ASSERT_EQ(result.metrics.losses.size(), ref.size());
  for (std::size_t i = 0; i < ref.size(); ++i) {
    EXPECT_NEAR(result.metrics.losses[i], ref[i], 1e-5 * ref[i]) << "step " << i;
  }
  // The checkpoint holds TP slices: a resume with another tp is one line naming it.
  const auto other = write_scenario(dir, "none", {{"dp", 2}, {"grad_accum", 2}});
  const auto bad = stratagem("run " + other.string() +
                                 " --num_processes 2 --cpu --main_process_port 0 --resume " +
                                 ckpt.string(),
                             dir);
  EXPECT_EQ(bad.exit_code, 2) << bad.out << bad.err;
  EXPECT_NE(bad.err.find("tp = 2"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("this job has tp = 1"), std::string::npos) << bad.err;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace stratagem::test

