// The measured form of a model ("model": {"measured": {...}}, what Accelerator::export_scenario
// writes): parsing and its errors, the units the plan builds from it, memory and simulation.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/memory/memory.hpp"
#include "engine/plan/builder.hpp"
#include "engine/scenario/error.hpp"
#include "engine/scenario/scenario.hpp"
#include "engine/workload/units.hpp"
#include "sim/cost_models.hpp"
#include "sim/simulator.hpp"

namespace stratagem {
namespace {

nlohmann::json unit(const std::string& name, double params, double flops, double act) {
  return {{"name", name}, {"params", params}, {"forward_flops", flops}, {"activation_bytes", act}};
}

// Three blocks of different sizes between an input and an output unit, measured in fp32.
nlohmann::json measured_json() {
  return {{"name", "user-net"},
          {"measured",
           {{"source", "test"},
            {"element_bytes", 4},
            {"boundary_bytes", 4096},
            {"input", unit("input", 1e6, 0, 4096)},
            {"blocks",
             {unit("layers.0", 2e6, 4e6, 20000), unit("layers.1", 3e6, 6e6, 30000),
              unit("layers.2", 1e6, 2e6, 10000)}},
            {"output", unit("output", 5e5, 1e6, 8000)}}}};
}

scenario::Scenario scenario(nlohmann::json strategy, nlohmann::json model = measured_json(),
                            int gpus = 8) {
  nlohmann::json j = {{"name", "measured"},
                      {"model", std::move(model)},
                      {"cluster", {{"preset", "dgx-a100-80gb"}, {"nodes", 1}, {"gpus_per_node", gpus}}},
                      {"strategy", std::move(strategy)},
                      {"training", {{"seq_len", 1}}}};
  return scenario::parse_scenario(j);
}

TEST(MeasuredModel, ParsesIntoTotalsAndRoundTrips) {
  const scenario::Scenario s = scenario({{"dp", 8}, {"micro_batch_size", 4}});
  ASSERT_TRUE(s.model.measured);
  EXPECT_EQ(s.model.layers, 3);
  EXPECT_EQ(s.model.hidden, 1024);  // 4096 boundary bytes / 4 bytes per element
  EXPECT_DOUBLE_EQ(scenario::total_params(s.model), 7.5e6);
  EXPECT_DOUBLE_EQ(scenario::embedding_params(s.model), 1e6);
  EXPECT_DOUBLE_EQ(scenario::head_params(s.model), 5e5);
  EXPECT_DOUBLE_EQ(scenario::block_params(s.model), 2e6);  // the blocks' mean
  // 3 × (0 + 12e6 + 1e6) FLOPs per sample, seq_len 1.
  EXPECT_DOUBLE_EQ(scenario::training_flops_per_token(s.model, 1), 39e6);
  const scenario::Scenario again = scenario::parse_scenario(scenario::to_json(s));
  EXPECT_EQ(scenario::to_json(again), scenario::to_json(s));
  EXPECT_EQ(again.model.measured->blocks[1].name, "layers.1");
}

TEST(MeasuredModel, UnitsScaleWithTheMicroBatchAndPrecision) {
  const auto fp32 = workload::make_units(scenario({{"dp", 8}, {"micro_batch_size", 4}}));
  ASSERT_EQ(fp32.size(), 5u);
  EXPECT_EQ(fp32[0].name, "input");
  EXPECT_EQ(fp32[2].name, "layers.1");
  EXPECT_DOUBLE_EQ(fp32[2].params, 3e6);
  EXPECT_DOUBLE_EQ(fp32[2].fwd_flops, 4 * 6e6);
  EXPECT_DOUBLE_EQ(fp32[2].act_bytes, 4 * 30000.0);
  EXPECT_DOUBLE_EQ(fp32[4].act_bytes, 4 * 8000.0);
  // bf16 halves the activations measured in fp32; full recomputation keeps the block input.
  const auto bf16 = workload::make_units(scenario(
      {{"dp", 8}, {"micro_batch_size", 4}, {"mixed_precision", "bf16"}, {"recompute", "full"}}));
  EXPECT_DOUBLE_EQ(bf16[2].full_act_bytes, 4 * 15000.0);
  EXPECT_DOUBLE_EQ(bf16[2].act_bytes, 4 * 2048.0);
  EXPECT_DOUBLE_EQ(bf16[2].recompute_flops, bf16[2].fwd_flops);
  EXPECT_DOUBLE_EQ(bf16[0].recompute_flops, 0.0);  // the input unit is not recomputed
}

TEST(MeasuredModel, PipelineSendsTheMeasuredBoundary) {
  const auto p = plan::build_plan(scenario({{"dp", 1}, {"pp", 3}, {"micro_batch_size", 2},
                                            {"grad_accum", 3}, {"mixed_precision", "bf16"}},
                                           measured_json(), 3));
  ASSERT_FALSE(p.transfers.empty());
  for (const auto& op : p.ops) {
    if (const auto* t = std::get_if<plan::P2P>(&op.payload)) {
      EXPECT_DOUBLE_EQ(t->bytes, 2 * 4096.0 / 2);  // micro-batch 2, bf16 of fp32's bytes
    }
  }
}

TEST(MeasuredModel, MemoryAndSimulationFollowTheUnits) {
  const scenario::Scenario s =
      scenario({{"dp", 8}, {"micro_batch_size", 4}, {"sharding", "zero3"}});
  const auto mem = memory::estimate_memory(s);
  // fp32 Adam with ZeRO-3 over 8: 16 bytes per parameter / 8.
  EXPECT_NEAR(mem.worst().model_states_bytes, 16 * 7.5e6 / 8, 16 * 3e6 / 8);
  EXPECT_GT(mem.worst().at(plan::TensorClass::activations), 0);
  const auto r = sim::Simulator().run(plan::build_plan(s), sim::make_cost_models(s));
  EXPECT_GT(r.metrics.step_time_s, 0);
  // The plan's FLOPs are the measured ones: 3 × 13e6 per sample × 32 samples.
  const auto p = plan::build_plan(s);
  EXPECT_DOUBLE_EQ(p.model_flops_per_step, 39e6 * 32);
}

TEST(MeasuredModel, BadFormsNameTheField) {
  auto expect_error = [](nlohmann::json model, const std::string& field) {
    try {
      scenario({{"dp", 8}}, std::move(model));
      ADD_FAILURE() << "accepted; expected an error at " << field;
    } catch (const SpecError& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  nlohmann::json no_blocks = measured_json();
  no_blocks["measured"]["blocks"] = nlohmann::json::array();
  expect_error(no_blocks, "model.measured.blocks");
  nlohmann::json negative = measured_json();
  negative["measured"]["blocks"][1]["forward_flops"] = -1;
  expect_error(negative, "model.measured.blocks[1].forward_flops");
  nlohmann::json typo = measured_json();
  typo["measured"]["input"]["flops"] = 1;
  expect_error(typo, "model.measured.input");
  nlohmann::json mixed = measured_json();
  mixed["vocab"] = 50000;  // a transformer key beside the measured form
  expect_error(mixed, "model");
  nlohmann::json no_boundary = measured_json();
  no_boundary["measured"].erase("boundary_bytes");
  expect_error(no_boundary, "model.measured.boundary_bytes");
  // A pipeline stage needs a block: 3 blocks do not fill pp 4.
  try {
    scenario({{"dp", 2}, {"pp", 4}});
    ADD_FAILURE() << "pp 4 over 3 blocks accepted";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("strategy.pp"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace stratagem
