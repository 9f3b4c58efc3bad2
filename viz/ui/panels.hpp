#pragma once
// The viewer's panels, one file each (Tracy's View_Timeline / View_Memory split). Each draws
// into the current ImGui window, inside a child of the given size.
#include <imgui.h>

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

/// A colour swatch followed by its label, wrapping to the next line when the row is full.
void legend_item(Rgba color, const char* label, bool& first);

}  // namespace stratagem::viz
