#pragma once
// What the viewer shows and what the user has done: the loaded documents and their layouts,
// the shared time view, cursor, range and op selection, and the what-if session. Panels read
// and change it; it holds no ImGui types, so one frame's state is plain data.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/scenario/scenario.hpp"
#include "viz/model/dependencies.hpp"
#include "viz/model/layout.hpp"
#include "viz/model/sim_worker.hpp"
#include "viz/model/time_axis.hpp"
#include "viz/model/whatif.hpp"

namespace stratagem::viz {

/// Ops narrower than this many pixels merge into one block (drawing and hit-testing agree).
inline constexpr double kMinBlockPx = 1.0;

struct WhatIfSession {
  scenario::Scenario base;
  WhatIf knobs;
  WhatIf submitted;  ///< the knobs last validated
  bool has_submitted = false;
  std::uint64_t awaited = 0;  ///< request whose outcome the panel waits for (0: none)
  std::string error;          ///< why the current knobs are invalid ("" when valid)
  int doc = -1;               ///< index of the what-if document in ViewState::docs
  double last_wall_s = 0;     ///< how long the newest simulation took
  int kept = 0;               ///< snapshots kept for comparison
  std::unique_ptr<SimWorker> worker;
};

class ViewState {
 public:
  std::vector<std::shared_ptr<Document>> docs;
  std::vector<TimelineLayout> layouts;  ///< parallel to docs
  LayoutOptions layout_options;
  std::vector<std::string> notes;  ///< messages for the user (skipped variants, ...)

  int primary = 0;   ///< the timeline's document
  int overlay = -1;  ///< drawn over the primary's lanes (a real run over its simulation)
  int pair = -1;     ///< drawn below the primary on the same time scale

  TimeView time;
  bool fit_pending = true;
  float timeline_width_px = 1;  ///< width of the timeline's drawing area last frame
  double cursor_s = -1;         ///< the timeline's cursor (mouse time); < 0: none
  bool has_range = false;
  double range_begin_s = 0, range_end_s = 0;
  float scroll_request = -1;  ///< scroll the timeline rows to this y next frame
  bool selecting = false;     ///< a range selection is being dragged

  int sel_doc = -1;
  plan::OpId sel_op = plan::kNoOp;
  std::vector<Mark> marks;  ///< per op id of sel_doc's plan
  struct MarkedOp {
    plan::OpId op = plan::kNoOp;
    Mark mark = Mark::none;
    int rank = -1, lane = -1, span = -1;  ///< where sel_doc draws it
  };
  std::vector<MarkedOp> marked;  ///< the selection and its marked ops, located
  std::string sel_note;          ///< why dependencies are not shown

  std::optional<WhatIfSession> what_if;
  int bottom_tab = 0;  ///< 0 comparison, 1 what-if

  void add_doc(std::shared_ptr<Document> doc);
  void replace_doc(int index, std::shared_ptr<Document> doc);
  void relayout();
  /// End of the longest document shown.
  double end_s() const;
  /// Selects `op` of document `doc` and marks its dependencies (rebuilding the plan once).
  void select(int doc, plan::OpId op);
  void clear_selection();
  /// Starts the what-if session on `base` with `knobs`; simulates them at once or waits for
  /// the first change.
  void start_what_if(const scenario::Scenario& base, const WhatIf& knobs, bool simulate_now);
  /// Validates the knobs and submits a simulation when they changed.
  void submit_what_if();
  /// Takes a finished simulation, if any. Returns true when the picture changed.
  bool poll_what_if();

 private:
  std::vector<std::unique_ptr<Dependencies>> deps_;  ///< per document, built on first click
};

}  // namespace stratagem::viz
