// `stratagem memory`: the JSON shape, the text table, the quick form and its errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_util.hpp"

namespace stratagem::test {
namespace {

const char* kClasses[] = {"params",      "grads",           "optimizer",    "master_weights",
                          "activations", "gathered_params", "comm_buckets", "loss_scale"};

int lines(const std::string& text) {
  int n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

TEST(MemoryCli, JsonHasOneEntryPerRankWithEveryClass) {
  const CliResult r = run_cli("memory default --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j["ranks"].is_array());
  ASSERT_EQ(j["ranks"].size(), 8u);  // the default scenario: dp 8 on one DGX A100
  for (int i = 0; i < 8; ++i) {
    const auto& rank = j["ranks"][i];
    EXPECT_EQ(rank["rank"].get<int>(), i);
    EXPECT_EQ(rank["stage"].get<int>(), 0);
    double sum = 0;
    for (const char* c : kClasses) {
      ASSERT_TRUE(rank["classes"].contains(c)) << c;
      ASSERT_TRUE(rank["classes"][c].is_number()) << c;
      sum += rank["classes"][c].get<double>();
    }
    EXPECT_DOUBLE_EQ(rank["peak_bytes"].get<double>(), sum);
    EXPECT_DOUBLE_EQ(rank["capacity_bytes"].get<double>(), 80.0 * (1u << 30));
    EXPECT_TRUE(rank["fits"].is_boolean());
    EXPECT_TRUE(rank["model_states_bytes"].is_number());
    // Model states are params + grads + optimizer + master weights.
    EXPECT_DOUBLE_EQ(rank["model_states_bytes"].get<double>(),
                     rank["classes"]["params"].get<double>() +
                         rank["classes"]["grads"].get<double>() +
                         rank["classes"]["optimizer"].get<double>() +
                         rank["classes"]["master_weights"].get<double>());
  }
  EXPECT_TRUE(j["fits"].is_boolean());
  EXPECT_EQ(j["stages"].size(), 1u);
}

TEST(MemoryCli, JsonModelStatesOfTheDefaultScenario) {
  // gpt2-xl, ZeRO-2 over 8 ranks, bf16 AdamW: 2Ψ + (2 + 12)Ψ/8, Ψ from `stratagem info`.
  const auto info = nlohmann::json::parse(run_cli("info default --json").out);
  const double psi = info["params"].get<double>();
  const auto j = nlohmann::json::parse(run_cli("memory default --json").out);
  EXPECT_DOUBLE_EQ(j["ranks"][0]["model_states_bytes"].get<double>(), 2 * psi + 14 * psi / 8);
  EXPECT_DOUBLE_EQ(j["ranks"][0]["classes"]["params"].get<double>(), 2 * psi);
}

TEST(MemoryCli, TableStatesUnitsAndVerdict) {
  const CliResult r = run_cli("memory default");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("GiB (1 GiB = 2^30 bytes)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stage 0 (ranks 0-7)"), std::string::npos) << r.out;
  for (const char* c : kClasses) EXPECT_NE(r.out.find(c), std::string::npos) << c;
  EXPECT_NE(r.out.find("capacity"), std::string::npos);
  EXPECT_NE(r.out.find("headroom"), std::string::npos);
  EXPECT_NE(r.out.find("\nfits: "), std::string::npos) << r.out;
}

TEST(MemoryCli, ShortByWhenTooLarge) {
  const std::string dir = temp_dir("memory-short");
  write_file(dir + "/big.json", R"({"model": {"params": 7.5e9, "layers": 32},
    "cluster": {"preset": "dgx-a100-80gb"}, "strategy": {"dp": 8, "mixed_precision": "bf16"}})");
  const CliResult r = run_cli("memory " + dir + "/big.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\nshort by "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("DOES NOT FIT"), std::string::npos) << r.out;
}

TEST(MemoryCli, QuickFormReproducesTheZeroPaper) {
  // Ψ = 7.5B, N = 64 (ZeRO paper figure 1): 120, 31.4, 16.6, 1.9 GB.
  const double expected[] = {120e9, 31.40625e9, 16.640625e9, 1.875e9};
  for (int stage = 0; stage <= 3; ++stage) {
    const CliResult r = run_cli("memory --params 7.5e9 --gpus 64 --zero " + std::to_string(stage) +
                                " --mixed_precision fp16 --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(j["model_states_only"].get<bool>());
    EXPECT_DOUBLE_EQ(j["model_states_bytes"].get<double>(), expected[stage]) << stage;
    EXPECT_DOUBLE_EQ(j["total_bytes"].get<double>(), expected[stage] + 8);  // fp16 loss scale
  }
  const CliResult text = run_cli("memory --params 7.5e9 --gpus 64 --zero 2");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("16.641"), std::string::npos) << text.out;  // GB column
  EXPECT_NE(text.out.find("Model states only"), std::string::npos);
  EXPECT_NE(text.out.find("\nfits: "), std::string::npos);
}

TEST(MemoryCli, QuickFormVariants) {
  auto bytes = [](const std::string& args) {
    const CliResult r = run_cli("memory --json " + args);
    EXPECT_EQ(r.exit_code, 0) << args << ": " << r.err;
    return nlohmann::json::parse(r.out);
  };
  EXPECT_DOUBLE_EQ(bytes("--params 1e9 --mixed_precision no")["model_states_bytes"].get<double>(),
                   16e9);
  EXPECT_DOUBLE_EQ(
      bytes("--params 1e9 --mixed_precision bf16 --master_weights false")["model_states_bytes"]
          .get<double>(),
      12e9);
  EXPECT_DOUBLE_EQ(bytes("--params 1e9 --optimizer sgd")["model_states_bytes"].get<double>(), 12e9);
  const auto off = bytes("--params 1e9 --gpus 4 --zero 2 --offload_optimizer cpu");
  EXPECT_DOUBLE_EQ(off["model_states_bytes"].get<double>(), 2e9 + 2e9 / 4);
  EXPECT_DOUBLE_EQ(off["host_bytes"].get<double>(), 12e9 / 4);
  EXPECT_DOUBLE_EQ(bytes("--params 7B")["params"].get<double>(), 7e9);
  EXPECT_FALSE(bytes("--params 70B --gpu a100-80gb")["fits"].get<bool>());
}

TEST(MemoryCli, ErrorsAreOneLineWithExitCode2) {
  const std::string dir = temp_dir("memory-errors");
  for (const std::string& args : std::vector<std::string>{
           "memory --params 7.5e9 --gpus 64 --zero 4",
           "memory --params 7.5e9 --gpus abc",
           "memory --params 7.5e9 --gpus 0",
           "memory --params 7.5e9 --gpu no-such-gpu",
           "memory --params 7.5e9 --mixed_precision fp8",
           "memory --params abc",
           "memory --params 7.5e9 --mixed_precision fp16 --master_weights false",
           "memory --params 7.5e9 --offload_optimizer cpu",
           "memory no-such-scenario",
           "memory " + dir + "/missing.json",
           "memory default --params 7.5e9",
           "memory default --zero 2",
           "memory",
       }) {
    const CliResult r = run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.out << r.err;
    EXPECT_EQ(lines(r.err), 1) << args << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << args << "\n" << r.err;
  }
}

}  // namespace
}  // namespace stratagem::test
