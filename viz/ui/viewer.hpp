#pragma once
// `stratagem view`: opens the viewer window on results and/or a scenario, or renders one
// frame to a PNG without interaction (--screenshot, works under xvfb-run), or runs a
// scripted pan/zoom and reports frames per second (--bench-frames).
#include <optional>
#include <string>
#include <vector>

#include "engine/plan/plan.hpp"

namespace stratagem::viz {

enum class Panel { all, timeline, memory, compare, what_if };
/// "all", "timeline", "memory", "compare", "whatif"; throws SpecError otherwise.
Panel parse_panel(const std::string& name);

struct ViewerOptions {
  std::vector<std::string> results;     ///< result files
  std::string scenario;                 ///< "" or a scenario for the what-if panel
  std::string what_if;                  ///< knob edits applied to the scenario first
  std::vector<std::string> strategies;  ///< variants of the scenario to simulate and compare
  std::string screenshot;               ///< "" for the interactive window
  int width = 1600, height = 900;
  Panel panel = Panel::all;
  int bench_frames = 0;
  bool overlay = false;                ///< overlay the second result on the first
  bool pair = false;                   ///< the second result below the first, same time scale
  bool collapse_replicas = false;      ///< one row per rank and the folded replicas identical to it
  plan::OpId select_op = plan::kNoOp;  ///< op of the first result to select (dependencies)
  double cursor_s = -1;
  std::optional<std::pair<double, double>> zoom_s;   ///< time range to show
  std::optional<std::pair<double, double>> range_s;  ///< range selection to show
  std::string input;  ///< scripted mouse input before the screenshot (input_script.hpp)
};

struct BenchReport {
  int frames = 0;
  double seconds = 0;
  double frames_per_s = 0;
  double slowest_frame_s = 0;
  double build_s = 0;  ///< summed time spent building frames (panels, ImGui), not drawing
};

/// Runs the viewer. Throws SpecError for bad input, RuntimeError when no window can be
/// opened. Returns the exit code.
int run_viewer(const ViewerOptions& options);

}  // namespace stratagem::viz
