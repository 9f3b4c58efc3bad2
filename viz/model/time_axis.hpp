#pragma once
// Time ↔ pixel mapping of the timeline: which instant sits at the left edge and how many
// seconds one pixel covers. Zooming keeps the instant under the mouse in place; the ruler
// picks round steps (1, 2, 5 × 10^k) so labels stay readable at every zoom.
#include <string>
#include <utility>
#include <vector>

namespace stratagem::viz {

class TimeView {
 public:
  TimeView() = default;
  TimeView(double left_s, double seconds_per_px) : left_s_(left_s), s_per_px_(seconds_per_px) {}

  double left_s() const { return left_s_; }
  double seconds_per_px() const { return s_per_px_; }
  /// Pixels from the left edge of the drawing area.
  double to_px(double t_s) const { return (t_s - left_s_) / s_per_px_; }
  double to_time(double px) const { return left_s_ + px * s_per_px_; }
  double right_s(double width_px) const { return to_time(width_px); }

  /// Shows [begin, end] across `width_px` pixels.
  void fit(double begin_s, double end_s, double width_px);
  /// factor > 1 zooms in; the instant at `px` stays at `px`.
  void zoom_at(double px, double factor);
  /// Moves the content right by `dx_px` pixels (a drag to the right shows earlier time).
  void pan_px(double dx_px);
  /// Keeps the view on [begin, end] (plus a 5 % margin) and at no less than `min_s_per_px`.
  void clamp(double begin_s, double end_s, double width_px, double min_s_per_px = 1e-9);

 private:
  double left_s_ = 0;
  double s_per_px_ = 1e-6;
};

struct Tick {
  double t_s = 0;
  bool major = false;  ///< labelled
  std::string label;
};

/// Ticks for [left, right) of `view` over `width_px`. Labelled (major) ticks fall on round
/// times (1, 2 or 5 × 10^k) at least `label_spacing_px` apart; minor ticks split each gap
/// in five (four for 2 × 10^k).
std::vector<Tick> ruler_ticks(const TimeView& view, double width_px, double label_spacing_px);

/// "0", "850 ns", "12.5 µs", "3.2 ms", "1.25 s": three significant digits.
std::string format_duration(double seconds);
/// Parses "12ms", "0.5 s", "300us", "250ns" or a plain number of seconds; SpecError naming
/// `path` otherwise.
double parse_duration(const std::string& text, const std::string& path);
/// Parses "A:B" (two durations) into a begin and an end.
std::pair<double, double> parse_time_range(const std::string& text, const std::string& path);

/// "512 B", "1.5 KiB", "24.0 GiB".
std::string format_bytes(double bytes);
/// "1.2 TFLOP", "350 GFLOP".
std::string format_flops(double flops);

}  // namespace stratagem::viz
