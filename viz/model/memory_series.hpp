#pragma once
// Memory of one GPU for drawing: the breakdown by tensor class at an instant or at the
// peak, the stacked bar with the part above capacity marked as OOM, and the curve of total
// memory reduced to one value per pixel column (the column's maximum, so no peak is lost).
#include <array>
#include <vector>

#include "engine/result/result.hpp"
#include "viz/model/colors.hpp"
#include "viz/model/time_axis.hpp"

namespace stratagem::viz {

using ClassBytes = std::array<double, plan::kTensorClassCount>;

/// Bytes per class at `t_s`: the last sample at or before it (zeros before the first).
ClassBytes bytes_at(const result::MemoryTrack& track, double t_s);
/// Index of the sample with the largest total (the first of equals); 0 for an empty track.
std::size_t peak_sample(const result::MemoryTrack& track);

struct BarPiece {
  double from_bytes = 0, to_bytes = 0;
  Rgba color;
  plan::TensorClass cls = plan::TensorClass::params;
  bool over_capacity = false;
};

/// The stacked bar of `bytes` (classes bottom-up in enum order). With `capacity_bytes` > 0,
/// whatever lies above the capacity is its own piece in palette::kOom.
std::vector<BarPiece> stacked_bar(const ClassBytes& bytes, double capacity_bytes);

/// Max total bytes per pixel column [x, x + 1) of `view`, for x in [0, width_px); columns
/// before the first sample hold a negative value (nothing to draw).
std::vector<float> memory_curve(const result::MemoryTrack& track, const TimeView& view,
                                int width_px);

}  // namespace stratagem::viz
