// This host's CPU measured on first use and cached (apps/host_profile.hpp): `validate` on CPUs
// without --profile, `sim --profile host`, `--recalibrate`, `calibrate --host`.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/runtime/cli_process.hpp"
#include "tests/runtime/test_executor_util.hpp"

namespace stratagem::test {
namespace {

namespace fs = std::filesystem;

/// The cached profiles in `dir` (cpu-m<version>-<host>-<key>-x<N>.json), lock files left out.
std::vector<fs::path> cached(const fs::path& dir) {
  std::vector<fs::path> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".json") out.push_back(e.path());
  }
  return out;
}

class HostProfileCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = work_dir("host-profile");
    cache_ = dir_ / "cache";
    ::setenv("STRATAGEM_CACHE_DIR", cache_.c_str(), 1);
    auto s = tiny_scenario(2, {{"dp", 2}, {"micro_batch_size", 2}});
    s.name = "tiny-ddp";
    scenario_ = dir_ / "tiny-ddp.json";
    std::ofstream(scenario_) << scenario::to_json(s).dump(2);
  }
  void TearDown() override { ::unsetenv("STRATAGEM_CACHE_DIR"); }
  Cli validate(const std::string& extra) {
    return stratagem("validate " + scenario_.string() + " --num_processes 2 --cpu --steps 2" +
                         extra + " --work_dir " + (dir_ / "runs").string(),
                     dir_);
  }
  fs::path dir_, cache_, scenario_;
};

TEST_F(HostProfileCli, ValidateMeasuresThisHostOnFirstUseThenReadsTheCache) {
  const auto first = validate("");
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  EXPECT_NE(first.err.find("first use"), std::string::npos) << first.err;
  const auto files = cached(cache_);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_NE(files[0].filename().string().find("-x2.json"), std::string::npos) << files[0];
  EXPECT_NE(first.out.find("simulated with this host's CPU profile " + files[0].string()),
            std::string::npos)
      << first.out;
  // The cache is a profile like `calibrate -o` writes: the device and Gloo's collectives.
  const auto doc = nlohmann::json::parse(std::ifstream(files[0]));
  EXPECT_EQ(doc.at("network").at("processes"), 2) << doc.dump();
  EXPECT_TRUE(doc.at("device").contains("matmul")) << doc.dump();
  const auto written = fs::last_write_time(files[0]);

  const auto second = validate("");
  ASSERT_EQ(second.exit_code, 0) << second.out << second.err;
  EXPECT_EQ(second.err.find("measuring"), std::string::npos) << second.err;
  EXPECT_EQ(fs::last_write_time(files[0]), written);

  // The simulator commands take the same profile by name, without measuring again.
  const auto sim = stratagem("sim " + scenario_.string() + " --profile host --json", dir_);
  ASSERT_EQ(sim.exit_code, 0) << sim.out << sim.err;
  EXPECT_EQ(sim.err.find("measuring"), std::string::npos) << sim.err;
  EXPECT_NE(sim.out.find(doc.at("name").get<std::string>()), std::string::npos) << sim.out;

  const auto again = validate(" --recalibrate");
  ASSERT_EQ(again.exit_code, 0) << again.out << again.err;
  EXPECT_NE(again.err.find("again"), std::string::npos) << again.err;
  EXPECT_EQ(cached(cache_).size(), 1u);
}

TEST_F(HostProfileCli, RecalibrateWithAProfileFileIsRefusedBeforeAnythingRuns) {
  const auto r = validate(" --recalibrate --profile other.json");
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("--recalibrate"), std::string::npos) << r.err;
  EXPECT_TRUE(cached(cache_).empty());
  EXPECT_FALSE(fs::exists(dir_ / "runs" / "tiny-ddp.real.json"));
}

TEST_F(HostProfileCli, CalibrateHostWritesTheCacheAndRefusesAnOutputFile) {
  const auto r = stratagem("calibrate --host --num_processes 2", dir_);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto files = cached(cache_);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_NE(r.out.find("cached " + files[0].string()), std::string::npos) << r.out;
  const auto both = stratagem("calibrate --host -o p.json --num_processes 2", dir_);
  EXPECT_EQ(both.exit_code, 2) << both.out << both.err;
  EXPECT_NE(both.err.find("--host"), std::string::npos) << both.err;
  const auto neither = stratagem("calibrate --num_processes 2", dir_);
  EXPECT_EQ(neither.exit_code, 2) << neither.out << neither.err;
  EXPECT_NE(neither.err.find("-o"), std::string::npos) << neither.err;
}

}  // namespace
}  // namespace stratagem::test
