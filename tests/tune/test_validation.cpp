// validate --measured (sim/validation.hpp): reading JSON lines with located errors, the
// comparison's sign convention, and the summary statistics.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "engine/scenario/error.hpp"
#include "tune/validation.hpp"

namespace stratagem::tune {
namespace {

std::string write(const std::string& name, const std::string& text) {
  const std::string path = testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

// One line: a .jsonl holds one object per line.
const char* kScenario = R"({"model": "gpt2", "cluster": "dgx-a100-80gb", "strategy": {"dp": 8, )"
                        R"("micro_batch_size": 4, "mixed_precision": "bf16"}, )"
                        R"("training": {"seq_len": 1024, "global_batch": 32}})";

TEST(ValidateMeasured, ReadsRunsAndLocatesErrors) {
  const std::string ok = write(
      "ok.jsonl", std::string(R"({"id": "a", "scenario": )") + kScenario +
                      R"(, "measured": {"tokens_per_s_per_gpu": 20000, "peak_memory_GiB": 9}})" +
                      "\n\n" + R"({"id": "b", "scenario": )" + kScenario +
                      R"(, "measured": {"step_time_s": 0.5}, "notes": "x"})" + "\n");
  const auto runs = load_measured_runs(ok);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_DOUBLE_EQ(runs[0].tokens_per_s_per_gpu, 20000);
  EXPECT_DOUBLE_EQ(*runs[0].peak_memory_GiB, 9);
  EXPECT_DOUBLE_EQ(runs[1].step_time_s, 0.5);
  const auto rows = compare_with_measured(runs);
  ASSERT_EQ(rows.size(), 2u);
  // The same scenario: its throughput per GPU is tokens per step / step time / GPUs.
  const double tokens = 32.0 * 1024;
  EXPECT_NEAR(rows[0].predicted, tokens / rows[1].predicted / 8, rows[0].predicted * 1e-9);
  EXPECT_DOUBLE_EQ(rows[0].error(), rows[0].predicted / 20000 - 1);
  EXPECT_DOUBLE_EQ(rows[1].error(), 0.5 / rows[1].predicted - 1);  // optimistic: positive
  EXPECT_FALSE(rows[0].predicted_oom);

  const std::string bad = write("bad.jsonl", std::string(R"({"id": "a", "scenario": )") +
                                                 kScenario + R"(, "measured": {}})" + "\n");
  try {
    load_measured_runs(bad);
    FAIL() << "accepted";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.path(), bad + ":1");
    EXPECT_NE(std::string(e.what()).find("tokens_per_s_per_gpu or step_time_s"), std::string::npos)
        << e.what();
  }
  const std::string wrong = write(
      "wrong.jsonl",
      "\n" + std::string(R"({"id": "a", "scenario": {"model": "gpt2"}, "measured": {}})") + "\n");
  try {
    load_measured_runs(wrong);
    FAIL() << "accepted";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.path(), wrong + ":2");
    EXPECT_NE(std::string(e.what()).find("cluster"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_measured_runs(testing::TempDir() + "/none.jsonl"), SpecError);
}

// Every shipped table of measured runs (validation/*.jsonl) reads, each row with its notes, and
// every row simulates to a positive prediction.
TEST(ValidateMeasured, ShippedTablesLoadAndSimulate) {
  int files = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(STRATAGEM_SOURCE_DIR) + "/validation")) {
    if (entry.path().extension() != ".jsonl") continue;
    ++files;
    const auto runs = load_measured_runs(entry.path().string());
    ASSERT_FALSE(runs.empty()) << entry.path();
    const auto rows = compare_with_measured(runs);
    ASSERT_EQ(rows.size(), runs.size()) << entry.path();
    for (const auto& r : rows) EXPECT_GT(r.predicted, 0) << r.id;
    std::ifstream in(entry.path());
    for (std::string line; std::getline(in, line);) {
      if (!line.empty())
        EXPECT_NE(line.find(R"("notes")"), std::string::npos) << line.substr(0, 80);
    }
  }
  EXPECT_GE(files, 3);  // llm-foundry, megatron-bridge, korthikanti-2022
}

TEST(ValidateMeasured, SummaryStatistics) {
  std::vector<RunComparison> rows;
  for (double e : {-0.3, -0.05, 0.0, 0.08, 0.15}) {
    RunComparison r;
    r.measured = 100;
    r.predicted = 100 * (1 + e);
    rows.push_back(r);
  }
  rows.back().predicted_oom = true;
  const ErrorSummary s = summarize(rows);
  EXPECT_EQ(s.runs, 5);
  EXPECT_NEAR(s.median_abs, 0.08, 1e-12);  // |e|: 0, .05, .08, .15, .3
  EXPECT_NEAR(s.signed_median, 0.0, 1e-12);
  EXPECT_NEAR(s.p90_abs, 0.15 + 0.6 * 0.15, 1e-12);  // between .15 and .3
  EXPECT_DOUBLE_EQ(s.within_10, 0.6);
  EXPECT_DOUBLE_EQ(s.within_20, 0.8);
  EXPECT_EQ(s.false_oom, 1);
}

}  // namespace
}  // namespace stratagem::tune
