// Flag values the commands cannot use are refused when parsed, in the one-line error style of
// every other input error (#19): nan/inf/negative spreads, counts below one.
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_util.hpp"

namespace stratagem::test {
namespace {

void expect_refused(const std::string& args, const std::string& message) {
  const CliResult r = run_cli(args);
  EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << args << ": " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
  EXPECT_NE(r.err.find(message), std::string::npos) << args << ": " << r.err;
}

TEST(FlagsCli, NonFiniteOrNegativeSpreadsAreRefused) {
  expect_refused("sim default --rank-jitter nan", "--rank-jitter: must be a finite number >= 0, got nan");
  expect_refused("sim default --compute-jitter inf", "--compute-jitter: must be a finite number >= 0");
  expect_refused("sim default --comm-compute-slowdown -0.5", "--comm-compute-slowdown: must be a finite");
  expect_refused("sim default --rank-jitter 1x", "--rank-jitter: expected a number, got '1x'");
  EXPECT_EQ(run_cli("sim default --rank-jitter 0.01").exit_code, 0);
}

TEST(FlagsCli, CountsBelowOneAreRefused) {
  expect_refused("search --seq_len -5", "--seq_len: must be at least 1, got -5");
  expect_refused("search --global_batch 0", "--global_batch: must be at least 1, got 0");
  expect_refused("import --accelerate x.yaml --num_processes -2",
                 "--num_processes: must be at least 1, got -2");
  expect_refused("import --accelerate x.yaml --gradient_accumulation_steps 0",
                 "--gradient_accumulation_steps: must be at least 1, got 0");
}

// #44 item 3: a value that is no number is said so, not "Value abc not in range" (CLI11's
// Range) nor "Could not convert: --rank = abc" (CLI11's conversion).
TEST(FlagsCli, ValuesThatAreNoNumbersAreSaidSo) {
  expect_refused("search --global_batch abc", "--global_batch: expected a whole number, got 'abc'");
  expect_refused("search --seq_len 1e99", "--seq_len: expected a whole number, got '1e99'");
  expect_refused("search --seq_len 99999999999",
                 "--seq_len: must be at most 2147483647, got 99999999999");
  expect_refused("search --threads 300", "--threads: must be from 0 to 256, got 300");
  expect_refused("plan default --rank abc", "--rank: expected a number, got 'abc'");
}

// #44 item 2: `prefetch` paces ZeRO-3/FSDP parameter gathers; set without them it is legal and
// does nothing, which sim says in one warning line before its output (exit 0).
TEST(FlagsCli, PrefetchWithoutShardedParametersIsAWarning) {
  const std::string dir = temp_dir("prefetch");
  write_file(dir + "/z1.json",
             R"({"model": "gpt2", "cluster": "dgx-a100-80gb", "strategy": {"dp": 8,
                 "sharding": "zero1", "prefetch": 2}, "training": {"seq_len": 1024}})");
  const CliResult r = run_cli("sim " + dir + "/z1.json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err,
            "warning: strategy.prefetch: no effect with sharding 'zero1' (it paces the parameter "
            "gathers of zero3 and FSDP's FULL_SHARD, SHARD_GRAD_OP and HYBRID_SHARD)\n");
  write_file(dir + "/z3.json",
             R"({"model": "gpt2", "cluster": "dgx-a100-80gb", "strategy": {"dp": 8,
                 "sharding": "zero3", "prefetch": 2}, "training": {"seq_len": 1024}})");
  const CliResult z3 = run_cli("sim " + dir + "/z3.json");
  EXPECT_EQ(z3.exit_code, 0) << z3.err;
  EXPECT_EQ(z3.err, "");
}

TEST(FlagsCli, AKeySetToNullIsRefusedNamingIt) {
  const std::string dir = temp_dir("null-key");
  write_file(dir + "/s.json",
             R"({"model": "gpt2", "cluster": "dgx-a100-80gb", "strategy": {"dp": 8, "tp": null},
                 "training": {"seq_len": 1024, "global_batch": 64}})");
  expect_refused("info " + dir + "/s.json", "strategy.tp: null is not a value here");
}

// Beside its configurations, search says how far the simulator is off for that GPU and stack
// on the measured runs of validation/ (scenarios/presets/accuracy.json, #40 item 4), and marks
// the configurations within that error of the fastest; a GPU and stack with no measured runs
// say so.
TEST(FlagsCli, SearchShowsTheExpectedErrorForItsGpuAndStack) {
  const CliResult r = run_cli(
      "search --model gpt2 --cluster dgx-a100-80gb --global_batch 16 --seq_len 1024 --top 3 "
      "--quiet --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j["expected_error"].is_object()) << r.out.substr(0, 400);
  EXPECT_EQ(j["expected_error"]["gpu"], "a100-80gb");
  EXPECT_EQ(j["expected_error"]["stack"], "pytorch");
  EXPECT_GT(j["expected_error"]["runs"].get<int>(), 10);
  const double median = j["expected_error"]["median_abs_error"];
  EXPECT_GT(median, 0.0);
  EXPECT_LT(median, 0.2);
  const double top = j["best"][0]["tokens_per_s"];
  for (const auto& c : j["best"]) {
    const bool within = c["tokens_per_s"].get<double>() >= top * (1 - median);
    EXPECT_EQ(c["within_expected_error_of_best"].get<bool>(), within) << c.dump();
  }
  const CliResult text = run_cli(
      "search --model gpt2 --cluster dgx-a100-80gb --global_batch 16 --seq_len 1024 --top 3 "
      "--quiet");
  EXPECT_NE(text.out.find("Expected error: median"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("vs #1"), std::string::npos) << text.out;
  const CliResult none = run_cli(
      "search --model gpt2 --cluster dgx-a100-80gb --global_batch 16 --seq_len 1024 --top 3 "
      "--stack deepspeed --quiet --json");
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_TRUE(nlohmann::json::parse(none.out)["expected_error"].is_null());
}

}  // namespace
}  // namespace stratagem::test

namespace stratagem::test {
namespace {

// A global batch the whole cluster does not divide still suits a strategy whose dp divides it
// (#40): 12 on 8 GPUs is tp 2 × dp 4 (3 samples per replica) or tp 4 × dp 2, and every
// configuration listed says a dp that divides 12.
TEST(FlagsCli, SearchTakesAGlobalBatchSomeDpDivides) {
  const CliResult r = run_cli(
      "search --model gpt2 --cluster dgx-a100-80gb --global_batch 12 --seq_len 1024 "
      "--top 3 --quiet --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_FALSE(j["best"].empty()) << r.out.substr(0, 400);
  for (const auto& c : j["best"]) {
    const int dp = c["strategy"]["dp"];
    EXPECT_EQ(12 % dp, 0) << c.dump();
  }
}

}  // namespace
}  // namespace stratagem::test
