// Checkpoints: resuming continues the exact loss trajectory and parameters; only complete
// checkpoints (with a manifest) are resumed from; a checkpoint of another strategy is refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "engine/runtime/checkpoint.hpp"
#include "engine/scenario/error.hpp"
#include "tests/runtime/test_executor_util.hpp"

namespace stratagem::test {
namespace {

namespace fs = std::filesystem;

std::string fresh_dir(const std::string& name) {
  const auto dir =
      fs::temp_directory_path() / ("stratagem-ckpt-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

void expect_exact_resume(const scenario::Scenario& s, const std::string& name) {
  const int total = 6, first = 3;
  auto straight = run_inproc(s, train_options(total));

  const std::string dir = fresh_dir(name);
  auto opts = train_options(first);
  opts.save_dir = dir;
  opts.save_every = 2;  // writes step 2 and (the last step) 3
  run_inproc(s, opts);
  EXPECT_EQ(runtime::latest_complete_step(dir), first);
  EXPECT_TRUE(fs::exists(fs::path(dir) / "step-2" / "manifest.json"));

  auto resume = train_options(total - first);
  resume.resume_dir = dir;
  auto resumed = run_inproc(s, resume);
  for (int r = 0; r < s.world_size(); ++r) {
    ASSERT_EQ(resumed.results[r].first_step, first);
    ASSERT_EQ(resumed.results[r].losses.size(), static_cast<std::size_t>(total - first));
    for (int i = 0; i < total - first; ++i) {
      EXPECT_EQ(resumed.results[r].losses[i], straight.results[r].losses[first + i])
          << "rank " << r << " step " << first + i;
      EXPECT_EQ(resumed.results[r].loss_scales[i], straight.results[r].loss_scales[first + i]);
    }
  }
  for (int u = 0; u < static_cast<int>(s.model.layers) + 2; ++u) {
    EXPECT_TRUE(resumed.unit_params(u).equal(straight.unit_params(u))) << "unit " << u;
  }
  fs::remove_all(dir);
}

TEST(Checkpoint, ResumeIsExactZero3) {
  expect_exact_resume(tiny_scenario(2, {{"dp", 2}, {"micro_batch_size", 2}, {"sharding", "zero3"}}),
                      "zero3");
}

TEST(Checkpoint, ResumeIsExactFp16PipelineWithLossScale) {
  // Scale window 2: the scaler's state changes across the save.
  expect_exact_resume(tiny_scenario(2, {{"pp", 2},
                                        {"micro_batch_size", 2},
                                        {"mixed_precision", "fp16"},
                                        {"initial_scale_power", 10},
                                        {"loss_scale_window", 2}}),
                      "fp16pp");
}

TEST(Checkpoint, IncompleteCheckpointsAreIgnored) {
  const auto s = tiny_scenario(1, {{"micro_batch_size", 8}});
  const std::string dir = fresh_dir("incomplete");
  auto opts = train_options(2);
  opts.save_dir = dir;
  opts.save_every = 1;
  run_inproc(s, opts);
  EXPECT_EQ(runtime::latest_complete_step(dir), 2);
  // A save interrupted before its manifest: a rank file (or its temporary) without manifest.
  fs::create_directories(fs::path(dir) / "step-3");
  std::ofstream(fs::path(dir) / "step-3" / "rank-0.ckpt.tmp") << "partial";
  EXPECT_EQ(runtime::latest_complete_step(dir), 2);
  fs::remove(fs::path(dir) / "step-2" / "manifest.json");
  EXPECT_EQ(runtime::latest_complete_step(dir), 1);
  EXPECT_EQ(runtime::latest_complete_step(dir + "/nothing-here"), -1);
  fs::remove_all(dir);
}

TEST(Checkpoint, RefusesAnotherStrategy) {
  const std::string dir = fresh_dir("other");
  auto opts = train_options(1);
  opts.save_dir = dir;
  run_inproc(tiny_scenario(2, {{"dp", 2}, {"micro_batch_size", 4}}), opts);
  auto resume = train_options(1);
  resume.resume_dir = dir;
  EXPECT_THROW(
      run_inproc(tiny_scenario(2, {{"dp", 2}, {"micro_batch_size", 4}, {"sharding", "zero2"}}),
                 resume),
      SpecError);
  auto empty = train_options(1);
  empty.resume_dir = fresh_dir("empty");
  EXPECT_THROW(run_inproc(tiny_scenario(1, {{"micro_batch_size", 8}}), empty), SpecError);
  fs::remove_all(dir);
}

// A newest checkpoint one rank's file of which fails its checksum (a disk error, a copy cut
// short) is skipped with a warning; the resume takes the one before it and continues exactly.
TEST(Checkpoint, ADamagedNewestCheckpointFallsBackToThePreviousGoodOne) {
  const auto s = tiny_scenario(2, {{"dp", 2}, {"micro_batch_size", 2}, {"sharding", "zero1"}});
  const int total = 5;
  auto straight = run_inproc(s, train_options(total));
  const std::string dir = fresh_dir("damaged");
  auto opts = train_options(3);
  opts.save_dir = dir;
  opts.save_every = 2;  // steps 2 and 3
  run_inproc(s, opts);
  ASSERT_EQ(runtime::latest_complete_step(dir), 3);
  {
    const fs::path victim = fs::path(dir) / "step-3" / "rank-1.ckpt";
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(0, std::ios::end);
    const auto size = static_cast<std::streamoff>(f.tellg());
    f.seekp(size - 8);
    const char garbage[4] = {'\x5a', '\x5a', '\x5a', '\x5a'};
    f.write(garbage, sizeof(garbage));
  }
  auto resume = train_options(total - 2);
  resume.resume_dir = dir;
  auto resumed = run_inproc(s, resume);
  for (int r = 0; r < s.world_size(); ++r) {
    ASSERT_EQ(resumed.results[r].first_step, 2) << "rank " << r;
    for (int i = 0; i < total - 2; ++i) {
      EXPECT_EQ(resumed.results[r].losses[i], straight.results[r].losses[2 + i]) << i;
    }
  }
  // With every checkpoint damaged there is nothing to resume: one clear error.
  {
    const fs::path victim = fs::path(dir) / "step-2" / "rank-0.ckpt";
    fs::resize_file(victim, fs::file_size(victim) / 2);
  }
  auto again = train_options(1);
  again.resume_dir = dir;
  EXPECT_THROW(run_inproc(s, again), RuntimeError);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace stratagem::test
