// `stratagem view [result.json ...] [--scenario s.json]`: the viewer (viz/ui/viewer.hpp).
#include <memory>
#include <sstream>

#include "apps/command.hpp"
#include "engine/scenario/error.hpp"
#include "tune/strategy_variants.hpp"
#include "viz/model/time_axis.hpp"
#include "viz/ui/viewer.hpp"

namespace stratagem::cli {
namespace {

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

struct ViewArgs {
  viz::ViewerOptions options;
  std::string strategies, size, panel = "all", zoom, range;
};

Registration reg{
    {"view", "Open the viewer: timelines, memory, throughput comparison, what-if (or --screenshot)",
     60, [](CLI::App& sub) {
       auto a = std::make_shared<ViewArgs>();
       auto& o = a->options;
       sub.add_option("results", o.results, "Result files (stratagem sim -o, or a real run)");
       sub.add_option(
           "--scenario", o.scenario,
           "Scenario file or shipped name: simulated, and changeable in the What-if tab");
       sub.add_option(
           "--what-if", o.what_if,
           "Knob edits applied to --scenario first: key=value,... (dp, tp, sequence_parallel, pp, "
           "schedule, "
           "chunks, micro_batches, micro_batch_size, sharding, precision, recompute, gpu, "
           "cluster)");
       sub.add_option("--strategies", a->strategies,
                      "Also simulate these variants of --scenario for comparison: comma list of "
                      "base, ddp, zero1, zero2, zero3, fsdp, shard_grad_op, hybrid, gpipe, 1f1b, "
                      "interleaved, offload; or 'default'");
       sub.add_option(
           "--screenshot", o.screenshot,
           "Render one frame to this PNG and exit (no interaction; works under xvfb-run)");
       sub.add_option("--size", a->size, "Window or screenshot size WxH (default 1600x900)");
       sub.add_option("--panel", a->panel, "timeline, memory, compare, whatif or all (default)");
       sub.add_option("--bench-frames", o.bench_frames,
                      "Run a scripted pan/zoom over N frames and print frames/s");
       sub.add_flag("--overlay", o.overlay, "Draw the second result over the first one's lanes");
       sub.add_flag("--pair", o.pair,
                    "Draw the next result below the first on the same time scale");
       sub.add_flag("--collapse-replicas", o.collapse_replicas,
                    "One row for a rank and the folded replicas identical to it");
       sub.add_option("--select-op", o.select_op,
                      "Select this op id of the first result (highlights its dependencies)");
       sub.add_option("--cursor", o.cursor_s, "Put the timeline cursor here (seconds)");
       sub.add_option("--zoom", a->zoom, "Show this time range, e.g. 10ms:25ms");
       sub.add_option("--range", a->range, "Show this range selection, e.g. 10ms:25ms");
       sub.add_option("--input", o.input,
                      "Mouse input before the screenshot: 'move X,Y; click X,Y; drag X1,Y1 X2,Y2; "
                      "rdrag X1,Y1 X2,Y2; wheel X,Y N' (window pixels)");
       return std::function<int()>([a] {
         auto& o = a->options;
         if (!a->strategies.empty()) {
           o.strategies =
               a->strategies == "default" ? tune::default_variants() : split_commas(a->strategies);
         }
         if (!a->size.empty()) {
           int w = 0, h = 0;
           char x = 0;
           std::istringstream in(a->size);
           if (!(in >> w >> x >> h) || (x != 'x' && x != 'X') || !in.eof()) {
             throw SpecError("--size", "expected WxH such as 1600x900, got '" + a->size + "'");
           }
           o.width = w;
           o.height = h;
         }
         o.panel = viz::parse_panel(a->panel);
         if (!a->zoom.empty()) o.zoom_s = viz::parse_time_range(a->zoom, "--zoom");
         if (!a->range.empty()) o.range_s = viz::parse_time_range(a->range, "--range");
         return viz::run_viewer(o);
       });
     }}};

}  // namespace
}  // namespace stratagem::cli
