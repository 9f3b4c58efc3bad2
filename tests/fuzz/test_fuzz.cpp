// A bounded mutation fuzzer for the three readers of user files — scenarios (JSON), accelerate
// configs (YAML) and DeepSpeed configs (JSON) — run in CI. Seeds: tests/fuzz/corpus (the
// inputs that crashed or escaped unlocated before, #19) and the shipped scenarios; mutations:
// byte flips, deleted and duplicated spans, inserted tokens from a dictionary of hostile values
// (1e309, 2^63, null, NaN, deep nesting, control bytes, …). Every input must either be
// accepted or rejected with a SpecError (exit 2 with a located message); any other exception
// fails with the input saved, a crash fails the test binary. Accepted scenarios are also sized
// (memory) and, when small, planned and simulated.
//
// STRATAGEM_FUZZ_ITERATIONS (default 5000 per reader, a few seconds) and STRATAGEM_FUZZ_SEED (default 1)
// make longer or other runs: `STRATAGEM_FUZZ_ITERATIONS=200000 ./build/tests/test_fuzz`.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>

#include "engine/memory/memory.hpp"
#include "engine/plan/builder.hpp"
#include "engine/scenario/error.hpp"
#include "engine/scenario/import.hpp"
#include "engine/scenario/json_reader.hpp"
#include "engine/scenario/scenario.hpp"
#include "sim/simulator.hpp"

