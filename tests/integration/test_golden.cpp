// Golden digests: every shipped scenario's plan (folded and not) and simulated result, and
// every compare variant of each, serialized canonically and hashed. Refactors of the plan
// builder must keep them byte-identical. After an intended change of plans or results,
// regenerate with STRATAGEM_UPDATE_GOLDEN=1 ./build/tests/test_integration
// --gtest_filter='Golden.*' and say in the commit why they changed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "engine/result/result.hpp"
#include "engine/scenario/presets.hpp"
#include "sim/simulate.hpp"
#include "tests/plan/plan_digest.hpp"
#include "tune/strategy_variants.hpp"

namespace stratagem {
namespace {

const char* kGoldenPath = STRATAGEM_SOURCE_DIR "/tests/golden/plans.golden";

std::map<std::string, std::string> current_digests() {
  std::map<std::string, std::string> out;
  for (const auto& name : scenario::shipped_scenario_names()) {
    const auto base = scenario::load_scenario(name);
    for (const auto& v : tune::make_variants(base, tune::variant_names())) {
      if (!v.scenario) continue;
      for (bool fold : {true, false}) {
        if (!fold && v.name != "base") continue;  // unfolded: the shipped scenario itself
        const sim::Simulation run =
            sim::simulate_scenario(*v.scenario, {.build = {.fold = fold}, .cost = {}});
        const plan::StepPlan& plan = run.plan;
        const result::RunResult& res = run.result;
        const std::string key = name + " " + v.name + (fold ? " fold" : " nofold");
        out[key] = "plan=" + test::hex(test::fnv1a(test::canonical_plan(plan))) +
                   " result=" + test::hex(test::fnv1a(result::to_json(res).dump())) +
                   " ops=" + std::to_string(plan.ops.size());
      }
    }
  }
  return out;
}

TEST(Golden, PlansAndResultsAreUnchanged) {
  const auto now = current_digests();
  if (std::getenv("STRATAGEM_UPDATE_GOLDEN")) {
    std::ofstream f(kGoldenPath);
    for (const auto& [k, v] : now) f << k << " " << v << "\n";
    GTEST_SKIP() << "wrote " << kGoldenPath;
  }
  std::ifstream f(kGoldenPath);
  ASSERT_TRUE(f) << "missing " << kGoldenPath;
  std::map<std::string, std::string> golden;
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream in(line);
    std::string scenario, variant, fold, rest;
    in >> scenario >> variant >> fold;
    std::getline(in, rest);
    golden[scenario + " " + variant + " " + fold] = rest.substr(rest.find_first_not_of(' '));
  }
  for (const auto& [k, v] : golden) {
    auto it = now.find(k);
    if (it == now.end()) {
      ADD_FAILURE() << k << ": no longer produced";
      continue;
    }
    EXPECT_EQ(it->second, v) << k;
  }
  for (const auto& [k, v] : now) {
    EXPECT_TRUE(golden.count(k)) << k << ": not in the golden file (regenerate it)";
  }
}

}  // namespace
}  // namespace stratagem
