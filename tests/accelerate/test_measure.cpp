// export_scenario's measurement (engine/accelerate/measure.hpp): attribution of one forward's
// events to units, and the exported scenarios of DDP, FSDP and pipeline jobs.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/accelerate/measure.hpp"
#include "tests/accelerate/accel_test_util.hpp"

namespace stratagem::test {
namespace {

// Attribution by parameter first use: ops before the first block's first parameter read go to
// the input unit, each block owns what runs from its first read to the next unit's, the root's
// parameters read after the last block start the output unit; blocks come in the order the
// forward ran them; figures are per sample.
TEST(AccelerateMeasure, EventsFallToTheUnitWhoseParametersWereReadLast) {
  using comm::compat::GraphNode;
  using comm::compat::ProfiledEvent;
  auto op = [](std::int64_t seq, double flops) {
    ProfiledEvent e;
    e.kind = ProfiledEvent::Kind::op_start;
    e.sequence_nr = seq;
    e.flops = flops;
    return e;
  };
  auto mem = [](std::int64_t bytes) {
    ProfiledEvent e;
    e.kind = ProfiledEvent::Kind::memory;
    e.bytes = bytes;
    return e;
  };
  const std::vector<ProfiledEvent> events = {
      op(0, 100), mem(50),            // the root's embedding (parameter 0)
      op(1, 200), mem(80), mem(-20),  // block 1, "early" (parameter 1)
      op(2, 40),  mem(30),            // block 0, "late" (parameter 2): declared first, runs second
      op(3, 10),  mem(6)};            // the root's head (parameter 3)
  const std::vector<GraphNode> graph = {{0, 0, {0}}, {1, 0, {1}}, {2, 0, {2}}, {3, 0, {3}}};
  std::vector<std::uint64_t> last;
  const scenario::MeasuredModel m = accelerate::attribute_forward(
      events, graph, {-1, 1, 0, -1}, {10, 20, 30, 40}, {"late", "early"}, 2, &last);
  EXPECT_DOUBLE_EQ(m.input.params, 10);
  EXPECT_DOUBLE_EQ(m.input.forward_flops, 50);
  EXPECT_DOUBLE_EQ(m.input.activation_bytes, 25);
  ASSERT_EQ(m.blocks.size(), 2u);
  EXPECT_EQ(m.blocks[0].name, "early");
  EXPECT_DOUBLE_EQ(m.blocks[0].params, 20);
  EXPECT_DOUBLE_EQ(m.blocks[0].forward_flops, 100);
  EXPECT_DOUBLE_EQ(m.blocks[0].activation_bytes, 30);
  EXPECT_EQ(m.blocks[1].name, "late");
  EXPECT_DOUBLE_EQ(m.blocks[1].forward_flops, 20);
  EXPECT_DOUBLE_EQ(m.output.params, 40);
  EXPECT_DOUBLE_EQ(m.output.forward_flops, 5);
  EXPECT_DOUBLE_EQ(m.output.activation_bytes, 3);
  EXPECT_EQ(last, (std::vector<std::uint64_t>{1, 2}));  // each block's last autograd op
}

// export_scenario measures the model: accel_check's Net is stem Linear(8, 32), three blocks
// (Linear(32, 32), tanh, residual add, LayerNorm(32)) and head Linear(32, 4). Per sample the
// profiler counts 2·8·32 FLOPs in the stem, 2·32·32 + 32 per block (addmm, add) and 2·32·4 in
// the head; a block keeps tanh's output, the sum and the norm's output and statistics (fp32);
// its output, the boundary, is 32 floats.
TEST(Accelerate, ExportMeasuresFlopsAndActivationsPerUnit) {
  TempDir dir;
  // accel_check with `env`, `flags` and `args` + " --export FILE": the exported scenario (an
  // empty object, failing the test, when the job failed).
  auto exported = [&](const std::string& env, const std::string& flags, const std::string& args,
                      const std::string& file) {
    const Job r = launch(env, flags, args + " --export " + (dir / file));
    if (r.code != 0) {
      ADD_FAILURE() << flags << " " << args << "\n" << r.output;
      return nlohmann::json::object();
    }
    std::ifstream in(dir / file);
    return nlohmann::json::parse(in);
  };
  auto simulates = [&](const std::string& file) {
    const std::string sim =
        std::string(STRATAGEM_BINARY) + " sim " + (dir / file) + " > /dev/null 2>&1";
    return std::system(sim.c_str()) == 0;
  };
  const nlohmann::json j = exported("", "--num_processes 2", "--steps 2 --batch 16 --seq 1", "s.json");
  const nlohmann::json& m = j.at("model").at("measured");
  ASSERT_EQ(m.at("blocks").size(), 3u) << j.dump(2);
  EXPECT_EQ(m.at("blocks")[0].at("name"), "blocks.0");
  EXPECT_EQ(m.at("blocks")[2].at("name"), "blocks.2");
  for (const auto& b : m.at("blocks")) {
    EXPECT_EQ(b.at("params").get<double>(), 32 * 32 + 32 + 64);
    EXPECT_NEAR(b.at("forward_flops").get<double>(), 2 * 32 * 32 + 32, 64) << b.dump();
    EXPECT_GE(b.at("activation_bytes").get<double>(), 3 * 128) << b.dump();
    EXPECT_LE(b.at("activation_bytes").get<double>(), 3 * 128 + 64) << b.dump();
  }
  EXPECT_EQ(m.at("input").at("params").get<double>(), 8 * 32 + 32);
  EXPECT_NEAR(m.at("input").at("forward_flops").get<double>(), 2 * 8 * 32, 64);
  EXPECT_EQ(m.at("output").at("params").get<double>(), 32 * 4 + 4);
  EXPECT_NEAR(m.at("output").at("forward_flops").get<double>(), 2 * 32 * 4, 64);
  EXPECT_EQ(m.at("boundary_bytes").get<double>(), 32 * 4);
  EXPECT_EQ(m.at("element_bytes").get<double>(), 4);
  EXPECT_EQ(j.at("strategy").at("micro_batch_size"), 16);
  EXPECT_TRUE(simulates("s.json"));

  // FSDP's units are the blocks (size-based wrap at 1000: each block's Linear(32, 32)).
  const nlohmann::json f = exported("", "--num_processes 2 --use_fsdp --fsdp_min_num_params 1000",
                                    "--steps 2 --batch 16", "f.json");
  ASSERT_EQ(f.at("model").at("measured").at("blocks").size(), 3u) << f.dump(2);
  EXPECT_EQ(f.at("model").at("measured").at("blocks")[1].at("name"), "b2.fc");

  // A pipeline: each stage measures its layers; the export has them all, in order.
  const nlohmann::json p = exported("", "--num_processes 2 --pipeline_stages 2",
                                    "--pipeline 1 --steps 2 --batch 16", "p.json");
  const nlohmann::json& pb = p.at("model").at("measured").at("blocks");
  ASSERT_EQ(pb.size(), 4u) << p.dump(2);  // the Linears at 0, 2, 4, 6 (Tanh has no parameters)
  EXPECT_EQ(pb[1].at("name"), "2");
  EXPECT_NEAR(pb[0].at("forward_flops").get<double>(), 2 * 8 * 32, 64);
  EXPECT_NEAR(pb[2].at("forward_flops").get<double>(), 2 * 32 * 32, 64);
  EXPECT_NEAR(pb[3].at("forward_flops").get<double>(), 2 * 32 * 4, 64);
  EXPECT_EQ(p.at("strategy").at("pp"), 2);
  EXPECT_TRUE(simulates("p.json"));

  // Turned off, the quick form is written.
  const nlohmann::json q =
      exported("STRATAGEM_MEASURE_MODEL=0", "--num_processes 1", "--steps 1", "q.json");
  EXPECT_TRUE(q.at("model").contains("params")) << q.dump(2);
}

}  // namespace
}  // namespace stratagem::test
