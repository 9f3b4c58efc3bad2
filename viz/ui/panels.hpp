#pragma once
// The viewer's panels, one file each (Tracy's View_Timeline / View_Memory split). Each draws
// into the current ImGui window, inside a child of the given size.
#include <imgui.h>

#include "viz/model/aggregate.hpp"
#include "viz/model/colors.hpp"
#include "viz/ui/view_state.hpp"

namespace stratagem::viz {

inline ImU32 im_col(Rgba c) {
  return pack(c);
}

void draw_toolbar(ViewState& state);
void draw_timeline_panel(ViewState& state, ImVec2 size);
void draw_memory_panel(ViewState& state, ImVec2 size);
void draw_compare_panel(ViewState& state, ImVec2 size);
void draw_what_if_panel(ViewState& state, ImVec2 size);

/// The timeline's tooltip for block `b` of `rank` in `doc`: its first span `s` and, for a
/// merged block of `count` > 1 spans, their time range.
void span_tooltip(const Document& doc, int rank, const result::Span& s, int count, const Block& b,
                  const TimeView& view);

/// A colour swatch followed by its label, wrapping to the next line when the row is full.
void legend_item(Rgba color, const char* label, bool& first);

}  // namespace stratagem::viz
