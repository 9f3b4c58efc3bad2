// The timeline: ruler, rank rows grouped by node and stage (and tensor-parallel group), lanes
// per stream, bubbles shaded, micro-batch numbers on blocks, hover tooltips, dependency
// highlights, a range selection, an overlay of a second result and a second timeline on the
// same time scale. The tooltip is span_tooltip.cpp's.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "viz/model/hit_test.hpp"
#include "viz/ui/panels.hpp"

namespace stratagem::viz {
namespace {

constexpr float kGutterPx = 170;  ///< the least gutter; wider for long (mesh) rank labels
constexpr float kRulerPx = 26;

struct Area {
  float x0 = 0, x1 = 0;  ///< drawing area (right of the gutter), screen x
  float width() const { return x1 - x0; }
};

Rgba mark_color(Mark m) {
  switch (m) {
    case Mark::selected:
      return palette::kHighlight;
    case Mark::upstream:
      return palette::kUpstream;
    case Mark::downstream:
      return palette::kDownstream;
    case Mark::peer:
      return palette::kHighlight;
    case Mark::none:
      break;
  }
  return palette::kHighlight;
}

std::string percent(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%% idle", 100 * f);
  return buf;
}

void draw_ruler(ViewState& st, ImDrawList* dl, const Area& a, float y0) {
  const float y1 = y0 + kRulerPx;
  dl->AddRectFilled(ImVec2(a.x0, y0), ImVec2(a.x1, y1), IM_COL32(40, 40, 46, 255));
  const auto ticks = ruler_ticks(st.time, a.width(), 80);
  for (const Tick& t : ticks) {
    const float x = a.x0 + static_cast<float>(st.time.to_px(t.t_s));
    dl->AddLine(ImVec2(x, y1 - (t.major ? 10.0f : 5.0f)), ImVec2(x, y1),
                IM_COL32(200, 200, 200, 255));
    if (t.major && x + 3 + ImGui::CalcTextSize(t.label.c_str()).x < a.x1) {
      dl->AddText(ImVec2(x + 3, y0 + 2), IM_COL32(220, 220, 220, 255), t.label.c_str());
    }
  }
  if (st.has_range) {
    const float rx0 =
        a.x0 + static_cast<float>(st.time.to_px(std::min(st.range_begin_s, st.range_end_s)));
    const float rx1 =
        a.x0 + static_cast<float>(st.time.to_px(std::max(st.range_begin_s, st.range_end_s)));
    dl->AddRectFilled(ImVec2(rx0, y0), ImVec2(rx1, y1), im_col(palette::kSelection));
  }
  if (st.cursor_s >= 0) {
    const float x = a.x0 + static_cast<float>(st.time.to_px(st.cursor_s));
    dl->AddLine(ImVec2(x, y0), ImVec2(x, y1), im_col(palette::kCursor));
  }
}

// Draws the lanes of one rank row; `overlay` (may be null) is drawn over matching lanes.
void draw_rank_row(ViewState& st, int doc_index, const Row& row, ImDrawList* dl, const Area& a,
                   float gutter, float origin_y, std::vector<Block>& blocks) {
  const Document& doc = *st.docs[doc_index];
  const TimelineLayout& layout = st.layouts[doc_index];
  const float lane_h = layout.options.lane_height;
  const auto& lanes = doc.lanes(row.rank);
  const auto& spans = doc.spans(row.rank);
  const double width = a.width();
  const Document* over = (st.overlay >= 0 && doc_index == st.primary && st.overlay != st.primary)
                             ? st.docs[st.overlay].get()
                             : nullptr;
  const bool marked_doc = st.sel_doc == doc_index && !st.marks.empty();
  const float text_h = ImGui::GetTextLineHeight();

  // Gutter: rank label and bubble fraction on the first lane, stream names on every lane.
  const float gx = a.x0 - gutter;
  const float ty = origin_y + row.y + (lane_h - text_h) * 0.5f;
  dl->AddText(ImVec2(gx + 8, ty), IM_COL32(230, 230, 230, 255), row.label.c_str());
  const std::string idle = percent(doc.summary(row.rank).bubble_fraction);
  const float idle_x = std::max(gx + 78, gx + 16 + ImGui::CalcTextSize(row.label.c_str()).x);
  dl->AddText(ImVec2(idle_x, ty), im_col(shade(palette::kBubble, 2.6)), idle.c_str());

  for (int l = 0; l < static_cast<int>(std::max<std::size_t>(lanes.size(), 1)); ++l) {
    const float y0 = origin_y + layout.lane_top(row, l);
    const float y1 = y0 + lane_h;
    if (l >= static_cast<int>(lanes.size())) {
      dl->AddRectFilled(ImVec2(a.x0, y0), ImVec2(a.x1, y1), im_col(palette::kBackground));
      break;
    }
    const Lane& lane = lanes[l];
    if (l > 0) {
      const char* name = plan::to_string(lane.stream);
      dl->AddText(ImVec2(a.x0 - ImGui::CalcTextSize(name).x - 6, y0 + (lane_h - text_h) * 0.5f),
                  IM_COL32(140, 140, 150, 255), name);
    }
    visible_blocks(spans, lane.spans, st.time, width, kMinBlockPx, blocks);
    // Each pixel is filled once: the background outside the step and, on the compute lane,
    // the bubble shade in the gaps between blocks (what stays visible of it is idle time).
    const bool shade_idle = lane.stream == plan::Stream::compute && lane.sub == 0;
    const float step0 = std::clamp(a.x0 + static_cast<float>(st.time.to_px(0)), a.x0, a.x1);
    const float step1 =
        std::clamp(a.x0 + static_cast<float>(st.time.to_px(doc.end_s())), a.x0, a.x1);
    auto fill_gap = [&](float g0, float g1) {
      if (g1 <= g0) return;
      if (!shade_idle) {
        dl->AddRectFilled(ImVec2(g0, y0), ImVec2(g1, y1), im_col(palette::kBackground));
        return;
      }
      const float b0 = std::clamp(g0, step0, step1), b1 = std::clamp(g1, step0, step1);
      if (g0 < b0) dl->AddRectFilled(ImVec2(g0, y0), ImVec2(b0, y1), im_col(palette::kBackground));
      if (b0 < b1) dl->AddRectFilled(ImVec2(b0, y0), ImVec2(b1, y1), im_col(palette::kBubble));
      if (b1 < g1)
        dl->AddRectFilled(ImVec2(std::max(b1, g0), y0), ImVec2(g1, y1),
                          im_col(palette::kBackground));
    };
    float gap_start = a.x0;
    for (const Block& b : blocks) {
      const float bx0 = a.x0 + static_cast<float>(std::max(b.x0, -2.0));
      const float bx1 = a.x0 + static_cast<float>(std::min(b.x1, width + 2));
      fill_gap(gap_start, std::min(bx0, a.x1));
      gap_start = std::max(gap_start, bx1);
    }
    fill_gap(gap_start, a.x1);
    for (const Block& b : blocks) {
      float x0 = a.x0 + static_cast<float>(std::max(b.x0, -2.0));
      float x1 = a.x0 + static_cast<float>(std::min(b.x1, width + 2));
      if (x1 - x0 > 3) {
        // A one-pixel seam keeps back-to-back ops apart (not idle time: no bubble shade).
        x1 -= 1;
        dl->AddRectFilled(ImVec2(x1, y0), ImVec2(x1 + 1, y1), im_col(palette::kBackground));
      }
      const result::Span& s = spans[lane.spans[b.first]];
      Rgba c = span_color(s);
      if (b.count > 1) c = shade(c, 0.75);
      dl->AddRectFilled(ImVec2(x0, y0), ImVec2(x1, y1), im_col(c));
      if (b.count != 1) continue;
      if (s.microbatch >= 0 && x1 - x0 > 12) {
        char buf[16];
        std::snprintf(buf, sizeof buf, "%d", s.microbatch);
        const ImVec2 ts = ImGui::CalcTextSize(buf);
        if (ts.x + 4 < x1 - x0) {
          dl->AddText(ImVec2((x0 + x1 - ts.x) * 0.5f, y0 + (lane_h - ts.y) * 0.5f),
                      IM_COL32(10, 10, 10, 255), buf);
        }
      }
      if (marked_doc && s.op >= 0 && s.op < static_cast<plan::OpId>(st.marks.size()) &&
          st.marks[s.op] != Mark::none) {
        dl->AddRect(ImVec2(x0 - 1, y0 - 1), ImVec2(x1 + 1, y1 + 1),
                    im_col(mark_color(st.marks[s.op])), 0, 0, 2.5f);
      }
    }
    if (over) {
      const int ol = matching_lane(*over, row.rank, lane);
      if (ol >= 0) {
        const auto& ospans = over->spans(row.rank);
        visible_blocks(ospans, over->lanes(row.rank)[ol].spans, st.time, width, kMinBlockPx,
                       blocks);
        for (const Block& b : blocks) {
          const float x0 = a.x0 + static_cast<float>(std::max(b.x0, -2.0));
          const float x1 = a.x0 + static_cast<float>(std::min(b.x1, width + 2));
          const Rgba c = shade(span_color(ospans[over->lanes(row.rank)[ol].spans[b.first]]), 1.35);
          dl->AddRectFilled(ImVec2(x0, y1 - 4), ImVec2(x1, y1), im_col(c));
          dl->AddRect(ImVec2(x0, y0), ImVec2(x1, y1), im_col(c), 0, 0, 1.5f);
        }
      }
    }
  }
}

// Lines from what the selection waits for to it, and from it to what waits for it.
void draw_dependency_lines(ViewState& st, int doc_index, ImDrawList* dl, const Area& a,
                           float origin_y) {
  if (st.sel_doc != doc_index || st.marked.empty()) return;
  const TimelineLayout& layout = st.layouts[doc_index];
  const Document& doc = *st.docs[doc_index];
  auto anchor = [&](const ViewState::MarkedOp& m, bool at_end) -> std::optional<ImVec2> {
    const int r = layout.row_of_rank(m.rank);
    if (r < 0) return std::nullopt;
    const result::Span& s = doc.spans(m.rank)[m.span];
    const float x = a.x0 + static_cast<float>(st.time.to_px(at_end ? s.end_s : s.start_s));
    const float y =
        origin_y + layout.lane_top(layout.rows[r], m.lane) + layout.options.lane_height * 0.5f;
    return ImVec2(x, y);
  };
  const ViewState::MarkedOp* sel = nullptr;
  for (const auto& m : st.marked) {
    if (m.mark == Mark::selected) sel = &m;
  }
  if (!sel) return;
  for (const auto& m : st.marked) {
    if (m.mark != Mark::upstream && m.mark != Mark::downstream) continue;
    const bool up = m.mark == Mark::upstream;
    const auto from = up ? anchor(m, true) : anchor(*sel, true);
    const auto to = up ? anchor(*sel, false) : anchor(m, false);
    if (!from || !to) continue;
    const ImU32 col = im_col(mark_color(m.mark));
    dl->AddLine(*from, *to, col, 2.0f);
    dl->AddCircleFilled(*to, 3.5f, col);
  }
}

void handle_input(ViewState& st, int doc_index, const Area& a, float origin_y) {
  ImGuiIO& io = ImGui::GetIO();
  const bool hovered = ImGui::IsItemHovered();
  const float mx = io.MousePos.x - a.x0;
  const double t = st.time.to_time(mx);
  if (hovered) st.cursor_s = std::max(0.0, t);
  if (hovered && io.MouseWheel != 0) {
    if (io.KeyShift) {
      ImGui::SetScrollY(ImGui::GetScrollY() - io.MouseWheel * 60);
    } else {
      st.time.zoom_at(mx, std::pow(1.25, io.MouseWheel));
    }
  }
  const bool range_drag =
      ImGui::IsItemActive() && (ImGui::IsMouseDragging(ImGuiMouseButton_Right, 2) ||
                                (io.KeyShift && ImGui::IsMouseDragging(ImGuiMouseButton_Left, 2)));
  if (range_drag) {
    if (!st.selecting) {
      st.selecting = true;
      const int button = ImGui::IsMouseDown(ImGuiMouseButton_Right) ? 1 : 0;
      st.range_begin_s = st.time.to_time(io.MouseClickedPos[button].x - a.x0);
    }
    st.range_end_s = t;
    st.has_range = true;
  } else if (ImGui::IsItemActive() && ImGui::IsMouseDragging(ImGuiMouseButton_Left, 2)) {
    st.time.pan_px(io.MouseDelta.x);
    ImGui::SetScrollY(ImGui::GetScrollY() - io.MouseDelta.y);
  }
  if (!ImGui::IsMouseDown(ImGuiMouseButton_Left) && !ImGui::IsMouseDown(ImGuiMouseButton_Right)) {
    st.selecting = false;
  }
  if (hovered && ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) st.fit_pending = true;

  if (!hovered) return;
  const Document& doc = *st.docs[doc_index];
  const float y = io.MousePos.y - origin_y;
  const Hit hit = hit_test(doc, st.layouts[doc_index], st.time, a.width(), kMinBlockPx, mx, y);
  const bool click = ImGui::IsMouseReleased(ImGuiMouseButton_Left) &&
                     io.MouseDragMaxDistanceSqr[0] < 9 && !io.KeyShift;
  if (ImGui::IsMouseReleased(ImGuiMouseButton_Right) && io.MouseDragMaxDistanceSqr[1] < 9) {
    st.has_range = false;
  }
  if (hit.span >= 0) {
    const result::Span& s = doc.spans(hit.rank)[hit.span];
    if (!ImGui::IsMouseDown(ImGuiMouseButton_Left)) {
      span_tooltip(doc, hit.rank, s, hit.count, hit.block, st.time);
    }
    if (click) {
      if (hit.count == 1) {
        st.select(doc_index, s.op);
      } else {
        st.clear_selection();
      }
    }
  } else if (click) {
    st.clear_selection();
  }
}

// One document's rows in a scrolling child of `size`, right of a gutter of `gutter` px.
void draw_rows(ViewState& st, int doc_index, ImVec2 size, float gutter, const char* id) {
  ImGui::BeginChild(id, size, false,
                    ImGuiWindowFlags_NoScrollWithMouse | ImGuiWindowFlags_AlwaysVerticalScrollbar);
  if (st.scroll_request >= 0) ImGui::SetScrollY(st.scroll_request);
  const TimelineLayout& layout = st.layouts[doc_index];
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const ImVec2 win_pos = ImGui::GetWindowPos();
  // The same drawing area as the ruler's: the child always shows its scrollbar.
  Area a{win_pos.x + gutter, win_pos.x + size.x - ImGui::GetStyle().ScrollbarSize};
  st.timeline_width_px = std::max(1.0f, a.width());

  const float scroll = ImGui::GetScrollY();
  const float view_h = ImGui::GetWindowHeight();
  const auto [first, last] = layout.rows_between(scroll, scroll + view_h);
  std::vector<Block> blocks;
  for (int r = first; r < last; ++r) {
    const Row& row = layout.rows[r];
    if (row.kind == Row::Kind::group) {
      const float y0 = origin.y + row.y;
      dl->AddRectFilled(ImVec2(win_pos.x, y0), ImVec2(a.x1, y0 + row.height - 2),
                        IM_COL32(52, 56, 70, 255));
      dl->AddText(ImVec2(win_pos.x + 6, y0 + 1), IM_COL32(200, 210, 255, 255), row.label.c_str());
      continue;
    }
    dl->PushClipRect(ImVec2(win_pos.x, origin.y + row.y - 2),
                     ImVec2(a.x1, origin.y + row.y + row.height + 2), true);
    draw_rank_row(st, doc_index, row, dl, a, gutter, origin.y, blocks);
    dl->PopClipRect();
  }
  dl->PushClipRect(ImVec2(a.x0, win_pos.y), ImVec2(a.x1, win_pos.y + view_h), true);
  draw_dependency_lines(st, doc_index, dl, a, origin.y);
  if (st.has_range) {
    const float rx0 =
        a.x0 + static_cast<float>(st.time.to_px(std::min(st.range_begin_s, st.range_end_s)));
    const float rx1 =
        a.x0 + static_cast<float>(st.time.to_px(std::max(st.range_begin_s, st.range_end_s)));
    dl->AddRectFilled(ImVec2(rx0, win_pos.y), ImVec2(rx1, win_pos.y + view_h),
                      im_col(palette::kSelection));
  }
  if (st.cursor_s >= 0) {
    const float x = a.x0 + static_cast<float>(st.time.to_px(st.cursor_s));
    dl->AddLine(ImVec2(x, win_pos.y), ImVec2(x, win_pos.y + view_h), im_col(palette::kCursor));
  }
  dl->PopClipRect();

  ImGui::SetCursorScreenPos(ImVec2(a.x0, origin.y));
  ImGui::InvisibleButton("area", ImVec2(std::max(1.0f, a.width()), std::max(1.0f, layout.height)),
                         ImGuiButtonFlags_MouseButtonLeft | ImGuiButtonFlags_MouseButtonRight);
  handle_input(st, doc_index, a, origin.y);
  ImGui::EndChild();
}

// The gutter: wide enough for the longest rank label of the rows shown and its idle
// fraction ("rank 9 · stage 1 · dp 0 · tp 1  43% idle"), at least kGutterPx.
float gutter_px(const ViewState& st, bool paired) {
  float w = kGutterPx;
  for (int i : {st.primary, paired ? st.pair : -1}) {
    if (i < 0 || i >= static_cast<int>(st.layouts.size())) continue;
    const TimelineLayout& l = st.layouts[i];
    if (l.widest_label < 0) continue;
    const float label = ImGui::CalcTextSize(l.rows[l.widest_label].label.c_str()).x;
    w = std::max(w, 8 + label + 8 + ImGui::CalcTextSize("100% idle").x + 8);
  }
  return std::ceil(w);
}

void draw_legend(ViewState& st) {
  // Kinds present, apart for tensor-parallel collectives (their own colours).
  bool present[2][result::kSpanKindCount] = {};
  for (int i : {st.primary, st.overlay, st.pair}) {
    if (i < 0 || i >= static_cast<int>(st.docs.size())) continue;
    const Document& d = *st.docs[i];
    for (int r = 0; r < d.world(); ++r) {
      if (d.resolved_rank(r) != r) continue;
      for (const auto& s : d.spans(r))
        present[is_tensor_parallel(s)][static_cast<int>(s.kind)] = true;
    }
  }
  bool first = true;
  for (const auto& e : kind_legend()) {
    if (!present[e.tensor_parallel][static_cast<int>(e.kind)]) continue;
    legend_item(e.color, e.label.c_str(), first);
  }
  legend_item(palette::kBubble, "idle (bubble)", first);
  if (st.overlay >= 0) legend_item(palette::kHighlight, "outlines: overlay", first);
  if (st.sel_doc >= 0) {
    legend_item(palette::kUpstream, "waits for", first);
    legend_item(palette::kDownstream, "feeds", first);
  }
}

}  // namespace

void legend_item(Rgba color, const char* label, bool& first) {
  const float sw = ImGui::GetTextLineHeight() * 0.8f;
  const float w = sw + 4 + ImGui::CalcTextSize(label).x + 14;
  if (!first) {
    ImGui::SameLine();
    if (ImGui::GetContentRegionAvail().x < w) ImGui::NewLine();
  }
  first = false;
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const float h = ImGui::GetTextLineHeight();
  ImGui::GetWindowDrawList()->AddRectFilled(ImVec2(p.x, p.y + (h - sw) * 0.5f),
                                            ImVec2(p.x + sw, p.y + (h + sw) * 0.5f), im_col(color));
  ImGui::Dummy(ImVec2(sw + 2, h));
  ImGui::SameLine();
  ImGui::TextUnformatted(label);
}

void draw_timeline_panel(ViewState& st, ImVec2 size) {
  ImGui::BeginChild("timeline", size, true,
                    ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
  if (st.docs.empty()) {
    ImGui::TextUnformatted("No result loaded.");
    ImGui::EndChild();
    return;
  }
  const Document& doc = *st.docs[st.primary];
  const auto& m = doc.result().metrics;
  const bool what_if_error =
      st.what_if && st.primary == st.what_if->doc && !st.what_if->error.empty();
  if (what_if_error) {
    ImGui::Text("Timeline: %s", doc.label().c_str());
  } else {
    ImGui::Text("Timeline: %s (%s)  step %s · bubble %.1f%% · %d ranks", doc.label().c_str(),
                doc.result().executor.c_str(), format_duration(m.step_time_s).c_str(),
                100 * m.bubble_fraction, doc.world());
  }
  if (st.has_range) {
    const double b = std::min(st.range_begin_s, st.range_end_s);
    const double e = std::max(st.range_begin_s, st.range_end_s);
    ImGui::SameLine();
    ImGui::TextColored(ImVec4(0.6f, 0.75f, 1, 1), "  selection %s (%s to %s)",
                       format_duration(e - b).c_str(), format_duration(b).c_str(),
                       format_duration(e).c_str());
  }
  if (!st.sel_note.empty()) {
    ImGui::SameLine();
    ImGui::TextColored(ImVec4(1, 0.6f, 0.3f, 1), "  %s", st.sel_note.c_str());
  }
  ImGui::SameLine();
  ImGui::TextDisabled("  (?)");
  if (ImGui::IsItemHovered()) {
    ImGui::SetTooltip(
        "wheel: zoom at the mouse · drag: pan · shift+wheel: scroll ranks\n"
        "right-drag or shift+drag: select a range (its duration shows above)\n"
        "click an op: highlight what it waits for and what waits for it\n"
        "double-click: fit the step");
  }
  draw_legend(st);

  if (what_if_error) {
    ImGui::Spacing();
    ImGui::TextColored(ImVec4(1, 0.4f, 0.4f, 1), "This combination cannot run:");
    ImGui::TextWrapped("%s", st.what_if->error.c_str());
    ImGui::EndChild();
    return;
  }

  // Ruler across the drawing area.
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const float avail_w = ImGui::GetContentRegionAvail().x;
  const bool paired =
      st.pair >= 0 && st.pair != st.primary && st.pair < static_cast<int>(st.docs.size());
  const float gutter = gutter_px(st, paired);
  const Area a{p.x + gutter, p.x + avail_w - ImGui::GetStyle().ScrollbarSize};
  st.timeline_width_px = std::max(1.0f, a.width());
  if (st.fit_pending) {
    st.time.fit(0, st.end_s(), a.width());
    st.fit_pending = false;
  }
  st.time.clamp(0, st.end_s(), a.width());
  draw_ruler(st, ImGui::GetWindowDrawList(), a, p.y);
  ImGui::Dummy(ImVec2(avail_w, kRulerPx + 2));

  const float body_h = ImGui::GetContentRegionAvail().y;
  if (!paired) {
    draw_rows(st, st.primary, ImVec2(avail_w, body_h), gutter, "rows");
  } else {
    const float line = ImGui::GetTextLineHeightWithSpacing();
    const float h = (body_h - 2 * line) * 0.5f;
    ImGui::TextColored(ImVec4(0.7f, 0.8f, 1, 1), "A: %s", st.docs[st.primary]->label().c_str());
    draw_rows(st, st.primary, ImVec2(avail_w, h), gutter, "rows_a");
    ImGui::TextColored(ImVec4(0.7f, 0.8f, 1, 1), "B: %s (same time scale)",
                       st.docs[st.pair]->label().c_str());
    draw_rows(st, st.pair, ImVec2(avail_w, h), gutter, "rows_b");
  }
  st.scroll_request = -1;
  ImGui::EndChild();
}

}  // namespace stratagem::viz
