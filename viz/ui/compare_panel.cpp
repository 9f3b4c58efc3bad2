// Throughput and comparison: every loaded result (files, strategy variants, what-if
// snapshots) with bars of step time, tokens/s, MFU, bubble fraction, exposed communication
// and peak memory; pick which one the timeline shows, which one goes below it on the same
// time scale, and which one is overlaid on it.
#include <algorithm>

#include "viz/model/compare.hpp"
#include "viz/ui/panels.hpp"

namespace stratagem::viz {
namespace {

// Distinct colours for documents in the bars (cycled past eight).
Rgba doc_color(std::size_t i) {
  static const Rgba colors[] = {{66, 133, 244, 255}, {52, 168, 83, 255}, {251, 192, 45, 255},
                                {171, 71, 188, 255}, {0, 172, 193, 255}, {255, 112, 67, 255},
                                {158, 157, 36, 255}, {236, 64, 122, 255}};
  return colors[i % (sizeof colors / sizeof colors[0])];
}

void pick_table(ViewState& st) {
  const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV |
                                ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_ScrollY;
  const float row = ImGui::GetFrameHeightWithSpacing();
  const float h = std::min(row * (static_cast<float>(st.docs.size()) + 1.3f),
                           ImGui::GetContentRegionAvail().y * 0.4f);
  if (!ImGui::BeginTable("docs", 6, flags, ImVec2(0, h))) return;
  ImGui::TableSetupColumn("A");
  ImGui::TableSetupColumn("B");
  ImGui::TableSetupColumn("overlay");
  ImGui::TableSetupColumn("result");
  ImGui::TableSetupColumn("from");
  ImGui::TableSetupColumn("strategy", ImGuiTableColumnFlags_WidthStretch);
  ImGui::TableSetupScrollFreeze(0, 1);
  ImGui::TableHeadersRow();
  for (int i = 0; i < static_cast<int>(st.docs.size()); ++i) {
    const Document& d = *st.docs[i];
    ImGui::PushID(i);
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    if (ImGui::RadioButton("##a", st.primary == i)) {
      st.primary = i;
      if (st.pair == i) st.pair = -1;
      if (st.overlay == i) st.overlay = -1;
      st.clear_selection();
    }
    ImGui::TableNextColumn();
    if (ImGui::RadioButton("##b", st.pair == i)) st.pair = st.pair == i ? -1 : i;
    ImGui::TableNextColumn();
    if (ImGui::RadioButton("##o", st.overlay == i)) st.overlay = st.overlay == i ? -1 : i;
    ImGui::TableNextColumn();
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(im_col(doc_color(i))), "%s",
                       d.label().c_str());
    ImGui::TableNextColumn();
    ImGui::Text("%s, %d GPUs", d.result().executor.c_str(), d.world());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(strategy_summary(d.result().scenario).c_str());
    if (d.any_oom()) {
      ImGui::SameLine();
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(im_col(palette::kOom)), " OOM");
    }
    ImGui::PopID();
  }
  ImGui::EndTable();
}

void metric_bars(const ViewState& st, CompareMetric m, float width) {
  const MetricInfo info = metric_info(m);
  ImGui::Text("%s", info.title);
  ImGui::SameLine();
  ImGui::TextDisabled(info.higher_is_better ? "(higher is better)" : "(lower is better)");
  const float label_w = std::min(130.0f, width * 0.3f);
  const float value_w = 90;
  const float bar_max = std::max(width - label_w - value_w - 12, 10.0f);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float h = ImGui::GetTextLineHeight();
  for (const CompareBar& b : compare_bars(st.docs, m)) {
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const Document& d = *st.docs[b.doc];
    ImGui::PushClipRect(p, ImVec2(p.x + label_w - 4, p.y + h + 2), true);
    dl->AddText(p, IM_COL32(220, 220, 220, 255), d.label().c_str());
    ImGui::PopClipRect();
    const float bx = p.x + label_w;
    const float bw = std::max(1.0f, static_cast<float>(b.fraction) * bar_max);
    dl->AddRectFilled(ImVec2(bx, p.y + 1), ImVec2(bx + bw, p.y + h - 1), im_col(doc_color(b.doc)));
    std::string value = format_metric(m, b.value);
    if (m == CompareMetric::peak_memory && d.any_oom()) value += " OOM";
    const ImU32 col = b.best && st.docs.size() > 1 ? IM_COL32(120, 230, 120, 255)
                      : (m == CompareMetric::peak_memory && d.any_oom())
                          ? im_col(palette::kOom)
                          : IM_COL32(220, 220, 220, 255);
    dl->AddText(ImVec2(bx + bw + 6, p.y), col, value.c_str());
    ImGui::Dummy(ImVec2(width, h + 2));
  }
}

}  // namespace

void draw_compare_panel(ViewState& st, ImVec2 size) {
  ImGui::BeginChild("compare", size, true);
  if (st.docs.empty()) {
    ImGui::TextUnformatted("No result loaded.");
    ImGui::EndChild();
    return;
  }
  ImGui::TextUnformatted("Throughput and comparison");
  ImGui::SameLine();
  ImGui::TextDisabled(
      "A: timeline · B: below it on the same time scale · overlay: drawn on A's lanes");
  pick_table(st);
  ImGui::Spacing();
  const float avail = ImGui::GetContentRegionAvail().x;
  const int columns = avail > 900 ? 3 : avail > 560 ? 2 : 1;
  const float col_w = avail / columns - 8;
  for (int i = 0; i < kCompareMetricCount; ++i) {
    if (i % columns != 0)
      ImGui::SameLine(static_cast<float>(i % columns) * (col_w + 8) +
                      ImGui::GetStyle().WindowPadding.x);
    ImGui::BeginGroup();
    metric_bars(st, static_cast<CompareMetric>(i), col_w);
    ImGui::Spacing();
    ImGui::EndGroup();
  }
  if (!st.notes.empty()) {
    ImGui::Spacing();
    for (const auto& n : st.notes) ImGui::TextDisabled("%s", n.c_str());
  }
  ImGui::EndChild();
}

}  // namespace stratagem::viz
