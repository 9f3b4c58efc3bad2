#pragma once
// Scripted mouse input for headless runs: `--input "wheel 800,300 3; drag 900,300 700,300"`
// expands into per-frame mouse states the viewer feeds to ImGui before its screenshot, so
// docs/viewer.md pictures (a tooltip, a range selection) and tests exercise the real input code.
//
// Actions, separated by ';' (coordinates in window pixels):
//   move X,Y             put the mouse there (it stays for the following actions)
//   click X,Y            press and release the left button there
//   drag X1,Y1 X2,Y2     left-drag (pans the timeline)
//   rdrag X1,Y1 X2,Y2    right-drag (selects a time range)
//   wheel X,Y N          scroll N notches there (positive zooms in)
#include <string>
#include <vector>

namespace stratagem::viz {

struct InputFrame {
  float x = 0, y = 0;
  bool left = false, right = false;
  float wheel = 0;
};

/// Throws SpecError (path "--input") on a malformed script.
std::vector<InputFrame> parse_input_script(const std::string& script);

}  // namespace stratagem::viz
