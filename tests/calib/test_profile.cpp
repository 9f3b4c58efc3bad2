// Hardware profiles: round trip, validation errors that name the field, applying one to a
// scenario, the calibrated network's closed forms, and `sim/compare/search --profile`.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "engine/plan/builder.hpp"
#include "engine/scenario/error.hpp"
#include "engine/scenario/profile.hpp"
#include "engine/scenario/scenario.hpp"
#include "sim/cost_models.hpp"
#include "sim/simulator.hpp"
#include "tests/cli/cli_util.hpp"

namespace stratagem::test {
namespace {

using scenario::CommOp;
using scenario::DType;

// A made-up 2-process CPU profile with round numbers.
scenario::HardwareProfile sample_profile() {
  scenario::HardwareProfile p;
  p.name = "test-cpu x2";
  p.machine.cpu_model = "Test CPU";
  p.machine.nproc = 2;
  p.machine.processes = 2;
  p.machine.backend = "gloo";
  p.machine.device = "cpu";
  p.machine.date = "2026-11-30T00:00:00Z";
  p.device.memory_bytes = 8.0 * (1 << 30);
  p.device.kernel_launch_s = 2e-6;
  p.device.matmul[DType::fp32] = {50e9, 200, 0.05, {{256, 256, 256, 28e9}}};
  p.device.matmul[DType::bf16] = {200e9, 400, 0.1, {}};
  p.device.elementwise = {10e9, 2e-6, 0.2, {{1024, 2.1e-6}}};
  scenario::NetworkProfile n;
  n.backend = "gloo";
  n.processes = 2;
  n.ops[CommOp::all_reduce] = {100e-6, 1e9, 0.05, {{1 << 20, 1.1e-3}}};
  n.ops[CommOp::reduce_scatter] = {50e-6, 2e9, 0, {}};
  n.ops[CommOp::all_gather] = {60e-6, 2e9, 0, {}};
  n.ops[CommOp::broadcast] = {70e-6, 1e9, 0, {}};
  n.ops[CommOp::sendrecv] = {20e-6, 4e9, 0, {}};
  p.network = n;
  p.overlap.comm_compute_slowdown = 0.5;
  p.overlap.compute_alone_s = 1e-3;
  p.overlap.compute_with_comm_s = 1.5e-3;
  return p;
}

std::string expect_spec_error(const nlohmann::json& doc) {
  try {
    scenario::parse_profile(doc, "p.json");
  } catch (const SpecError& e) {
    return e.what();
  }
  ADD_FAILURE() << "accepted: " << doc.dump();
  return "";
}

TEST(Profile, RoundTrip) {
  const auto p = sample_profile();
  const nlohmann::json j = scenario::to_json(p);
  EXPECT_EQ(j["format"], "stratagem-profile");
  EXPECT_EQ(j["version"], 1);
  const auto q = scenario::parse_profile(j, "mem");
  EXPECT_EQ(scenario::to_json(q), j);
  EXPECT_EQ(q.name, p.name);
  EXPECT_DOUBLE_EQ(q.device.matmul.at(DType::bf16).peak, 200e9);
  EXPECT_DOUBLE_EQ(q.device.matmul.at(DType::fp32).points.at(0).flops_per_s, 28e9);
  ASSERT_TRUE(q.network);
  EXPECT_DOUBLE_EQ(q.network->ops.at(CommOp::all_reduce).alpha_s, 100e-6);
  EXPECT_DOUBLE_EQ(q.network->ops.at(CommOp::sendrecv).bus_bandwidth, 4e9);
  EXPECT_DOUBLE_EQ(q.overlap.comm_compute_slowdown, 0.5);

  const std::string dir = temp_dir("profile-roundtrip");
  scenario::save_profile(p, dir + "/p.json");
  EXPECT_EQ(scenario::to_json(scenario::load_profile(dir + "/p.json")), j);
}

TEST(Profile, ErrorsNameTheField) {
  const nlohmann::json good = scenario::to_json(sample_profile());
  auto without = [&](const nlohmann::json::json_pointer& ptr) {
    nlohmann::json j = good;
    j[ptr.parent_pointer()].erase(ptr.back());
    return j;
  };
  EXPECT_NE(expect_spec_error(without("/device/matmul/fp32/peak_tflops"_json_pointer))
                .find("p.json: device.matmul.fp32.peak_tflops: missing required key"),
            std::string::npos);
  EXPECT_NE(expect_spec_error(without("/network/sendrecv"_json_pointer))
                .find("network.sendrecv: missing required key"),
            std::string::npos);
  EXPECT_NE(
      expect_spec_error(without("/device/elementwise"_json_pointer)).find("device.elementwise"),
      std::string::npos);
  nlohmann::json j = good;
  j["network"]["all_reduce"]["busbw_GBps"] = -1;
  EXPECT_NE(expect_spec_error(j).find("network.all_reduce.busbw_GBps: must be in"),
            std::string::npos);
  j = good;
  j["device"]["matmul"]["fp32"]["peak_tflop"] = 1;  // misspelt extra key
  EXPECT_NE(expect_spec_error(j).find("device.matmul.fp32.peak_tflop"), std::string::npos);
  j = good;
  j["version"] = 2;
  EXPECT_NE(expect_spec_error(j).find("newer"), std::string::npos);
  j = good;
  j["format"] = "stratagem-result";
  EXPECT_NE(expect_spec_error(j).find("not a hardware profile"), std::string::npos);
}

TEST(Profile, OneProcessProfileHasNoNetwork) {
  auto p = sample_profile();
  p.network.reset();
  const auto q = scenario::parse_profile(scenario::to_json(p), "");
  EXPECT_FALSE(q.network);
  EXPECT_FALSE(scenario::profile_calibration(q));
}

TEST(Profile, BecomesTheScenariosHardware) {
  auto s = scenario::load_scenario("default");
  const auto world = s.cluster.world_size();
  scenario::apply_profile(s, sample_profile());
  const auto& g = s.cluster.gpu;
  EXPECT_EQ(s.cluster.world_size(), world);
  EXPECT_EQ(g.name, "test-cpu x2");
  EXPECT_DOUBLE_EQ(g.peak(DType::fp32), 50e9);
  EXPECT_DOUBLE_EQ(g.peak(DType::bf16), 200e9);
  EXPECT_DOUBLE_EQ(g.peak(DType::fp16), 50e9);  // not measured: fp32's
  EXPECT_DOUBLE_EQ(g.efficiency(DType::bf16).half_dim, 400);
  EXPECT_DOUBLE_EQ(g.efficiency(DType::fp32).at(200), 0.5);
  EXPECT_DOUBLE_EQ(g.hbm_bandwidth, 10e9);
  EXPECT_DOUBLE_EQ(g.kernel_launch_s, 2e-6);
  EXPECT_DOUBLE_EQ(g.memory_bytes, 8.0 * (1 << 30));
  ASSERT_TRUE(s.cluster.calibration);
  EXPECT_DOUBLE_EQ(s.cluster.intra_node.bandwidth, 4e9);
  EXPECT_DOUBLE_EQ(s.cluster.intra_node.latency, 20e-6);
  // The scenario JSON carries the calibration and parses back to the same numbers.
  const auto again = scenario::parse_scenario(scenario::to_json(s), "again");
  ASSERT_TRUE(again.cluster.calibration);
  EXPECT_EQ(scenario::to_json(again), scenario::to_json(s));
  const auto models = sim::make_cost_models(s);
  EXPECT_EQ(models.profile, "profile test-cpu x2");
  EXPECT_DOUBLE_EQ(models.comm_compute_slowdown, 0.5);
  sim::CostOptions o;
  o.comm_compute_slowdown = 0.0;
  EXPECT_EQ(sim::make_cost_models(s, o).comm_compute_slowdown, 0.0);
}

TEST(Profile, MeasuredMatmulPointsBecomeTheEfficiencyTable) {
  auto p = sample_profile();
  // A CPU-like curve: fast at 64 (in cache), slower at 128, best at 1024.
  p.device.matmul[DType::fp32].points = {{64, 64, 64, 40e9},
                                         {128, 128, 128, 20e9},
                                         {1024, 1024, 1024, 50e9},
                                         {128, 512, 128, 30e9}};  // same d = 128: averaged
  const auto curve = scenario::matmul_curve(p.device.matmul[DType::fp32]);
  ASSERT_EQ(curve.table.size(), 3u);
  EXPECT_DOUBLE_EQ(curve.at(64), 0.8);
  EXPECT_DOUBLE_EQ(curve.at(128), 0.5);
  EXPECT_DOUBLE_EQ(curve.at(16), 0.8);                          // held below the first point
  EXPECT_DOUBLE_EQ(curve.at(4096), 1.0);                        // and above the last
  EXPECT_NEAR(curve.at(std::sqrt(64.0 * 128.0)), 0.65, 1e-12);  // halfway in log d
  EXPECT_NEAR(curve.at(std::pow(2.0, 7 + 3.0 * 2 / 3)), 0.5 + 0.5 * 2 / 3, 1e-12);
  // The scenario's GPU carries it, and it survives the scenario's JSON round trip.
  auto s = scenario::load_scenario("default");
  scenario::apply_profile(s, p);
  EXPECT_DOUBLE_EQ(s.cluster.gpu.efficiency(DType::fp32).at(128), 0.5);
  EXPECT_DOUBLE_EQ(s.cluster.gpu.efficiency(DType::bf16).at(200), 200.0 / 600);  // no points
  const auto again = scenario::parse_scenario(scenario::to_json(s), "again");
  EXPECT_EQ(again.cluster.gpu.efficiency(DType::fp32).table, curve.table);
  // A bad table names itself.
  auto j = scenario::to_json(s);
  j["cluster"]["gpu"]["matmul_efficiency_by_dtype"]["fp32"]["table"] = {{128, 0.5}, {64, 0.8}};
  try {
    scenario::parse_scenario(j, "bad");
    FAIL() << "decreasing table accepted";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.path(), "cluster.gpu.matmul_efficiency_by_dtype.fp32.table[1]");
  }
}

TEST(Profile, CalibratedNetworkClosedForms) {
  auto s = scenario::load_scenario("default");
  scenario::apply_profile(s, sample_profile());
  const auto models = sim::make_cost_models(s);
  const auto& net = *models.network;
  const double S = 1e6;
  // At the measured size (2 ranks): α + bus_factor · S / busbw exactly.
  auto total = [&](plan::CollectiveKind k, int n) {
    return net.collective(k, {n, 1, n}, S).total_s();
  };
  EXPECT_DOUBLE_EQ(total(plan::CollectiveKind::all_reduce, 2), 100e-6 + 1.0 * S / 1e9);
  EXPECT_DOUBLE_EQ(total(plan::CollectiveKind::reduce_scatter, 2), 50e-6 + 0.5 * S / 2e9);
  EXPECT_DOUBLE_EQ(total(plan::CollectiveKind::all_gather, 2), 60e-6 + 0.5 * S / 2e9);
  EXPECT_DOUBLE_EQ(total(plan::CollectiveKind::broadcast, 2), 70e-6 + S / 1e9);
  // Four ranks: α scales with the ring steps (6 vs 2, 3 vs 1), β with the bus factor.
  EXPECT_DOUBLE_EQ(total(plan::CollectiveKind::all_reduce, 4), 3 * 100e-6 + 1.5 * S / 1e9);
  EXPECT_DOUBLE_EQ(total(plan::CollectiveKind::reduce_scatter, 4), 3 * 50e-6 + 0.75 * S / 2e9);
  EXPECT_DOUBLE_EQ(net.p2p(true, S).total_s(), 20e-6 + S / 4e9);
  EXPECT_EQ(net.collective(plan::CollectiveKind::all_reduce, {1, 1, 1}, S).count, 0);
}

TEST(Profile, ChangesSimulatedStepDeterministically) {
  const auto base = scenario::load_scenario("default");
  auto profiled = base;
  scenario::apply_profile(profiled, sample_profile());
  sim::Simulator sim;
  const auto a = sim.run(plan::build_plan(base), sim::make_cost_models(base));
  const auto b = sim.run(plan::build_plan(profiled), sim::make_cost_models(profiled));
  const auto c = sim.run(plan::build_plan(profiled), sim::make_cost_models(profiled));
  EXPECT_GT(b.metrics.step_time_s, 100 * a.metrics.step_time_s);  // a CPU, not an A100
  EXPECT_EQ(b.metrics.step_time_s, c.metrics.step_time_s);
  EXPECT_EQ(b.hardware, "profile test-cpu x2");
  // Faster collectives make the step no slower.
  auto faster = sample_profile();
  for (auto& [op, m] : faster.network->ops) m.bus_bandwidth *= 10;
  auto quick = base;
  scenario::apply_profile(quick, faster);
  const auto d = sim.run(plan::build_plan(quick), sim::make_cost_models(quick));
  EXPECT_LE(d.metrics.step_time_s, b.metrics.step_time_s);
  EXPECT_LT(d.metrics.exposed_comm_s, b.metrics.exposed_comm_s);
}

TEST(ProfileCli, SimCompareSearchAcceptIt) {
  const std::string dir = temp_dir("profile-cli");
  const std::string file = dir + "/p.json";
  scenario::save_profile(sample_profile(), file);
  const auto with = run_cli("sim default --json --profile " + file);
  ASSERT_EQ(with.exit_code, 0) << with.err;
  const auto again = run_cli("sim default --json --profile " + file);
  const auto plain = run_cli("sim default --json");
  const auto j1 = nlohmann::json::parse(with.out), j2 = nlohmann::json::parse(again.out),
             j0 = nlohmann::json::parse(plain.out);
  EXPECT_EQ(j1["step_time_s"], j2["step_time_s"]);
  EXPECT_NE(j1["step_time_s"], j0["step_time_s"]);
  EXPECT_EQ(j1["hardware"], "profile test-cpu x2");
  // The flag still overrides the profile's slow-down.
  const auto no_slow = run_cli("sim default --json --comm-compute-slowdown 0 --profile " + file);
  ASSERT_EQ(no_slow.exit_code, 0) << no_slow.err;
  EXPECT_LE(nlohmann::json::parse(no_slow.out)["step_time_s"].get<double>(),
            j1["step_time_s"].get<double>());

  const auto cmp = run_cli("compare default --strategies ddp,zero3 --json --profile " + file);
  ASSERT_EQ(cmp.exit_code, 0) << cmp.err;
  EXPECT_EQ(nlohmann::json::parse(cmp.out)["hardware"], "profile test-cpu x2");

  const auto search = run_cli(
      "search --model gpt2 --global_batch 8 --seq_len 128 --quiet --json "
      "--top 3 --profile " +
      file);
  ASSERT_EQ(search.exit_code, 0) << search.err;
  const auto sj = nlohmann::json::parse(search.out);
  EXPECT_EQ(sj["gpus"], 2);  // the profile's processes
  EXPECT_GT(sj["simulated"].get<int>(), 0);
}

TEST(ProfileCli, BadProfileExitsTwoNamingTheField) {
  const std::string dir = temp_dir("profile-bad");
  auto j = scenario::to_json(sample_profile());
  j["device"].erase("kernel_launch_us");
  write_file(dir + "/bad.json", j.dump());
  const auto r = run_cli("sim default --profile " + dir + "/bad.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("device.kernel_launch_us"), std::string::npos) << r.err;
  const auto missing = run_cli("compare default --profile " + dir + "/none.json");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("none.json"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace stratagem::test
