// commbench over the in-process backend (every op and dtype checks clean, busbw math, a wrong
// contribution is counted), and `stratagem commbench` / `stratagem calibrate --quick` as
// processes over Gloo.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/comm/inproc_communicator.hpp"
#include "engine/measure/calibrate.hpp"
#include "engine/measure/commbench.hpp"
#include "engine/scenario/profile.hpp"
#include "tests/runtime/cli_process.hpp"
#include "tests/runtime/test_comm_util.hpp"

namespace stratagem::test {
namespace {

namespace fs = std::filesystem;
using scenario::CommOp;

// Runs the benchmark on an in-process world of n ranks; returns rank 0's rows.
std::vector<measure::CommBenchRow> bench(int n, const measure::CommBenchOptions& o) {
  auto comms = comm::make_inproc_world(n);
  std::vector<std::vector<measure::CommBenchRow>> rows(static_cast<std::size_t>(n));
  const auto errors = run_ranks(n, [&](int r) { rows[r] = measure::run_commbench(*comms[r], o); });
  EXPECT_TRUE(errors.empty()) << joined(errors);
  // Every rank reports the same (reduced) numbers.
  for (int r = 1; r < n; ++r) {
    for (std::size_t i = 0; i < rows[0].size(); ++i) {
      EXPECT_EQ(rows[r][i].time_s, rows[0][i].time_s);
      EXPECT_EQ(rows[r][i].wrong, rows[0][i].wrong);
    }
  }
  return rows[0];
}

measure::CommBenchOptions options(CommOp op, at::ScalarType dtype = at::kFloat) {
  measure::CommBenchOptions o;
  o.op = op;
  o.dtype = dtype;
  o.sizes = {8, 1000, 4096, 65536};
  o.warmup = 1;
  o.iters = 3;
  return o;
}

TEST(CommBench, EveryOpAndDtypeChecksClean) {
  for (int i = 0; i < scenario::kCommOpCount; ++i) {
    for (auto dtype : {at::kFloat, at::kBFloat16, at::kHalf, at::kDouble}) {
      const auto o = options(static_cast<CommOp>(i), dtype);
      const int n = 3;
      const auto rows = bench(n, o);
      ASSERT_EQ(rows.size(), o.sizes.size());
      for (std::size_t k = 0; k < rows.size(); ++k) {
        const auto& r = rows[k];
        const std::string what = std::string(scenario::to_string(o.op)) + " " +
                                 measure::bench_dtype_name(dtype) + " " + std::to_string(r.bytes);
        EXPECT_EQ(r.wrong, 0) << what;
        EXPECT_EQ(r.bytes, o.sizes[k]);
        EXPECT_EQ(r.count, scenario::element_count(o.op, r.bytes,
                                                   static_cast<int>(c10::elementSize(dtype)), n));
        EXPECT_EQ(r.iters, 3);
        EXPECT_GT(r.time_s, 0) << what;
        EXPECT_DOUBLE_EQ(r.algbw, r.bytes / r.time_s);
        EXPECT_DOUBLE_EQ(r.busbw, r.algbw * scenario::bus_factor(o.op, n));
      }
    }
  }
}

TEST(CommBench, CountsAWrongContribution) {
  // Rank 1's first element is off by one: every rank's sum is wrong in one element
  // (all_reduce: 3), one block of every gather (3), rank 0's shard (1), rank 2's receive (1).
  const std::vector<std::pair<CommOp, std::int64_t>> expected = {{CommOp::all_reduce, 3},
                                                                 {CommOp::all_gather, 3},
                                                                 {CommOp::reduce_scatter, 1},
                                                                 {CommOp::sendrecv, 1}};
  for (const auto& [op, wrong] : expected) {
    auto o = options(op);
    o.fault_rank = 1;
    for (const auto& r : bench(3, o)) EXPECT_EQ(r.wrong, wrong) << scenario::to_string(op);
  }
  // A broadcast from a wrong root is wrong everywhere; a wrong non-root is overwritten.
  auto b = options(CommOp::broadcast);
  b.fault_rank = 0;
  for (const auto& r : bench(3, b)) EXPECT_EQ(r.wrong, 3);
  b.fault_rank = 2;
  for (const auto& r : bench(3, b)) EXPECT_EQ(r.wrong, 0);
}

TEST(CommBench, NoCheckAndBudgetedIterations) {
  auto o = options(CommOp::all_reduce);
  o.check = false;
  o.budget_s = 1e-9;  // tiny budget: the minimum of 2 iterations
  o.iters = 50;
  for (const auto& r : bench(2, o)) {
    EXPECT_EQ(r.wrong, -1);
    EXPECT_EQ(r.iters, 2);
  }
}

TEST(CommBench, TableLooksLikeNcclTests) {
  auto o = options(CommOp::all_reduce);
  const std::string header = measure::commbench_header(o, 4);
  EXPECT_NE(header.find("size         count      type   redop    root      time   algbw   busbw "
                        " #wrong"),
            std::string::npos)
      << header;
  EXPECT_NE(header.find("busbw factor 1.5"), std::string::npos) << header;
  measure::CommBenchRow row{1048576, 262144, 20, 1e-3, 1048576 / 1e-3, 1.5 * 1048576 / 1e-3, 0};
  const std::string text = measure::commbench_row_text(row, o);
  EXPECT_EQ(
      text,
      "     1048576        262144     float     sum      -1   1000.00    1.05    1.57        0");
  row.wrong = -1;
  EXPECT_NE(measure::commbench_row_text(row, o).find("N/A"), std::string::npos);
  const auto j = measure::commbench_json(o, 4, {row});
  EXPECT_EQ(j["op"], "all_reduce");
  EXPECT_DOUBLE_EQ(j["rows"][0]["busbw_GBps"].get<double>(), 1.5 * 1048576 / 1e-3 / 1e9);
  EXPECT_NE(measure::commbench_footer({row}).find("Avg bus bandwidth"), std::string::npos);
}

TEST(CommBench, ModelGemmShapes) {
  const auto s = scenario::load_scenario("default");  // GPT-2 XL: h 1600, ffn 6400
  const auto g = measure::model_gemms(s);
  const std::int64_t tokens = std::int64_t{s.strategy.micro_batch_size} * s.training.seq_len;
  ASSERT_EQ(g.size(), 4u);
  for (const auto& shape : g) EXPECT_EQ(shape.m, tokens);
  EXPECT_EQ(g[0].n, 1600);  // projection h × h
  EXPECT_EQ(g[0].k, 1600);
}

// ---- as processes ----------------------------------------------------------------------

TEST(CommBenchCli, TwoGlooProcesses) {
  const auto dir = work_dir("commbench");
  const auto r = stratagem(
      "commbench --backend gloo --num_processes 2 --op all_reduce,sendrecv "
      "-b 1K -e 64K -f 4 -w 1 -n 3 --json " +
          (dir / "b.json").string(),
      dir);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("#wrong"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Out of bounds values : 0 OK"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(slurp(dir / "b.json"));
  EXPECT_EQ(j["format"], "stratagem-commbench");
  EXPECT_EQ(j["processes"], 2);
  ASSERT_EQ(j["ops"].size(), 2u);
  for (const auto& op : j["ops"]) {
    ASSERT_EQ(op["rows"].size(), 4u);  // 1K, 4K, 16K, 64K
    EXPECT_EQ(op["wrong"], 0);
    for (const auto& row : op["rows"]) EXPECT_GT(row["busbw_GBps"].get<double>(), 0);
  }
  EXPECT_EQ(j["ops"][0]["bus_factor"], 1.0);  // all_reduce on 2 ranks: 2(n−1)/n

  const auto bad = stratagem(
      "commbench --backend gloo --num_processes 2 -b 1K -e 4K -w 0 -n 1 "
      "--inject_wrong 1",
      dir);
  EXPECT_EQ(bad.exit_code, 1) << bad.out << bad.err;
  EXPECT_NE(bad.out.find("FAILED"), std::string::npos) << bad.out;
  const auto typo = stratagem("commbench --op alltoall", dir);
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.err.find("--op"), std::string::npos) << typo.err;
}

TEST(CalibrateCli, QuickWritesAValidProfile) {
  const auto dir = work_dir("calibrate");
  const auto file = (dir / "p.json").string();
  const auto r = stratagem("calibrate --num_processes 2 --quick -o " + file, dir);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto p = scenario::load_profile(file);
  EXPECT_EQ(p.machine.processes, 2);
  EXPECT_EQ(p.machine.backend, "gloo");
  EXPECT_TRUE(p.machine.quick);
  EXPECT_FALSE(p.machine.torch_version.empty());
  for (auto t : {scenario::DType::fp32, scenario::DType::bf16}) {
    ASSERT_TRUE(p.device.matmul.count(t));
    EXPECT_GT(p.device.matmul.at(t).peak, 1e8);  // any CPU does 0.1 GFLOP/s
    EXPECT_EQ(p.device.matmul.at(t).points.size(), 3u);
  }
  EXPECT_GT(p.device.elementwise.bandwidth, 1e8);
  ASSERT_TRUE(p.network);
  EXPECT_EQ(p.network->processes, 2);
  for (const auto& [op, c] : p.network->ops) {
    EXPECT_GT(c.bus_bandwidth, 1e6) << scenario::to_string(op);
    EXPECT_EQ(c.points.size(), 3u) << scenario::to_string(op);
  }
  EXPECT_GE(p.overlap.comm_compute_slowdown, 0);
  EXPECT_GT(p.overlap.compute_alone_s, 0);
  const auto sim = stratagem("sim default --profile " + file, dir);
  EXPECT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_NE(sim.out.find("profile cpu x2 (gloo)"), std::string::npos) << sim.out;
}

}  // namespace
}  // namespace stratagem::test