namespace stratagem::test {
namespace {

namespace fs = std::filesystem;

long env_or(const char* name, long fallback) {
  const char* v = std::getenv(name);
  return v ? std::strtol(v, nullptr, 10) : fallback;
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> seeds(const std::vector<std::string>& extensions, bool shipped) {
  std::vector<std::string> out;
  const fs::path corpus = fs::path(STRATAGEM_SOURCE_DIR) / "tests/fuzz/corpus";
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(corpus)) files.push_back(e.path());
  if (shipped) {
    for (const auto& e : fs::directory_iterator(fs::path(STRATAGEM_SOURCE_DIR) / "scenarios")) {
      if (e.path().extension() == ".json") files.push_back(e.path());
    }
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    for (const auto& ext : extensions) {
      if (f.filename().string().find(ext) != std::string::npos) out.push_back(read(f));
    }
  }
  return out;
}

const std::vector<std::string> kJsonTokens = {
    "1e309",  "-1e309", "2147483648", "9223372036854775807", "18446744073709551616", "-1", "0",
    "0.5",    "null",   "true",       "\"\"",                "\"x\\n\\u0000y\"",     "[]", "{}",
    "NaN",    "[[[[[[[[[[[[",         "{\"a\":",             ",",  ":",  "\"preset\"",
    "\"dp\"", "\"cp\"", "\"tp\"",     "\"pp\"",              "\"grad_accum\"",      "\"fp8\"",
    "\"eager\"", "16777216", "65536", "1e-300", "\"\xff\xfe\"", "\"\\ud800\""};
const std::vector<std::string> kYamlTokens = {
    ": ",        "- ",       "  ",          "\n",        "{",         "[",         "*a",
    "&a ",       "!!binary ", "\"",         "'",         "null",      "~",         "1e309",
    "-1",        "0",        "9223372036854775807", "FSDP", "DEEPSPEED", "MEGATRON_LM",
    "fsdp_config:\n  ", "deepspeed_config:\n  ", "[[[[[[[[[[", "<<: *a\n", "\t", "\x01"};

std::string mutate(std::string s, std::mt19937_64& rng, const std::vector<std::string>& tokens) {
  auto pick = [&](std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(rng() % n); };
  const int rounds = 1 + static_cast<int>(rng() % 4);
  for (int k = 0; k < rounds; ++k) {
    switch (rng() % 6) {
      case 0:
        if (!s.empty()) s[pick(s.size())] ^= static_cast<char>(1u << (rng() % 8));
        break;
      case 1: {
        const std::size_t at = pick(s.size()), len = pick(std::min<std::size_t>(s.size() - at, 40));
        s.erase(at, len);
        break;
      }
      case 2: {
        const std::size_t at = pick(s.size()), len = pick(std::min<std::size_t>(s.size() - at, 60));
        s.insert(pick(s.size()), s.substr(at, len));
        break;
      }
      case 3:
      case 4:
        s.insert(pick(s.size() + 1), tokens[pick(tokens.size())]);
        break;
      default: {  // replace a number with a hostile one
        const std::size_t at = s.find_first_of("0123456789", pick(s.size()));
        if (at == std::string::npos) break;
        const std::size_t end = s.find_first_not_of("0123456789.e", at);
        s.replace(at, (end == std::string::npos ? s.size() : end) - at,
                  tokens[pick(std::min<std::size_t>(tokens.size(), 9))]);
        break;
      }
    }
  }
  if (rng() % 50 == 0) {  // deep nesting around a value
    const int depth = 50 + static_cast<int>(rng() % 200000);
    const bool arrays = rng() % 2;
    s = std::string(depth, arrays ? '[' : '{') + s;
  }
  return s;
}

// Accepted scenarios are used further: memory always, plan + simulation when small.
void exercise(const scenario::Scenario& s) {
  const auto memory = memory::estimate_memory(s);
  (void)memory;
  if (s.world_size() <= 64 && s.strategy.grad_accum <= 16 && s.model.layers <= 96 &&
      s.strategy.chunks <= 4) {
    const auto plan = plan::build_plan(s);
    sim::Simulator().run(plan, sim::make_cost_models(s));
  }
}

struct Outcome {
  long accepted = 0, rejected = 0;
};

// Runs `reader` on mutations of `corpus`; returns how many were accepted and rejected.
Outcome fuzz(const std::string& name, const std::vector<std::string>& corpus,
             const std::vector<std::string>& tokens,
             const std::function<void(const std::string&)>& reader) {
  std::mt19937_64 rng(static_cast<std::uint64_t>(env_or("STRATAGEM_FUZZ_SEED", 1)));
  const long iterations = env_or("STRATAGEM_FUZZ_ITERATIONS", 5000);
  Outcome o;
  for (long i = 0; i < iterations; ++i) {
    const std::string input = mutate(corpus[static_cast<std::size_t>(rng() % corpus.size())],
                                     rng, tokens);
    try {
      reader(input);
      ++o.accepted;
    } catch (const SpecError& e) {
      ++o.rejected;
      const std::string what = e.what();
      if (what.find('\n') != std::string::npos || what.size() > 2000) {
        ADD_FAILURE() << name << " input " << i << ": the message is not one readable line: "
                      << what.substr(0, 300);
        return o;
      }
    } catch (const std::exception& e) {
      const fs::path saved = fs::path(testing::TempDir()) / (name + "-" + std::to_string(i));
      std::ofstream(saved, std::ios::binary) << input;
      ADD_FAILURE() << name << " input " << i << " escaped as " << typeid(e).name() << ": "
                    << e.what() << " (input saved to " << saved.string() << ")";
      return o;
    }
  }
  std::printf("%s: %ld inputs, %ld accepted, %ld rejected with a located error\n", name.c_str(),
              iterations, o.accepted, o.rejected);
  return o;
}

std::string temp_file(const std::string& name, const std::string& text) {
  const fs::path p = fs::path(testing::TempDir()) / name;
  std::ofstream(p, std::ios::binary) << text;
  return p.string();
}

TEST(Fuzz, ScenarioReaderAcceptsOrLocatesEveryMutation) {
  const auto corpus = seeds({"scenario", ".json"}, true);
  ASSERT_GT(corpus.size(), 10u);
  const Outcome o = fuzz("scenario", corpus, kJsonTokens, [](const std::string& text) {
    exercise(scenario::parse_scenario(scenario::parse_json_text(text, "fuzz.json"), "fuzz"));
  });
  EXPECT_GT(o.accepted, 0);  // the mutations leave some valid: the readers go deep
  EXPECT_GT(o.rejected, 0);
}

TEST(Fuzz, AccelerateConfigReaderAcceptsOrLocatesEveryMutation) {
  const auto corpus = seeds({".yaml"}, false);
  ASSERT_GE(corpus.size(), 3u);
  const std::string file = temp_file("fuzz.yaml", "");
  const Outcome o = fuzz("accelerate", corpus, kYamlTokens, [&](const std::string& text) {
    std::ofstream(file, std::ios::binary | std::ios::trunc) << text;
    scenario::ImportOptions options;
    options.model = "gpt2";
    exercise(scenario::parse_scenario(scenario::import_accelerate(file, options), "fuzz"));
    scenario::read_accelerate_launch_config(file);
  });
  EXPECT_GT(o.accepted, 0);
  EXPECT_GT(o.rejected, 0);
}

TEST(Fuzz, DeepSpeedConfigReaderAcceptsOrLocatesEveryMutation) {
  const auto corpus = seeds({"ds-"}, false);
  ASSERT_GE(corpus.size(), 2u);
  const std::string file = temp_file("fuzz_ds.json", "");
  const Outcome o = fuzz("deepspeed", corpus, kJsonTokens, [&](const std::string& text) {
    std::ofstream(file, std::ios::binary | std::ios::trunc) << text;
    scenario::ImportOptions options;
    options.model = "gpt2";
    exercise(scenario::parse_scenario(scenario::import_deepspeed(file, options), "fuzz"));
  });
  EXPECT_GT(o.accepted, 0);
  EXPECT_GT(o.rejected, 0);
}

}  // namespace
}  // namespace stratagem::test
