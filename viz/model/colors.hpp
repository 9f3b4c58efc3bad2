#pragma once
// The viewer's palette: one colour per span kind and per tensor class, the legend that
// explains them, and the few fixed colours (OOM, bubbles, capacity) that tests look for in
// screenshots. Plain RGBA, no ImGui, so tests can compare pixels against the same values.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/plan/plan.hpp"
#include "engine/result/result.hpp"

namespace stratagem::viz {

struct Rgba {
  std::uint8_t r = 0, g = 0, b = 0, a = 255;
  friend bool operator==(const Rgba&, const Rgba&) = default;
};

/// Scales r, g, b by `factor` (clamped), keeps alpha.
Rgba shade(Rgba c, double factor);
/// Packs as ImGui's IM_COL32 does (A << 24 | B << 16 | G << 8 | R).
constexpr std::uint32_t pack(Rgba c) {
  return std::uint32_t{c.a} << 24 | std::uint32_t{c.b} << 16 | std::uint32_t{c.g} << 8 |
         std::uint32_t{c.r};
}

Rgba kind_color(result::SpanKind k);
/// Tensor-parallel collectives (the `tp` stream) in their own magenta family, one shade per
/// collective kind (all-reduce; SP's all-gather and reduce-scatter).
Rgba tp_kind_color(result::SpanKind k);
/// The colour a span is drawn in: tp_kind_color for tensor-parallel ones, else kind_color.
Rgba span_color(const result::Span& s);
Rgba tensor_class_color(plan::TensorClass c);

/// Fixed colours with a meaning of their own.
namespace palette {
inline constexpr Rgba kOom{230, 25, 25, 255};          ///< memory above capacity
inline constexpr Rgba kBubble{70, 42, 42, 255};        ///< idle time between model compute
inline constexpr Rgba kCapacity{255, 215, 0, 255};     ///< the GPU's memory capacity line
inline constexpr Rgba kBackground{24, 24, 28, 255};    ///< timeline lane background
inline constexpr Rgba kHighlight{255, 255, 255, 255};  ///< outline of the selected op
inline constexpr Rgba kUpstream{255, 150, 0, 255};     ///< outline of what the selection waits for
inline constexpr Rgba kDownstream{0, 220, 255, 255};   ///< outline of what waits for the selection
inline constexpr Rgba kSelection{90, 140, 255, 60};    ///< range selection fill
inline constexpr Rgba kCursor{255, 255, 255, 180};     ///< the timeline cursor
inline constexpr Rgba kMemoryCurve{180, 220, 255, 255};
}  // namespace palette

/// One legend line: a colour and what it means. Kinds that look alike in a schedule
/// (backward_input/backward_weight of zero-bubble schedules) keep their own entry.
struct LegendEntry {
  Rgba color;
  std::string label;
  result::SpanKind kind = result::SpanKind::forward;  ///< span legends: what it explains
  bool tensor_parallel = false;                       ///< a tp_kind_color entry
};
/// Every span kind, then the tensor-parallel collectives ("all_reduce (tp)", ...).
std::vector<LegendEntry> kind_legend();
std::vector<LegendEntry> tensor_class_legend();

}  // namespace stratagem::viz
