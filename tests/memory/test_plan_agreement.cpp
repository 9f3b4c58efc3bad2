// Agreement with the plan: the analytic model (engine/memory) against the peak the simulator
// measures when it runs the plan the builder emits (engine/plan/builder.cpp, sim/). Both follow
// the memory contract of docs/architecture.md; this test keeps them from drifting apart.
// It is the one place the memory tests build plans.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/memory/memory.hpp"
#include "engine/plan/builder.hpp"
#include "engine/scenario/presets.hpp"
#include "sim/simulator.hpp"

namespace stratagem::memory {
namespace {

// Peaks are sums of the same byte counts in another order: equal up to rounding.
constexpr double kRelativeTolerance = 1e-12;

void expect_agreement(const scenario::Scenario& s, const std::string& label) {
  const MemoryReport analytic = estimate_memory(s);
  const plan::StepPlan plan = plan::build_plan(s);
  const result::RunResult simulated = sim::Simulator().run(plan, sim::make_cost_models(s));
  ASSERT_EQ(simulated.ranks.size(), analytic.ranks.size()) << label;
  for (const RankMemory& r : analytic.ranks) {
    const result::RankResult& measured = simulated.resolved(r.rank);
    EXPECT_NEAR(measured.peak_memory_bytes, r.peak_bytes, kRelativeTolerance * r.peak_bytes)
        << label << ", rank " << r.rank << " (stage " << r.stage << ")";
    EXPECT_DOUBLE_EQ(measured.host_bytes, r.host_bytes) << label << ", rank " << r.rank;
  }
}

TEST(AgreementWithThePlan, EveryShippedScenario) {
  const auto names = scenario::shipped_scenario_names();
  ASSERT_FALSE(names.empty());
  for (const std::string& name : names) expect_agreement(scenario::load_scenario(name), name);
}

// Variants of a small decoder on one DGX A100: every sharding, schedule, recomputation and
// prefetch depth ≤ 1 (deeper prefetch is an upper bound, see transient.hpp), small and large
// buckets, fp16 and fp32.
TEST(AgreementWithThePlan, DataParallelVariants) {
  const std::string model = R"("model": {"layers": 4, "hidden": 256, "heads": 4, "vocab": 1000,
                                          "max_positions": 512, "tied_embeddings": false})";
  for (const char* sharding : {"none", "zero1", "zero2", "zero3", "FULL_SHARD", "SHARD_GRAD_OP"}) {
    for (const char* schedule : {"1f1b", "gpipe"}) {
      for (const char* recompute : {"none", "selective", "full"}) {
        for (int prefetch : {0, 1}) {
          for (double bucket_mb : {25.0, 0.5}) {
            const std::string text =
                "{" + model + R"(, "cluster": {"preset": "dgx-a100-80gb"}, "strategy": {"dp": 8,
                "schedule": ")" +
                schedule + R"(", "micro_batch_size": 2, "grad_accum": 3,
                "sharding": ")" +
                sharding + R"(", "mixed_precision": "fp16", "recompute": ")" + recompute +
                R"(", "prefetch": )" + std::to_string(prefetch) + R"(, "bucket_mb": )" +
                std::to_string(bucket_mb) + R"(}, "training": {"seq_len": 512}})";
            expect_agreement(scenario::parse_scenario(nlohmann::json::parse(text)), text);
          }
        }
      }
    }
  }
}

// Tied word embeddings on one stage: a resharding head gathers the table with its parameters.
TEST(AgreementWithThePlan, TiedHeadVariants) {
  const std::string model = R"("model": {"layers": 4, "hidden": 256, "heads": 4, "vocab": 1000,
                                          "max_positions": 512, "tied_embeddings": true})";
  for (const char* sharding : {"zero3", "FULL_SHARD", "SHARD_GRAD_OP"}) {
    for (const char* recompute : {"none", "full"}) {
      for (int prefetch : {0, 1}) {
        const std::string text =
            "{" + model + R"(, "cluster": {"preset": "dgx-a100-80gb"}, "strategy": {"dp": 8,
            "micro_batch_size": 2, "grad_accum": 3, "sharding": ")" +
            sharding + R"(", "mixed_precision": "bf16", "recompute": ")" + recompute +
            R"(", "prefetch": )" + std::to_string(prefetch) + R"(}, "training": {"seq_len": 512}})";
        expect_agreement(scenario::parse_scenario(nlohmann::json::parse(text)), text);
      }
    }
  }
}

