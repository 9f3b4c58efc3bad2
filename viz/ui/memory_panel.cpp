// Memory per GPU: stacked bars by tensor class at each rank's peak, with the capacity line
// and what does not fit in red; next to them, each GPU's memory over time on the timeline's
// time scale, with the timeline's cursor.
#include <algorithm>
#include <cstdio>

#include "viz/model/memory_series.hpp"
#include "viz/ui/panels.hpp"

namespace stratagem::viz {
namespace {

constexpr float kAxisPx = 64;
constexpr float kCurveRowPx = 44;
constexpr float kCurveLabelPx = 150;

std::vector<int> shown_ranks(const ViewState& st, const Document& doc) {
  std::vector<int> out;
  for (int r = 0; r < doc.world(); ++r) {
    if (st.layout_options.collapse_replicas && doc.resolved_rank(r) != r) continue;
    out.push_back(r);
  }
  return out;
}

double scale_bytes(const Document& doc) {
  double top = 0;
  for (const auto& r : doc.result().ranks) {
    top = std::max({top, r.capacity_bytes, r.peak_memory_bytes});
  }
  return top > 0 ? top * 1.08 : 1;
}

void class_table(const ClassBytes& bytes) {
  for (int c = 0; c < plan::kTensorClassCount; ++c) {
    if (bytes[c] <= 0) continue;
    const auto cls = static_cast<plan::TensorClass>(c);
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(im_col(tensor_class_color(cls))), "%-16s",
                       plan::to_string(cls));
    ImGui::SameLine();
    ImGui::Text("%s", format_bytes(bytes[c]).c_str());
  }
}

double total(const ClassBytes& b) {
  double t = 0;
  for (double v : b) t += v;
  return t;
}

void draw_bars(ViewState& st, const Document& doc, ImVec2 size) {
  const auto ranks = shown_ranks(st, doc);
  const int n = static_cast<int>(ranks.size());
  const float avail = size.x - kAxisPx - 8;
  const float gap = n > 64 ? 1.0f : 4.0f;
  const float bar_w = std::clamp(avail / std::max(n, 1) - gap, 3.0f, 48.0f);
  const float content_w = kAxisPx + n * (bar_w + gap) + 8;
  ImGui::BeginChild("bars", size, false, ImGuiWindowFlags_HorizontalScrollbar);
  ImGui::TextDisabled("at each rank's peak; white tick: at the cursor");
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float label_h = ImGui::GetTextLineHeightWithSpacing();
  const float top = origin.y + label_h;  // room for "OOM" above the bars
  const float bottom = origin.y + size.y - 2 * label_h - ImGui::GetStyle().ScrollbarSize;
  const float plot_h = std::max(bottom - top, 10.0f);
  const double max_bytes = scale_bytes(doc);
  auto y_of = [&](double bytes) { return bottom - static_cast<float>(bytes / max_bytes) * plot_h; };

  // Axis: zero, the capacity and the top of the scale.
  const float ax = origin.x + kAxisPx;
  dl->AddLine(ImVec2(ax, top), ImVec2(ax, bottom), IM_COL32(150, 150, 150, 255));
  const double capacity = doc.result().ranks.empty() ? 0 : doc.result().ranks[0].capacity_bytes;
  for (double v : {0.0, capacity, max_bytes / 1.08}) {
    if (v < 0 || (v == capacity && v <= 0)) continue;
    const std::string label = format_bytes(v);
    const ImVec2 ts = ImGui::CalcTextSize(label.c_str());
    dl->AddText(ImVec2(ax - ts.x - 4, y_of(v) - ts.y * 0.5f), IM_COL32(200, 200, 200, 255),
                label.c_str());
  }

  const ImGuiIO& io = ImGui::GetIO();
  for (int i = 0; i < n; ++i) {
    const int rank = ranks[i];
    const auto& rr = doc.result().ranks[rank];
    const auto& track = doc.result().resolved(rank).memory;
    const float x0 = origin.x + kAxisPx + gap + i * (bar_w + gap);
    const float x1 = x0 + bar_w;
    if (x1 < ImGui::GetWindowPos().x || x0 > ImGui::GetWindowPos().x + size.x) continue;
    const ClassBytes peak = track.time_s.empty() ? ClassBytes{} : track.bytes[peak_sample(track)];
    for (const BarPiece& piece : stacked_bar(peak, rr.capacity_bytes)) {
      dl->AddRectFilled(ImVec2(x0, y_of(piece.to_bytes)), ImVec2(x1, y_of(piece.from_bytes)),
                        im_col(piece.color));
    }
    if (rr.capacity_bytes > 0) {
      const float cy = y_of(rr.capacity_bytes);
      dl->AddLine(ImVec2(x0 - gap * 0.5f, cy), ImVec2(x1 + gap * 0.5f, cy),
                  im_col(palette::kCapacity), 2);
    }
    if (rr.oom) {
      const ImVec2 ts = ImGui::CalcTextSize("OOM");
      if (ts.x <= bar_w + gap) {
        dl->AddText(ImVec2((x0 + x1 - ts.x) * 0.5f, y_of(total(peak)) - ts.y - 1),
                    im_col(palette::kOom), "OOM");
      }
    }
    if (st.cursor_s >= 0) {
      const float cy = y_of(total(bytes_at(track, st.cursor_s)));
      dl->AddLine(ImVec2(x0, cy), ImVec2(x1, cy), im_col(palette::kCursor), 2);
    }
    char label[16];
    std::snprintf(label, sizeof label, "%d", rank);
    const ImVec2 ts = ImGui::CalcTextSize(label);
    if (ts.x <= bar_w + gap) {
      dl->AddText(ImVec2((x0 + x1 - ts.x) * 0.5f, bottom + 2), IM_COL32(200, 200, 200, 255), label);
    }
    const bool hovered = ImGui::IsWindowHovered() && io.MousePos.x >= x0 - gap * 0.5f &&
                         io.MousePos.x < x1 + gap * 0.5f && io.MousePos.y >= top &&
                         io.MousePos.y < bottom;
    if (hovered) {
      ImGui::BeginTooltip();
      ImGui::Text("rank %d: peak %s of %s%s", rank, format_bytes(total(peak)).c_str(),
                  format_bytes(rr.capacity_bytes).c_str(), rr.oom ? " (OUT OF MEMORY)" : "");
      class_table(peak);
      if (rr.host_bytes > 0)
        ImGui::Text("host (offloaded) %s", format_bytes(rr.host_bytes).c_str());
      if (st.cursor_s >= 0) {
        ImGui::Separator();
        ImGui::Text("at the cursor (%s): %s", format_duration(st.cursor_s).c_str(),
                    format_bytes(total(bytes_at(track, st.cursor_s))).c_str());
      }
      ImGui::EndTooltip();
    }
  }
  ImGui::Dummy(ImVec2(content_w, bottom + label_h - origin.y));
  ImGui::EndChild();
}

void draw_curves(ViewState& st, const Document& doc, ImVec2 size) {
  const auto ranks = shown_ranks(st, doc);
  ImGui::TextDisabled("over time, on the timeline's time scale, with its cursor");
  ImGui::BeginChild("curves", ImGui::GetContentRegionAvail(), false);
  const float width = ImGui::GetContentRegionAvail().x - kCurveLabelPx;
  if (st.fit_pending) {
    st.time.fit(0, st.end_s(), width);
    st.timeline_width_px = width;
    st.fit_pending = false;
  }
  // The timeline's visible time range, stretched over this panel's width.
  const TimeView view(st.time.left_s(),
                      st.time.seconds_per_px() * st.timeline_width_px / std::max(width, 1.0f));
  // Curves use the height for their shape: scaled to the largest peak, not to the capacity.
  double max_bytes = 0;
  for (const auto& r : doc.result().ranks) max_bytes = std::max(max_bytes, r.peak_memory_bytes);
  max_bytes = max_bytes > 0 ? max_bytes * 1.08 : 1;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  ImGuiListClipper clipper;
  clipper.Begin(static_cast<int>(ranks.size()), kCurveRowPx);
  while (clipper.Step()) {
    for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i) {
      const int rank = ranks[i];
      const auto& rr = doc.result().ranks[rank];
      const auto& track = doc.result().resolved(rank).memory;
      const ImVec2 p = ImGui::GetCursorScreenPos();
      const float x0 = p.x + kCurveLabelPx, x1 = x0 + width;
      const float y0 = p.y + 2, y1 = p.y + kCurveRowPx - 4;
      auto y_of = [&](double b) { return y1 - static_cast<float>(b / max_bytes) * (y1 - y0); };
      dl->AddText(ImVec2(p.x + 4, p.y + 2), IM_COL32(230, 230, 230, 255),
                  ("rank " + std::to_string(rank)).c_str());
      if (st.cursor_s >= 0) {
        const std::string v = format_bytes(total(bytes_at(track, st.cursor_s)));
        dl->AddText(ImVec2(p.x + 4, p.y + 2 + ImGui::GetTextLineHeight()),
                    IM_COL32(180, 220, 255, 255), v.c_str());
      }
      dl->AddRectFilled(ImVec2(x0, y0), ImVec2(x1, y1), im_col(palette::kBackground));
      // Columns of equal value are drawn as one rectangle: memory is piecewise constant, so
      // a curve costs a few dozen rectangles, not one per pixel.
      const auto curve = memory_curve(track, view, static_cast<int>(width));
      float prev_top = -1;
      for (int x = 0; x < static_cast<int>(curve.size());) {
        int end = x + 1;
        while (end < static_cast<int>(curve.size()) && curve[end] == curve[x]) ++end;
        if (curve[x] >= 0) {
          const bool over = rr.capacity_bytes > 0 && curve[x] > rr.capacity_bytes;
          const Rgba c = over ? palette::kOom : palette::kMemoryCurve;
          const float top = y_of(curve[x]);
          dl->AddRectFilled(ImVec2(x0 + x, top), ImVec2(x0 + end, y1),
                            im_col(Rgba{c.r, c.g, c.b, 90}));
          dl->AddRectFilled(ImVec2(x0 + x, top - 1), ImVec2(x0 + end, top + 1), im_col(c));
          if (prev_top >= 0) {
            dl->AddRectFilled(ImVec2(x0 + x - 1, std::min(prev_top, top) - 1),
                              ImVec2(x0 + x + 1, std::max(prev_top, top) + 1), im_col(c));
          }
          prev_top = top;
        } else {
          prev_top = -1;
        }
        x = end;
      }
      if (rr.capacity_bytes > 0 && rr.capacity_bytes < max_bytes) {
        dl->AddLine(ImVec2(x0, y_of(rr.capacity_bytes)), ImVec2(x1, y_of(rr.capacity_bytes)),
                    im_col(palette::kCapacity));
      }
      if (st.cursor_s >= 0) {
        const float cx = x0 + static_cast<float>(view.to_px(st.cursor_s));
        if (cx >= x0 && cx <= x1)
          dl->AddLine(ImVec2(cx, y0), ImVec2(cx, y1), im_col(palette::kCursor), 1.5f);
      }
      ImGui::Dummy(ImVec2(kCurveLabelPx + width, kCurveRowPx));
    }
  }
  ImGui::EndChild();
}

}  // namespace

