// The simulator's use of a profile's measured units, the communication slow-down while a rank
// computes, and serial collectives (a backend that runs a rank's collectives in issue order).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "engine/plan/builder.hpp"
#include "engine/scenario/presets.hpp"
#include "engine/scenario/profile.hpp"
#include "engine/scenario/scenario.hpp"
#include "sim/cost_models.hpp"
#include "sim/flow_network.hpp"
#include "sim/simulator.hpp"
#include "tests/calib/gloo_profile.hpp"

namespace stratagem::test {
namespace {

scenario::Scenario validation_scenario(const std::string& name) {
  return scenario::load_scenario(std::string(STRATAGEM_SOURCE_DIR) + "/scenarios/" + name +
                                 ".json");
}

scenario::MeasuredUnits units_for(const scenario::Scenario& s) {
  scenario::MeasuredUnits m;
  m.shape = scenario::unit_shape_key(s);
  m.embedding_forward = 1e-3;
  m.embedding_backward = 2e-3;
  m.block_forward = 10e-3;
  m.block_backward = 20e-3;
  m.head_forward = 5e-3;
  m.head_backward = 7e-3;
  m.optimizer_per_param = 1e-9;
  return m;
}

TEST(MeasuredUnits, ShapeKeyNamesWhatAUnitCostDependsOn) {
  const auto s = validation_scenario("validate-cpu-ddp");
  EXPECT_EQ(scenario::unit_shape_key(s),
            "h256 a4 kv4 ffn1024 v1024 layernorm gelu learned bias untied s128 b4 no");
  auto other = s;
  other.strategy.micro_batch_size = 2;
  EXPECT_NE(scenario::unit_shape_key(other), scenario::unit_shape_key(s));
  other = s;
  other.strategy.dp = 1;  // the strategy's layout does not change a unit's cost
  EXPECT_EQ(scenario::unit_shape_key(other), scenario::unit_shape_key(s));
}

TEST(MeasuredUnits, ComputeOpsCostTheirUnitsMeasuredTimes) {
  auto s = validation_scenario("validate-cpu-ddp");
  s.cluster.gpu.measured_units = {units_for(s)};
  const auto plan = plan::build_plan(s);
  const auto models = sim::make_cost_models(s);
  const int layers = static_cast<int>(s.model.layers);
  int checked = 0;
  for (const auto& op : plan.ops) {
    const auto* c = std::get_if<plan::Compute>(&op.payload);
    if (!c || op.rank != 0) continue;
    const double t = models.compute->duration(*c);
    double expect = -1;
    auto sum = [&](double emb, double block, double head) {
      double x = 0;
      for (int u = c->unit_begin; u < c->unit_end; ++u) {
        x += u == 0 ? emb : u == layers + 1 ? head : block;
      }
      return x;
    };
    if (c->phase == plan::Phase::forward) expect = sum(1e-3, 10e-3, 5e-3);
    if (c->phase == plan::Phase::backward) expect = sum(2e-3, 20e-3, 7e-3);
    if (c->phase == plan::Phase::optimizer) expect = c->params * 1e-9;
    if (expect < 0) continue;
    EXPECT_DOUBLE_EQ(t, expect) << "op " << op.id;
    ++checked;
  }
  EXPECT_GE(checked, 5);
  // Another micro-batch is another shape: the roofline again.
  auto other = s;
  other.strategy.micro_batch_size = 2;
  other.strategy.grad_accum = 4;
  const auto roof = sim::make_cost_models(other);
  const auto p2 = plan::build_plan(other);
  for (const auto& op : p2.ops) {
    if (const auto* c = std::get_if<plan::Compute>(&op.payload);
        c && c->phase == plan::Phase::forward) {
      EXPECT_NE(roof.compute->duration(*c), 1e-3 + 4 * 10e-3 + 5e-3);
      break;
    }
  }
}

TEST(MeasuredUnits, TensorParallelChainsShareTheirUnitsMeasuredTime) {
  // Units measured at tp 2 with SP are one TP rank's; the key says so, a tp-1 measurement does
  // not apply, and the compute pieces of each unit's chain add up to its measured time, split
  // as their roofline times are.
  auto s = validation_scenario("tp2-cpu-gpt-tiny");
  EXPECT_EQ(scenario::unit_shape_key(s),
            "h256 a4 kv4 ffn1024 v1024 layernorm gelu learned bias tied s128 b4 no tp2 sp");
  auto whole = s;
  whole.strategy.tp = 1;
  whole.strategy.sequence_parallel = false;
  whole.cluster.gpu.measured_units = {units_for(whole)};
  whole.strategy.tp = 2;
  whole.strategy.sequence_parallel = true;
  const auto roofline = sim::make_cost_models(s);
  const auto unmatched = sim::make_cost_models(whole);
  s.cluster.gpu.measured_units = {units_for(s)};
  const auto plan = plan::build_plan(s);
  const auto models = sim::make_cost_models(s);
  const int head = static_cast<int>(s.model.layers) + 1;
  std::map<std::tuple<int, int, int>, double> per_unit;  // (phase, microbatch, unit) -> s
  std::map<std::tuple<int, int, int>, int> pieces;
  std::map<std::tuple<int, int, int>, double> roof_sum;
  std::map<std::tuple<int, int, int>, std::pair<double, double>> first_piece;
  for (const auto& op : plan.ops) {
    const auto* c = std::get_if<plan::Compute>(&op.payload);
    if (!c || op.rank != 0) continue;
    if (c->phase != plan::Phase::forward && c->phase != plan::Phase::backward) continue;
    ASSERT_EQ(c->unit_end, c->unit_begin + 1);  // TP splits per unit
    const auto key = std::make_tuple(static_cast<int>(c->phase), c->microbatch, c->unit_begin);
    per_unit[key] += models.compute->duration(*c);
    ++pieces[key];
    EXPECT_DOUBLE_EQ(unmatched.compute->duration(*c), roofline.compute->duration(*c));
    // Within a chain, pieces keep the roofline's proportions.
    roof_sum[key] += roofline.compute->duration(*c);
    if (first_piece.count(key) == 0) first_piece[key] = {models.compute->duration(*c),
                                                          roofline.compute->duration(*c)};
  }
  ASSERT_FALSE(per_unit.empty());
  for (const auto& [key, t] : per_unit) {
    const auto [phase, mb, u] = key;
    const bool forward = phase == static_cast<int>(plan::Phase::forward);
    const double expect = u == 0      ? (forward ? 1e-3 : 2e-3)
                          : u == head ? (forward ? 5e-3 : 7e-3)
                                      : (forward ? 10e-3 : 20e-3);
    EXPECT_NEAR(t, expect, 1e-12) << "phase " << phase << " mb " << mb << " unit " << u;
    const auto [measured, roof] = first_piece.at(key);
    EXPECT_NEAR(measured / t, roof / roof_sum.at(key), 1e-9);
  }
  EXPECT_GE(pieces[std::make_tuple(static_cast<int>(plan::Phase::forward), 0, 1)], 2);
}

// A zero-bubble schedule splits each unit's measured backward between its B pass (the pieces
// of the B chain, in their roofline proportions) and its W pass: together they are the
// measured backward.
TEST(MeasuredUnits, InputAndWeightPassesShareTheMeasuredBackward) {
  nlohmann::json j = nlohmann::json::parse(scenario::shipped_scenario_text("tp2-cpu-gpt-tiny"));
  j["cluster"] = {{"preset", "laptop-cpu"}, {"gpus_per_node", 4}};
  j["strategy"]["pp"] = 2;
  j["strategy"]["schedule"] = "zb-h1";
  j["strategy"]["grad_accum"] = 4;
  j["training"].erase("global_batch");
  auto s = scenario::parse_scenario(j);
  s.cluster.gpu.measured_units = {units_for(s)};
  const auto plan = plan::build_plan(s);
  const auto models = sim::make_cost_models(s);
  std::map<std::pair<int, int>, double> backward;  // (micro-batch, unit) -> B + W seconds
  std::map<std::pair<int, int>, int> passes;       // bit 1: a B piece, bit 2: a W
  for (const auto& op : plan.ops) {
    const auto* c = std::get_if<plan::Compute>(&op.payload);
    if (!c || op.rank != 0) continue;  // stage 0: the embedding and blocks 1-2
    const bool input = c->phase == plan::Phase::backward_input;
    if (!input && c->phase != plan::Phase::backward_weight) continue;
    ASSERT_NE(c->phase, plan::Phase::backward);
    for (int u = c->unit_begin; u < c->unit_end; ++u) passes[{c->microbatch, u}] |= input ? 1 : 2;
    if (c->unit_end == c->unit_begin + 1) {
      backward[{c->microbatch, c->unit_begin}] += models.compute->duration(*c);
    } else {  // a W over several units: as the sum of theirs
      for (int u = c->unit_begin; u < c->unit_end; ++u) {
        plan::Compute one = *c;
        one.unit_begin = u;
        one.unit_end = u + 1;
        backward[{c->microbatch, u}] += models.compute->duration(one);
      }
    }
  }
  ASSERT_EQ(backward.size(), 4u * 3);
  for (const auto& [key, t] : backward) {
    EXPECT_EQ(passes.at(key), 3) << "mb " << key.first << " unit " << key.second;
    EXPECT_NEAR(t, key.second == 0 ? 2e-3 : 20e-3, 1e-12)
        << "mb " << key.first << " unit " << key.second;
  }
}

TEST(MeasuredUnits, ProfileCarriesThemIntoTheScenario) {
  auto s = validation_scenario("validate-cpu-ddp");
  scenario::HardwareProfile p;
  p.name = "units";
  p.device.memory_bytes = 1e9;
  p.device.matmul[scenario::DType::fp32] = {50e9, 100, 0, {}};
  p.device.elementwise = {10e9, 1e-6, 0, {}};
  p.device.units = {units_for(s)};
  const auto q = scenario::parse_profile(scenario::to_json(p), "mem");
  ASSERT_EQ(q.device.units.size(), 1u);
  EXPECT_DOUBLE_EQ(q.device.units[0].block_backward, 20e-3);
  EXPECT_DOUBLE_EQ(q.device.units[0].optimizer_per_param, 1e-9);
  scenario::apply_profile(s, q);
  const auto again = scenario::parse_scenario(scenario::to_json(s), "again");
  ASSERT_EQ(again.cluster.gpu.measured_units.size(), 1u);
  EXPECT_EQ(again.cluster.gpu.measured_units[0].shape, scenario::unit_shape_key(s));
}

TEST(MeasuredUnits, PerCollectiveSlowdownsTravelFromProfileToCostModels) {
  scenario::HardwareProfile p = gloo_profile("slow");
  p.overlap.comm_slowdown_during_compute = 1.0;
  p.overlap.comm_slowdown_during_compute_by_op[scenario::CommOp::reduce_scatter] = 3.0;
  const auto q = scenario::parse_profile(scenario::to_json(p), "mem");
  EXPECT_DOUBLE_EQ(
      q.overlap.comm_slowdown_during_compute_by_op.at(scenario::CommOp::reduce_scatter), 3.0);
  auto s = validation_scenario("validate-cpu-zero2");
  scenario::apply_profile(s, q);
  const auto again = scenario::parse_scenario(scenario::to_json(s), "again");
  const auto m = sim::make_cost_models(again);
  EXPECT_DOUBLE_EQ(m.compute_comm_slowdown[static_cast<int>(scenario::CommOp::reduce_scatter)],
                   3.0);
  EXPECT_DOUBLE_EQ(m.compute_comm_slowdown[static_cast<int>(scenario::CommOp::all_gather)], 1.0);
  EXPECT_TRUE(m.serial_collectives);
}

TEST(FlowNetwork, ABusyLinkSlowsItsFlowsByTheirOwnFactor) {
  sim::EventQueue q;
  sim::FlowNetwork f;
  f.reset(2, &q, 7);
  const int links[] = {0, 1};
  const int id = f.start(0.0, links, 1.0, 0, 1.0);
  f.set_link_busy(0.5, 1, true);  // half done at full speed, then half the speed
  EXPECT_DOUBLE_EQ(f.rate(id), 0.5);
  double done = -1;
  while (!q.empty()) {
    const auto e = q.pop();
    if (f.current(static_cast<int>(e.index), e.version)) done = e.time_s;
  }
  EXPECT_DOUBLE_EQ(done, 1.5);
}

scenario::Scenario with_calibration(const std::string& name, double compute_comm, bool serial) {
  auto s = validation_scenario(name);
  scenario::CommCalibration c;
  c.profile = "test";
  c.processes = 2;
  for (auto& m : c.ops) m = {100e-6, 0.5e9, compute_comm};
  c.compute_comm_slowdown = compute_comm;
  c.serial_collectives = serial;
  s.cluster.calibration = c;
  return s;
}

TEST(CalibratedSim, CommunicationSlowsWhileItsRankComputes) {
  sim::Simulator sim;
  const auto a = with_calibration("validate-cpu-zero2", 0.0, false);
  const auto b = with_calibration("validate-cpu-zero2", 1.0, false);
  const auto ra = sim.run(plan::build_plan(a), sim::make_cost_models(a));
  const auto rb = sim.run(plan::build_plan(b), sim::make_cost_models(b));
  EXPECT_GT(rb.metrics.comm_s, ra.metrics.comm_s * 1.2);
  EXPECT_GE(rb.metrics.step_time_s, ra.metrics.step_time_s);
}

TEST(CalibratedSim, SerialCollectivesNeverOverlapOnARank) {
  sim::Simulator sim;
  for (bool serial : {false, true}) {
    const auto s = with_calibration("validate-cpu-zero3", 0.0, serial);
    const auto r = sim.run(plan::build_plan(s), sim::make_cost_models(s));
    std::vector<std::pair<double, double>> comm;
    for (const auto& span : r.ranks[0].spans) {
      if (result::is_collective(span.kind)) comm.emplace_back(span.start_s, span.end_s);
    }
    std::sort(comm.begin(), comm.end());
    bool overlap = false;
    for (std::size_t i = 1; i < comm.size(); ++i) overlap |= comm[i].first < comm[i - 1].second;
    EXPECT_EQ(overlap, !serial) << "serial " << serial;
  }
}

}  // namespace
}  // namespace stratagem::test
