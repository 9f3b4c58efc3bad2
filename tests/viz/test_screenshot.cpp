// The window, tested as pictures: the viewer renders known results to PNG under xvfb-run
// and the tests look for the colours the model says it draws.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/scenario/units.hpp"
#include "tests/viz/viz_test_util.hpp"
#include "viz/model/colors.hpp"
#include "viz/model/sim_worker.hpp"
#include "viz/ui/image.hpp"

namespace stratagem::viz {
namespace {

struct PixelRun {
  int x0 = 0, x1 = 0;  ///< [x0, x1)
};

// Horizontal runs of exactly `c` on row y, for x in [from, image width).
std::vector<PixelRun> runs_of(const Image& img, int y, Rgba c, int from = 0) {
  std::vector<PixelRun> out;
  int x = from;
  while (x < img.width) {
    if (img.at(x, y) == c) {
      PixelRun r{x, x};
      while (x < img.width && img.at(x, y) == c) ++x;
      r.x1 = x;
      out.push_back(r);
    } else {
      ++x;
    }
  }
  return out;
}

// Bands of consecutive rows holding `c` somewhere in [from, width): [top, bottom).
std::vector<std::pair<int, int>> bands_of(const Image& img, Rgba c, int from) {
  std::vector<std::pair<int, int>> out;
  bool in = false;
  for (int y = 0; y < img.height; ++y) {
    const bool has = !runs_of(img, y, c, from).empty();
    if (has && !in) out.push_back({y, y});
    if (has) out.back().second = y + 1;
    in = has;
  }
  return out;
}

std::string screenshot(const std::string& dir, const std::string& args, const std::string& name) {
  const std::string png = dir + "/" + name + ".png";
  const auto r = test::run_command("xvfb-run -a " + std::string(STRATAGEM_BINARY) + " view " +
                                   args + " --screenshot " + png);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  return png;
}

TEST(Screenshot, GPipeStageThreeStartsAfterStageZerosThirdForward) {
  if (!test::have_xvfb()) GTEST_SKIP() << "xvfb-run is not installed";
  const std::string dir = test::fresh_dir("gpipe");
  const auto doc = simulate(test::gpipe4_scenario(), "gpipe");
  result::save_result(doc->result(), dir + "/gpipe.json");
  const Image img =
      read_png(screenshot(dir, dir + "/gpipe.json --panel timeline --size 1200x700", "t"));
  ASSERT_EQ(img.width, 1200);
  ASSERT_EQ(img.height, 700);
  const Rgba fwd = kind_color(result::SpanKind::forward);
  // Right of the rank labels: the forward blocks of the four compute lanes, top to bottom.
  const int from = 200;
  const auto bands = bands_of(img, fwd, from);
  ASSERT_EQ(bands.size(), 4u) << "expected one band of forward blocks per stage";
  std::vector<std::vector<PixelRun>> blocks;
  for (const auto& [top, bottom] : bands) {
    EXPECT_GE(bottom - top, 10) << "a lane is too thin to be a block row";
    blocks.push_back(runs_of(img, top + 1, fwd, from));  // above the micro-batch digits
  }
  ASSERT_EQ(blocks[0].size(), 8u) << "stage 0 shows its 8 forward micro-batches apart";
  ASSERT_EQ(blocks[3].size(), 8u);
  // Stage s's micro-batch m cannot start before stage 0's micro-batch m + s.
  EXPECT_GT(blocks[3][0].x0, blocks[0][2].x0);
  EXPECT_GT(blocks[3][0].x0, blocks[0][2].x1);
  for (int s = 1; s < 4; ++s) EXPECT_GT(blocks[s][0].x0, blocks[s - 1][0].x0);
  // The result agrees with the picture (in time, not pixels).
  const auto& spans0 = doc->result().ranks[0].spans;
  const auto& spans3 = doc->result().ranks[3].spans;
  std::vector<double> f0, f3;
  for (const auto& s : spans0)
    if (s.kind == result::SpanKind::forward) f0.push_back(s.start_s);
  for (const auto& s : spans3)
    if (s.kind == result::SpanKind::forward) f3.push_back(s.start_s);
  ASSERT_GE(f0.size(), 3u);
  ASSERT_FALSE(f3.empty());
  EXPECT_GT(f3[0], f0[2]);
  std::filesystem::remove_all(dir);
}

TEST(Screenshot, AnOutOfMemoryRanksBarIsRed) {
  if (!test::have_xvfb()) GTEST_SKIP() << "xvfb-run is not installed";
  const std::string dir = test::fresh_dir("oom");
  // Size the GPU between the last stage's peak (the largest, its head holds the logits) and
  // the others', so that only rank 3 runs out of memory.
  const auto fits = simulate(test::gpipe4_scenario(), "fits");
  double others = 0, last = 0;
  for (const auto& r : fits->result().ranks) {
    (r.rank == 3 ? last : others) = std::max(r.rank == 3 ? last : others, r.peak_memory_bytes);
  }
  ASSERT_GT(last, others) << "the sizing below assumes the last stage peaks highest";
  const double gib = (others + last) / 2 / units::kGiB;
  const auto doc = simulate(test::gpipe4_scenario(gib), "oom");
  const auto& ranks = doc->result().ranks;
  ASSERT_TRUE(ranks[3].oom);
  for (int r = 0; r < 3; ++r) ASSERT_FALSE(ranks[r].oom);
  result::save_result(doc->result(), dir + "/oom.json");
  result::save_result(fits->result(), dir + "/fits.json");

  for (const bool oom : {true, false}) {
    const std::string file = dir + (oom ? "/oom.json" : "/fits.json");
    const Image img =
        read_png(screenshot(dir, file + " --panel memory --size 1200x700", oom ? "m" : "f"));
    // The bars stand on the baseline: the lowest row holding the bottom class (params).
    const Rgba params = tensor_class_color(plan::TensorClass::params);
    int base_y = -1;
    for (int y = img.height - 1; y > img.height / 3 && base_y < 0; --y) {
      if (runs_of(img, y, params).size() == 4) base_y = y;
    }
    ASSERT_GE(base_y, 0) << "four bars not found";
    const auto bars = runs_of(img, base_y, params);
    // Red pixels anywhere above within each bar's columns.
    std::vector<int> red(4, 0);
    for (int y = 0; y < base_y; ++y) {
      for (int b = 0; b < 4; ++b) {
        for (int x = bars[b].x0; x < bars[b].x1; ++x) red[b] += img.at(x, y) == palette::kOom;
      }
    }
    for (int b = 0; b < 3; ++b) EXPECT_EQ(red[b], 0) << "bar " << b;
    if (oom) {
      EXPECT_GT(red[3], 0) << "rank 3 runs out of memory: its bar must be red";
    } else {
      EXPECT_EQ(red[3], 0);
    }
  }
  std::filesystem::remove_all(dir);
}

TEST(Screenshot, AllPanelsWithAScenarioAndItsStrategies) {
  if (!test::have_xvfb()) GTEST_SKIP() << "xvfb-run is not installed";
  const std::string dir = test::fresh_dir("all");
  const std::string scenario = dir + "/gpipe4.json";
  scenario::Scenario s = test::gpipe4_scenario();
  std::ofstream(scenario) << scenario::to_json(s).dump();
  const Image img = read_png(screenshot(
      dir, "--scenario " + scenario + " --strategies gpipe,1f1b --pair --size 1400x800", "all"));
  // Forward and backward blocks of both timelines are on screen.
  EXPECT_GE(bands_of(img, kind_color(result::SpanKind::forward), 200).size(), 2u);
  EXPECT_FALSE(bands_of(img, kind_color(result::SpanKind::backward), 200).empty());
  std::filesystem::remove_all(dir);
}

TEST(Screenshot, TensorParallelRowsShowTheirTpLaneInItsOwnColours) {
  if (!test::have_xvfb()) GTEST_SKIP() << "xvfb-run is not installed";
  const std::string dir = test::fresh_dir("tp");
  // dp 2 × tp 2 × pp 2 with sequence parallelism, every rank built: 8 rows in 4 TP groups.
  const result::RunResult r = test::simulate_unfolded(test::tp_scenario(2, 2, 2, true));
  result::save_result(r, dir + "/tp.json");
  // Zoom on rank 0's first backward, so that its TP collectives are blocks, not slivers.
  double b0 = -1, b1 = -1;
  for (const auto& s : r.ranks[0].spans) {
    if (s.kind == result::SpanKind::backward && b0 < 0) b0 = s.start_s;
    if (s.kind == result::SpanKind::backward) b1 = s.end_s;
    if (b0 >= 0 && s.kind != result::SpanKind::backward && s.stream == plan::Stream::compute) break;
  }
  ASSERT_GT(b1, b0);
  char zoom[96];
  std::snprintf(zoom, sizeof zoom, "%.9fs:%.9fs", b0, b0 + (b1 - b0) * 0.5);
  const Image img = read_png(
      screenshot(dir, dir + "/tp.json --panel timeline --size 1400x1000 --zoom " + zoom, "tp"));
  // The gutter is wider than without tensor parallelism (the rows carry their coordinates),
  // so the lanes start further right; look right of it.
  const int from = 300;
  const Rgba ag = tp_kind_color(result::SpanKind::all_gather);
  const Rgba rs = tp_kind_color(result::SpanKind::reduce_scatter);
  const Rgba bwd = kind_color(result::SpanKind::backward);
  const auto bwd_bands = bands_of(img, bwd, from);
  ASSERT_FALSE(bwd_bands.empty());
  // Below the legend (whose tp swatches lie right of the gutter too).
  auto below_legend = [&](std::vector<std::pair<int, int>> bands) {
    std::erase_if(bands, [&](const auto& b) { return b.first < bwd_bands[0].first; });
    return bands;
  };
  const auto ag_bands = below_legend(bands_of(img, ag, from));
  const auto rs_bands = below_legend(bands_of(img, rs, from));
  // Rows on screen: one compute band and one tp band each, the tp lane below the compute lane.
  ASSERT_GE(bwd_bands.size(), 4u);
  ASSERT_GE(ag_bands.size(), 4u) << "tp all-gathers in their own colour, a band per row";
  ASSERT_GE(rs_bands.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_GE(ag_bands[i].second - ag_bands[i].first, 10) << "a lane, not a line";
    EXPECT_GT(ag_bands[i].first, bwd_bands[i].second) << "the tp lane is below the compute lane";
    EXPECT_EQ(ag_bands[i], rs_bands[i]) << "all-gathers and reduce-scatters share the tp lane";
    if (i + 1 < bwd_bands.size()) {
      EXPECT_LT(ag_bands[i].second, bwd_bands[i + 1].first) << "and above the next row's";
    }
  }
  // The tp blocks are blocks: wider than a few pixels at this zoom.
  const auto blocks = runs_of(img, ag_bands[0].first + 2, ag, from);
  ASSERT_FALSE(blocks.empty());
  EXPECT_GE(blocks[0].x1 - blocks[0].x0, 4);
  // Without tensor parallelism, no tp colour anywhere.
  const auto g = simulate(test::gpipe4_scenario(), "gpipe");
  result::save_result(g->result(), dir + "/g.json");
  const Image plain = read_png(screenshot(dir, dir + "/g.json --panel timeline", "g"));
  EXPECT_TRUE(bands_of(plain, ag, 0).empty());
  EXPECT_TRUE(bands_of(plain, tp_kind_color(result::SpanKind::all_reduce), 0).empty());
  std::filesystem::remove_all(dir);
}

TEST(ViewCommand, RejectsBadInputWithExitCode2) {
  const std::string bin = STRATAGEM_BINARY;
  auto r = test::run_command(bin + " view");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("give result files"), std::string::npos) << r.out;
  r = test::run_command(bin + " view /no/such/result.json --screenshot /tmp/x.png");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  r = test::run_command(bin + " view --scenario default --panel nope --screenshot /tmp/x.png");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("--panel"), std::string::npos) << r.out;
  r = test::run_command(bin + " view --scenario default --what-if pp=3 --screenshot /tmp/x.png");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("strategy."), std::string::npos) << r.out;
  r = test::run_command(bin + " view --scenario default --size 12 --screenshot /tmp/x.png");
  EXPECT_EQ(r.exit_code, 2) << r.out;
}

}  // namespace
}  // namespace stratagem::viz