TEST(AgreementWithThePlan, PipelineVariants) {
  const std::string model = R"("model": {"layers": 8, "hidden": 256, "heads": 4, "vocab": 1000,
                                          "max_positions": 512})";
  // The zero-bubble schedules keep activations from the forward to the W pass, and what a
  // recompute rebuilt from the B pass to it; m = 3 (< pp 4 for zb-h1 and zbv) too.
  for (const char* schedule :
       {"1f1b", "gpipe", "interleaved", "zb-h1", "interleaved-zb", "zbv", "dualpipev"}) {
    const bool zb = std::string(schedule).find("zb") != std::string::npos;
    for (int pp : {2, 4}) {
      for (int m : {pp, 3 * pp, 3}) {
        if (m == 3 && (!zb || std::string(schedule) == "interleaved-zb")) continue;
        if (std::string(schedule) == "dualpipev" && m < 2 * pp) continue;
        for (const char* recompute : {"none", "full", "selective"}) {
          if (!zb && std::string(recompute) == "selective") continue;
          for (const char* precision : {"no", "bf16"}) {
            const std::string chunks =
                std::string(schedule) == "interleaved" || std::string(schedule) == "interleaved-zb"
                    ? R"(, "chunks": 2)"
                    : "";
            const std::string text =
                "{" + model + R"(, "cluster": {"preset": "dgx-a100-80gb"}, "strategy": {"dp": )" +
                std::to_string(8 / pp) + R"(, "pp": )" + std::to_string(pp) + R"(, "schedule": ")" +
                schedule + "\"" + chunks + R"(, "grad_accum": )" + std::to_string(m) +
                R"(, "sharding": "zero1",
                "mixed_precision": ")" +
                precision + R"(", "recompute": ")" + recompute +
                R"("}, "training": {"seq_len": 256}})";
            expect_agreement(scenario::parse_scenario(nlohmann::json::parse(text)), text);
          }
        }
      }
    }
  }
}

// Flash and eager attention, context parallelism (with TP and FSDP, as torchtitan combines
// them), fp8 with and without FSDP's fp8 all-gather, on a DGX H100.
TEST(AgreementWithThePlan, AttentionContextParallelAndFp8Variants) {
  const std::string model = R"("model": {"layers": 4, "hidden": 256, "heads": 4, "vocab": 1000,
                                          "max_positions": 1024})";
  for (const char* attention : {"flash", "eager"}) {
    for (int cp : {1, 2}) {
      if (cp > 1 && std::string(attention) == "eager") continue;
      for (int tp : {1, 2}) {
        for (const char* sharding : {"none", "FULL_SHARD"}) {
          for (const char* precision : {"bf16", "fp8"}) {
            for (bool fp8_gather : {false, true}) {
              if (fp8_gather && (std::string(precision) != "fp8" ||
                                 std::string(sharding) == "none")) {
                continue;
              }
              for (const char* recompute : {"none", "selective", "full"}) {
                const std::string text =
                    "{" + model + R"(, "cluster": {"preset": "dgx-h100"}, "strategy": {"dp": )" +
                    std::to_string(8 / cp / tp) + R"(, "cp": )" + std::to_string(cp) +
                    R"(, "tp": )" + std::to_string(tp) + R"(, "attention": ")" + attention +
                    R"(", "micro_batch_size": 2, "grad_accum": 3, "sharding": ")" + sharding +
                    R"(", "mixed_precision": ")" + precision + R"(", "fp8_all_gather": )" +
                    (fp8_gather ? "true" : "false") + R"(, "recompute": ")" + recompute +
                    R"("}, "training": {"seq_len": 1024}})";
                expect_agreement(scenario::parse_scenario(nlohmann::json::parse(text)), text);
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace stratagem::memory
