// `stratagem validate` and `stratagem compare --real` through the CLI: real runs of a tiny model
// on 2 CPU processes, simulated with the devices the runs measured (or a profile).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/runtime/cli_process.hpp"
#include "tests/runtime/test_executor_util.hpp"

namespace stratagem::test {
namespace {

namespace fs = std::filesystem;

// The executor tests' tiny model as a scenario file.
fs::path write_scenario(const fs::path& dir, const std::string& name, const nlohmann::json& st) {
  nlohmann::json strategy = {{"dp", 2}, {"micro_batch_size", 2}};
  for (const auto& [k, v] : st.items()) strategy[k] = v;
  auto s = tiny_scenario(2, strategy);
  s.name = name;
  const auto path = dir / (name + ".json");
  std::ofstream(path) << scenario::to_json(s).dump(2);
  return path;
}

TEST(ValidateCli, ComparesMeasuredAndPredictedPerScenario) {
  const auto dir = work_dir("two");
  const auto ddp = write_scenario(dir, "tiny-ddp", {});
  const auto pipe = write_scenario(dir, "tiny-1f1b", {{"dp", 1}, {"pp", 2}, {"schedule", "1f1b"}});
  const auto report = dir / "report.json";
  const auto r = stratagem("validate " + ddp.string() + " " + pipe.string() +
                               " --num_processes 2 --cpu --steps 3 --work_dir " +
                               (dir / "runs").string() + " --json " + report.string(),
                           dir);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("median |error|"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fastest first, measured:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ops that deviate most"), std::string::npos) << r.out;
  const auto doc = nlohmann::json::parse(std::ifstream(report));
  ASSERT_EQ(doc.at("scenarios").size(), 2u);
  for (const auto& s : doc.at("scenarios")) {
    EXPECT_GT(s.at("measured_step_time_s").get<double>(), 0) << s.dump();
    EXPECT_GT(s.at("predicted_step_time_s").get<double>(), 0) << s.dump();
    const double rel =
        s.at("predicted_step_time_s").get<double>() / s.at("measured_step_time_s").get<double>() -
        1.0;
    EXPECT_NEAR(s.at("relative_error").get<double>(), rel, 1e-9);
    ASSERT_EQ(s.at("ranks").size(), 2u);
    for (const auto& rank : s.at("ranks")) {
      // Memory is predicted from the same plan the run executed: same order of magnitude.
      const double m = rank.at("measured_peak_bytes"), p = rank.at("predicted_peak_bytes");
      EXPECT_GT(m, 0);
      EXPECT_GT(p, 0.5 * m);
      EXPECT_LT(p, 2.0 * m);
    }
    EXPECT_FALSE(s.at("top_deviating_ops_rank0").empty());
  }
  EXPECT_TRUE(fs::exists(dir / "runs" / "tiny-ddp.real.json"));
}

TEST(ValidateCli, RoundsInterleaveRunsAndFreshUnitsAreTimedOnTheRunsProcesses) {
  const auto dir = work_dir("rounds");
  const auto ddp = write_scenario(dir, "tiny-ddp", {});
  const auto zero3 = write_scenario(dir, "tiny-zero3", {{"sharding", "zero3"}});
  const auto report = dir / "report.json";
  const auto r = stratagem("validate " + ddp.string() + " " + zero3.string() +
                               " --num_processes 2 --cpu --steps 3 --rounds 2 --fresh-units"
                               " --work_dir " +
                               (dir / "runs").string() + " --json " + report.string(),
                           dir);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // The scenarios take turns: round 1 runs both before round 2 starts.
  const auto first_round2 = r.out.find("round 2/2");
  ASSERT_NE(first_round2, std::string::npos) << r.out;
  EXPECT_LT(r.out.find("round 1/2: tiny-zero3"), first_round2) << r.out;
  EXPECT_NE(r.out.find("units timed around the runs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("within noise"), std::string::npos) << r.out;
  const auto doc = nlohmann::json::parse(std::ifstream(report));
  EXPECT_EQ(doc.at("rounds"), 2);
  EXPECT_TRUE(doc.contains("ranking_measured_with_ties"));
  EXPECT_TRUE(doc.at("inverted_pairs_beyond_noise").is_array());
  for (const auto& s : doc.at("scenarios")) {
    EXPECT_EQ(s.at("rounds"), 2);
    // Two rounds of 3 steps, each without its warm-up step.
    EXPECT_EQ(s.at("measured_step_times_s").size(), 4u) << s.dump();
    EXPECT_GT(s.at("measured_noise_s").get<double>(), 0) << s.dump();
  }
  for (const char* name : {"tiny-ddp", "tiny-zero3"}) {
    for (int round : {1, 2}) {
      const auto file =
          dir / "runs" / (std::string(name) + ".round" + std::to_string(round) + ".real.json");
      ASSERT_TRUE(fs::exists(file)) << file;
      // Each run timed its units on its own processes before training.
      const auto run = nlohmann::json::parse(std::ifstream(file));
      const auto& units = run.at("scenario").at("cluster").at("gpu").at("measured_units");
      ASSERT_EQ(units.size(), 1u) << file;
      EXPECT_GT(units[0].at("block_forward_us").get<double>(), 0);
      EXPECT_GE(units[0].at("jitter_cv").get<double>(), 0);
    }
  }
}

TEST(ValidateCli, RoundsMustBePositive) {
  const auto dir = work_dir("norounds");
  const auto ddp = write_scenario(dir, "tiny-ddp", {});
  const auto r = stratagem("validate " + ddp.string() + " --num_processes 2 --cpu --rounds 0", dir);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("--rounds"), std::string::npos) << r.err;
}

TEST(ValidateCli, AMissingProfileIsAnErrorNamingIt) {
  const auto dir = work_dir("noprofile");
  const auto ddp = write_scenario(dir, "tiny-ddp", {});
  const auto r = stratagem(
      "validate " + ddp.string() + " --num_processes 2 --cpu --profile /nonexistent/p.json", dir);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("/nonexistent/p.json"), std::string::npos) << r.err;
}

TEST(CompareRealCli, MeasuresEachStrategyIntoTheCompareTable) {
  const auto dir = work_dir("compare");
  const auto ddp = write_scenario(dir, "tiny-ddp", {});
  const auto r = stratagem("compare " + ddp.string() +
                               " --real --num_processes 2 --strategies ddp,zero3,1f1b --steps 3 "
                               "--json",
                           dir);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_NE(doc.at("executor").get<std::string>().find("measured on 2 processes"),
            std::string::npos);
  ASSERT_EQ(doc.at("strategies").size(), 3u);
  for (const auto& s : doc.at("strategies")) {
    EXPECT_FALSE(s.contains("error")) << s.dump();
    EXPECT_GT(s.at("step_time_s").get<double>(), 0) << s.dump();
    EXPECT_GT(s.at("peak_memory_bytes").get<double>(), 0) << s.dump();
  }
  EXPECT_EQ(doc.at("strategies")[2].at("layout").get<std::string>().rfind("dp 1 × pp 2", 0), 0u)
      << doc.dump();
}

TEST(CompareRealCli, NeedsNumProcesses) {
  const auto dir = work_dir("nonum");
  const auto r = stratagem("compare default --real", dir);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("--num_processes"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace stratagem::test