namespace stratagem::viz {
namespace {

// "label: 12.5 ms ..." -> seconds of the first duration after `label`.
double duration_after(const std::string& out, const std::string& label) {
  const auto at = out.find(label);
  if (at == std::string::npos) return -1;
  std::istringstream in(out.substr(at + label.size()));
  double v = 0;
  std::string unit;
  in >> v >> unit;
  const double scale = unit == "s"    ? 1
                       : unit == "ms" ? 1e-3
                       : unit == "µs" ? 1e-6
                       : unit == "ns" ? 1e-9
                                      : 1;
  return v * scale;
}

TEST(Screenshot, ScriptedMouseZoomsSelectsAndPicks) {
  if (!test::have_xvfb()) GTEST_SKIP() << "xvfb-run is not installed";
  const std::string dir = test::fresh_dir("input");
  const auto doc = simulate(test::gpipe4_scenario(), "gpipe");
  result::save_result(doc->result(), dir + "/gpipe.json");
  const std::string base = "xvfb-run -a " + std::string(STRATAGEM_BINARY) + " view " + dir +
                           "/gpipe.json --panel timeline --size 1200x700 --screenshot " + dir +
                           "/s.png";
  // Unzoomed: the whole step.
  auto r = test::run_command(base);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const double step = doc->end_s();
  const double full = duration_after(r.out, " to ") - duration_after(r.out, "time range:");
  // The range is printed to 3 significant digits: at least the step, within that rounding.
  EXPECT_GT(full, step * (1 - 5e-3));
  // Two wheel notches zoom in by 1.25² around the mouse.
  r = test::run_command(base + " --input 'wheel 600,300 2'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const double zoomed = duration_after(r.out, " to ") - duration_after(r.out, "time range:");
  EXPECT_NEAR(zoomed, full / 1.5625, full * 0.01);
  // A right-drag of 300 px selects 300 px worth of time.
  r = test::run_command(base + " --input 'rdrag 400,300 700,300'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto over = r.out.find(" over ");
  ASSERT_NE(over, std::string::npos) << r.out;
  const double width_px = std::stod(r.out.substr(over + 6));
  EXPECT_NEAR(duration_after(r.out, "selection:"), 300 * full / width_px, full / width_px * 3);
  // A click on stage 3's first forward block selects it; its dependencies are listed.
  const Image img = read_png(dir + "/s.png");
  const auto bands = bands_of(img, kind_color(result::SpanKind::forward), 200);
  ASSERT_EQ(bands.size(), 4u);
  const auto blocks = runs_of(img, bands[3].first + 1, kind_color(result::SpanKind::forward), 200);
  ASSERT_FALSE(blocks.empty());
  const int cx = (blocks[0].x0 + blocks[0].x1) / 2, cy = (bands[3].first + bands[3].second) / 2;
  r = test::run_command(base + " --input 'click " + std::to_string(cx) + "," + std::to_string(cy) +
                        "'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("selected: op"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("no dependencies"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("waits for 0 ops"), std::string::npos)
      << "stage 3's forward waits for its recv";
  r = test::run_command(base + " --input 'drag 600,300'");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stratagem::viz

namespace stratagem::viz {
namespace {

TEST(ViewCommand, BenchFramesReportsFramesPerSecond) {
  if (!test::have_xvfb()) GTEST_SKIP() << "xvfb-run is not installed";
  const std::string dir = test::fresh_dir("bench");
  result::save_result(simulate(test::gpipe4_scenario(), "gpipe")->result(), dir + "/g.json");
  const auto r = test::run_command("xvfb-run -a " + std::string(STRATAGEM_BINARY) + " view " + dir +
                                   "/g.json --bench-frames 20 --size 800x600");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // A measurement, not a pass mark: the rate depends on the machine (llvmpipe under Xvfb).
  EXPECT_NE(r.out.find("bench: 20 frames in "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" frames/s "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("4 ranks"), std::string::npos) << r.out;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stratagem::viz
