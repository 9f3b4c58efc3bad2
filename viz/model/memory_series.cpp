#include "viz/model/memory_series.hpp"

#include <algorithm>

namespace stratagem::viz {

ClassBytes bytes_at(const result::MemoryTrack& track, double t_s) {
  auto it = std::upper_bound(track.time_s.begin(), track.time_s.end(), t_s);
  if (it == track.time_s.begin()) return ClassBytes{};
  return track.bytes[static_cast<std::size_t>(it - track.time_s.begin()) - 1];
}

std::size_t peak_sample(const result::MemoryTrack& track) {
  std::size_t best = 0;
  double best_total = -1;
  for (std::size_t i = 0; i < track.time_s.size(); ++i) {
    const double t = track.total_at(i);
    if (t > best_total) {
      best_total = t;
      best = i;
    }
  }
  return best;
}

std::vector<BarPiece> stacked_bar(const ClassBytes& bytes, double capacity_bytes) {
  std::vector<BarPiece> out;
  double base = 0;
  for (int c = 0; c < plan::kTensorClassCount; ++c) {
    if (bytes[c] <= 0) continue;
    const auto cls = static_cast<plan::TensorClass>(c);
    const double top = base + bytes[c];
    const bool limited = capacity_bytes > 0;
    if (!limited || top <= capacity_bytes) {
      out.push_back({base, top, tensor_class_color(cls), cls, false});
    } else {
      if (base < capacity_bytes) {
        out.push_back({base, capacity_bytes, tensor_class_color(cls), cls, false});
      }
      out.push_back({std::max(base, capacity_bytes), top, palette::kOom, cls, true});
    }
    base = top;
  }
  return out;
}

std::vector<float> memory_curve(const result::MemoryTrack& track, const TimeView& view,
                                int width_px) {
  std::vector<float> out(static_cast<std::size_t>(std::max(width_px, 0)), -1.0f);
  const auto& times = track.time_s;
  if (times.empty()) return out;
  // First sample inside the first column; the value entering it is the one before.
  auto it = std::upper_bound(times.begin(), times.end(), view.left_s());
  std::size_t i = static_cast<std::size_t>(it - times.begin());
  double carry = i > 0 ? track.total_at(i - 1) : -1.0;
  for (int x = 0; x < width_px; ++x) {
    const double col_end = view.to_time(x + 1);
    double v = carry;
    while (i < times.size() && times[i] < col_end) {
      carry = track.total_at(i);
      v = std::max(v, carry);
      ++i;
    }
    out[static_cast<std::size_t>(x)] = static_cast<float>(v);
  }
  return out;
}

}  // namespace stratagem::viz
