// `stratagem sim`: summary, JSON, and the result, trace and CSV files it writes.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/result/result.hpp"

namespace stratagem::test {
namespace {

struct CliRun {
  int code = -1;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string scratch_dir() {
  const auto dir =
      std::filesystem::temp_directory_path() / ("stratagem-sim-cli-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir.string();
}

CliRun stratagem(const std::string& args) {
  const std::string dir = scratch_dir();
  const std::string cmd =
      std::string(STRATAGEM_BINARY) + " " + args + " >" + dir + "/out 2>" + dir + "/err </dev/null";
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(dir + "/out"), slurp(dir + "/err")};
}

TEST(SimCli, PrintsTheSummary) {
  const CliRun r = stratagem("sim default");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* key :
       {"step time", "samples/s", "tokens/s", "MFU", "312.0 TFLOP/s bf16", "bubble fraction",
        "exposed comm", "peak memory per stage", "stage 0", "events"}) {
    EXPECT_NE(r.out.find(key), std::string::npos) << key << "\n" << r.out;
  }
}

TEST(SimCli, WritesResultTraceAndCsv) {
  const std::string dir = scratch_dir();
  const CliRun r = stratagem("sim default --json -o " + dir + "/r.json --chrome-trace " + dir +
                             "/t.json --csv " + dir + "/s.csv");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto summary = nlohmann::json::parse(r.out);
  const auto loaded = result::load_result(dir + "/r.json");
  EXPECT_EQ(loaded.executor, "sim");
  EXPECT_EQ(loaded.metrics.step_time_s, summary.at("step_time_s").get<double>());
  EXPECT_EQ(loaded.ranks.size(), 8u);
  EXPECT_EQ(loaded.ranks[3].same_as, 0);
  const auto trace = nlohmann::json::parse(slurp(dir + "/t.json"));
  EXPECT_GT(trace.at("traceEvents").size(), 100u);
  const std::string csv = slurp(dir + "/s.csv");
  EXPECT_EQ(csv.rfind("rank,op,kind", 0), 0u);
  EXPECT_NE(csv.find(",backward,compute,"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(SimCli, NoFoldGivesTheSameMetrics) {
  const CliRun folded = stratagem("sim default --json");
  const CliRun full = stratagem("sim default --json --no-fold");
  ASSERT_EQ(folded.code, 0) << folded.err;
  ASSERT_EQ(full.code, 0) << full.err;
  auto a = nlohmann::json::parse(folded.out), b = nlohmann::json::parse(full.out);
  for (const char* key : {"sim_wall_s", "build_wall_s", "events", "built_ranks"}) {
    a.erase(key);
    b.erase(key);
  }
  EXPECT_EQ(a.dump(2), b.dump(2));
}

TEST(SimCli, BadInputExitsTwo) {
  EXPECT_EQ(stratagem("sim default --algorithm spiral").code, 2);
  EXPECT_EQ(stratagem("sim no-such-scenario.json").code, 2);
}

}  // namespace
}  // namespace stratagem::test