void draw_memory_panel(ViewState& st, ImVec2 size) {
  ImGui::BeginChild("memory", size, true,
                    ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
  if (st.docs.empty()) {
    ImGui::TextUnformatted("No result loaded.");
    ImGui::EndChild();
    return;
  }
  if (st.what_if && st.primary == st.what_if->doc && !st.what_if->error.empty()) {
    ImGui::TextColored(ImVec4(1, 0.4f, 0.4f, 1), "Memory per GPU: this combination cannot run.");
    ImGui::TextWrapped("%s", st.what_if->error.c_str());
    ImGui::EndChild();
    return;
  }
  const Document& doc = *st.docs[st.primary];
  ImGui::Text("Memory per GPU: %s  (peak %s%s)", doc.label().c_str(),
              format_bytes(doc.peak_memory_bytes()).c_str(),
              doc.any_oom() ? ", OUT OF MEMORY" : "");
  bool first = true;
  for (const auto& e : tensor_class_legend()) legend_item(e.color, e.label.c_str(), first);
  legend_item(palette::kCapacity, "capacity", first);
  legend_item(palette::kOom, "over capacity (OOM)", first);
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float bars_w = std::max(avail.x * 0.42f, 120.0f);
  const float h = ImGui::GetContentRegionAvail().y;
  draw_bars(st, doc, ImVec2(bars_w, h));
  ImGui::SameLine();
  ImGui::BeginGroup();
  draw_curves(st, doc, ImVec2(ImGui::GetContentRegionAvail().x, h));
  ImGui::EndGroup();
  ImGui::EndChild();
}

}  // namespace stratagem::viz
