#include "viz/model/colors.hpp"

#include <algorithm>

#include "viz/model/mesh.hpp"

namespace stratagem::viz {

Rgba shade(Rgba c, double factor) {
  auto s = [factor](std::uint8_t v) {
    return static_cast<std::uint8_t>(std::clamp(v * factor, 0.0, 255.0));
  };
  return {s(c.r), s(c.g), s(c.b), c.a};
}

// Compute phases in cool/green hues, collectives in warm hues, p2p in yellows, so the three
// families read apart at a glance; every colour differs from the fixed palette colours.
Rgba kind_color(result::SpanKind k) {
  using K = result::SpanKind;
  switch (k) {
    case K::forward:
      return {66, 133, 244, 255};
    case K::backward:
      return {52, 168, 83, 255};
    case K::backward_input:
      return {30, 130, 60, 255};
    case K::backward_weight:
      return {120, 200, 120, 255};
    case K::recompute:
      return {150, 110, 230, 255};
    case K::optimizer:
      return {0, 172, 193, 255};
    case K::loss_scale_check:
      return {158, 158, 158, 255};
    case K::all_reduce:
      return {239, 108, 0, 255};
    case K::reduce_scatter:
      return {216, 67, 140, 255};
    case K::all_gather:
      return {255, 160, 120, 255};
    case K::broadcast:
      return {141, 110, 99, 255};
    case K::all_to_all:
      return {198, 40, 40, 255};
    case K::send:
      return {251, 192, 45, 255};
    case K::recv:
      return {205, 220, 57, 255};
  }
  return {128, 128, 128, 255};
}

Rgba tp_kind_color(result::SpanKind k) {
  using K = result::SpanKind;
  switch (k) {
    case K::all_gather:
      return {240, 120, 255, 255};
    case K::reduce_scatter:
      return {140, 20, 170, 255};
    default:
      return {215, 40, 230, 255};  // all-reduce (and anything else on the tp stream)
  }
}

Rgba span_color(const result::Span& s) {
  return is_tensor_parallel(s) ? tp_kind_color(s.kind) : kind_color(s.kind);
}

Rgba tensor_class_color(plan::TensorClass c) {
  using T = plan::TensorClass;
  switch (c) {
    case T::params:
      return {66, 133, 244, 255};
    case T::grads:
      return {52, 168, 83, 255};
    case T::optimizer:
      return {150, 110, 230, 255};
    case T::master_weights:
      return {0, 172, 193, 255};
    case T::activations:
      return {255, 160, 120, 255};
    case T::gathered_params:
      return {141, 110, 99, 255};
    case T::comm_buckets:
      return {216, 67, 140, 255};
    case T::loss_scale:
      return {158, 158, 158, 255};
    case T::fp8_weights:
      return {205, 220, 57, 255};
    case T::count:
      break;
  }
  return {128, 128, 128, 255};
}

std::vector<LegendEntry> kind_legend() {
  std::vector<LegendEntry> out;
  for (int i = 0; i < result::kSpanKindCount; ++i) {
    const auto k = static_cast<result::SpanKind>(i);
    out.push_back({kind_color(k), result::to_string(k), k, false});
  }
  using K = result::SpanKind;
  for (const K k : {K::all_reduce, K::all_gather, K::reduce_scatter}) {
    out.push_back({tp_kind_color(k), std::string(result::to_string(k)) + " (tp)", k, true});
  }
  return out;
}

std::vector<LegendEntry> tensor_class_legend() {
  std::vector<LegendEntry> out;
  for (int i = 0; i < plan::kTensorClassCount; ++i) {
    const auto c = static_cast<plan::TensorClass>(i);
    out.push_back({tensor_class_color(c), plan::to_string(c)});
  }
  return out;
}

}  // namespace stratagem::viz
