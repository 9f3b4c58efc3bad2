#include "viz/ui/view_state.hpp"

#include <algorithm>

#include "engine/scenario/error.hpp"

namespace stratagem::viz {

void ViewState::add_doc(std::shared_ptr<Document> doc) {
  layouts.push_back(layout_timeline(*doc, layout_options));
  docs.push_back(std::move(doc));
  deps_.emplace_back();
}

void ViewState::replace_doc(int index, std::shared_ptr<Document> doc) {
  layouts.at(index) = layout_timeline(*doc, layout_options);
  docs.at(index) = std::move(doc);
  deps_.at(index).reset();
  if (sel_doc == index) clear_selection();
}

void ViewState::relayout() {
  for (std::size_t i = 0; i < docs.size(); ++i)
    layouts[i] = layout_timeline(*docs[i], layout_options);
}

double ViewState::end_s() const {
  double end = 0;
  for (int i : {primary, overlay, pair}) {
    if (i >= 0 && i < static_cast<int>(docs.size())) end = std::max(end, docs[i]->end_s());
  }
  return end > 0 ? end : 1e-3;  // an empty result still gets a (1 ms) time axis
}

void ViewState::clear_selection() {
  sel_doc = -1;
  sel_op = plan::kNoOp;
  marks.clear();
  marked.clear();
  sel_note.clear();
}

void ViewState::select(int doc, plan::OpId op) {
  clear_selection();
  if (doc < 0 || doc >= static_cast<int>(docs.size()) || op == plan::kNoOp) return;
  sel_doc = doc;
  sel_op = op;
  auto& deps = deps_.at(doc);
  if (!deps) {
    try {
      deps = std::make_unique<Dependencies>(plan_for(*docs[doc]), *docs[doc]);
    } catch (const SpecError& e) {
      sel_note = std::string("no dependencies: ") + e.what();
      return;
    }
  }
  if (!deps->ok()) {
    sel_note = "no dependencies: " + deps->error();
    return;
  }
  const auto plan = plan_for(*docs[doc]);
  marks = mark_dependencies(*deps, plan->ops.size(), op);
  // Locate the marked ops among the spans, for the dependency lines.
  const Document& d = *docs[doc];
  for (std::size_t id = 0; id < marks.size(); ++id) {
    if (marks[id] == Mark::none) continue;
    MarkedOp m;
    m.op = static_cast<plan::OpId>(id);
    m.mark = marks[id];
    m.rank = plan->ops[id].rank;
    if (m.rank < 0 || m.rank >= d.world()) continue;
    const auto& spans = d.spans(m.rank);
    const auto& lanes = d.lanes(m.rank);
    for (int l = 0; l < static_cast<int>(lanes.size()) && m.span < 0; ++l) {
      for (int i : lanes[l].spans) {
        if (spans[i].op == m.op) {
          m.lane = l;
          m.span = i;
          break;
        }
      }
    }
    if (m.span >= 0) marked.push_back(m);
  }
}

void ViewState::start_what_if(const scenario::Scenario& base, const WhatIf& knobs,
                              bool simulate_now) {
  WhatIfSession s;
  s.base = base;
  s.knobs = knobs;
  s.worker = std::make_unique<SimWorker>();
  if (!simulate_now) {
    // Nothing to show until the first change: the knobs count as already simulated.
    s.submitted = knobs;
    s.has_submitted = true;
  }
  what_if = std::move(s);
  submit_what_if();
}

void ViewState::submit_what_if() {
  auto& w = *what_if;
  if (w.has_submitted && w.knobs == w.submitted) return;
  w.has_submitted = true;
  w.submitted = w.knobs;
  try {
    scenario::Scenario s = apply_what_if(w.base, w.knobs);
    w.error.clear();
    // Named after the scenario until a knob differs from it.
    const std::string label = w.knobs == what_if_of(w.base) ? w.base.name : "what-if";
    w.awaited = w.worker->submit(std::move(s), label);
  } catch (const SpecError& e) {
    w.error = e.what();
    w.awaited = 0;
  }
}

bool ViewState::poll_what_if() {
  if (!what_if) return false;
  auto& w = *what_if;
  auto outcome = w.worker->poll();
  // Outcomes of superseded edits are dropped: the panel describes the current knobs.
  if (!outcome || outcome->request != w.awaited) return false;
  w.last_wall_s = outcome->wall_s;
  w.awaited = 0;
  if (!outcome->doc) {
    w.error = outcome->error;
    return true;
  }
  if (w.doc < 0) {
    add_doc(outcome->doc);
    w.doc = static_cast<int>(docs.size()) - 1;
  } else {
    replace_doc(w.doc, outcome->doc);
  }
  return true;
}

}  // namespace stratagem::viz
