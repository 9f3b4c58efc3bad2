#include "viz/model/time_axis.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "engine/scenario/error.hpp"
#include "engine/scenario/units.hpp"

namespace stratagem::viz {

void TimeView::fit(double begin_s, double end_s, double width_px) {
  const double span = std::max(end_s - begin_s, 1e-12);
  s_per_px_ = span / std::max(width_px, 1.0);
  left_s_ = begin_s;
}

void TimeView::zoom_at(double px, double factor) {
  const double t = to_time(px);
  s_per_px_ /= factor;
  left_s_ = t - px * s_per_px_;
}

void TimeView::pan_px(double dx_px) {
  left_s_ -= dx_px * s_per_px_;
}

void TimeView::clamp(double begin_s, double end_s, double width_px, double min_s_per_px) {
  const double span = std::max(end_s - begin_s, 1e-12);
  const double margin = 0.05 * span;
  const double max_s_per_px = (span + 2 * margin) / std::max(width_px, 1.0);
  s_per_px_ = std::clamp(s_per_px_, std::min(min_s_per_px, max_s_per_px), max_s_per_px);
  const double visible = s_per_px_ * width_px;
  left_s_ =
      std::clamp(left_s_, begin_s - margin, std::max(begin_s - margin, end_s + margin - visible));
}

namespace {

std::string format_scaled(double value, const char* const* names, const double* scales, int n) {
  const double a = std::fabs(value);
  int i = 0;
  while (i + 1 < n && a >= scales[i + 1] * 0.9995) ++i;
  const double v = value / scales[i];
  char buf[64];
  const double av = std::fabs(v);
  const char* fmt = av >= 99.95 ? "%.0f %s" : av >= 9.995 ? "%.1f %s" : "%.2f %s";
  std::snprintf(buf, sizeof buf, fmt, v, names[i]);
  return buf;
}

}  // namespace

std::string format_duration(double seconds) {
  if (seconds == 0) return "0";
  static const char* const names[] = {"ns", "µs", "ms", "s"};
  static const double scales[] = {1e-9, 1e-6, 1e-3, 1.0};
  return format_scaled(seconds, names, scales, 4);
}

std::string format_bytes(double bytes) {
  if (std::fabs(bytes) < units::kKiB) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f B", bytes);
    return buf;
  }
  static const char* const names[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  static const double scales[] = {1, units::kKiB, units::kMiB, units::kGiB,
                                  units::kGiB * units::kKiB};
  return format_scaled(bytes, names, scales, 5);
}

std::string format_flops(double flops) {
  static const char* const names[] = {"FLOP", "kFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP"};
  static const double scales[] = {1, 1e3, 1e6, units::kGiga, units::kTera, 1e15};
  return format_scaled(flops, names, scales, 6);
}

double parse_duration(const std::string& text, const std::string& path) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    throw SpecError(path, "expected a duration such as 12ms or 0.5s, got '" + text + "'");
  }
  std::string unit = text.substr(used);
  unit.erase(0, unit.find_first_not_of(' '));
  static const std::pair<const char*, double> units[] = {{"", 1},      {"s", 1},     {"ms", 1e-3},
                                                         {"us", 1e-6}, {"µs", 1e-6}, {"ns", 1e-9}};
  for (const auto& [name, scale] : units) {
    if (unit == name) return v * scale;
  }
  throw SpecError(path, "unknown time unit '" + unit + "' (use s, ms, us or ns)");
}

std::pair<double, double> parse_time_range(const std::string& text, const std::string& path) {
  const std::size_t colon = text.find(':');
  if (colon == std::string::npos) throw SpecError(path, "expected BEGIN:END, got '" + text + "'");
  const double b = parse_duration(text.substr(0, colon), path);
  const double e = parse_duration(text.substr(colon + 1), path);
  if (!(e > b)) throw SpecError(path, "the end must come after the beginning");
  return {b, e};
}

std::vector<Tick> ruler_ticks(const TimeView& view, double width_px, double label_spacing_px) {
  std::vector<Tick> ticks;
  const double min_major = view.seconds_per_px() * std::max(label_spacing_px, 1.0);
  if (!(min_major > 0) || width_px <= 0) return ticks;
  // Labelled ticks: the smallest round step (1, 2 or 5 × 10^k) that leaves room for a label;
  // unlabelled ones split it in five (1, 5) or four (2).
  const double decade = std::pow(10.0, std::floor(std::log10(min_major)));
  double major = decade * 10;
  int split = 5;
  for (const auto& [m, parts] : {std::pair{1.0, 5}, {2.0, 4}, {5.0, 5}, {10.0, 5}}) {
    if (decade * m >= min_major * (1 - 1e-12)) {
      major = decade * m;
      split = parts;
      break;
    }
  }
  const double step = major / split;
  const double left = view.left_s();
  const double right = view.right_s(width_px);
  const auto first = static_cast<long long>(std::ceil(left / step - 1e-9));
  const auto last = static_cast<long long>(std::floor(right / step + 1e-9));
  for (long long i = first; i <= last; ++i) {
    Tick t;
    t.t_s = static_cast<double>(i) * step;
    t.major = i % split == 0;
    if (t.major) t.label = format_duration(t.t_s);
    ticks.push_back(std::move(t));
  }
  return ticks;
}

}  // namespace stratagem::viz
