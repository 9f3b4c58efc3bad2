#include "viz/model/dependencies.hpp"

#include "engine/plan/builder.hpp"

namespace stratagem::viz {

std::shared_ptr<const plan::StepPlan> plan_for(const Document& doc) {
  if (doc.plan()) return doc.plan();
  bool folded = false;
  for (const auto& r : doc.result().ranks) folded = folded || r.same_as >= 0;
  plan::BuildOptions options;
  options.fold = folded;
  return std::make_shared<const plan::StepPlan>(plan::build_plan(doc.result().scenario, options));
}

Dependencies::Dependencies(std::shared_ptr<const plan::StepPlan> plan, const Document& doc)
    : plan_(std::move(plan)) {
  const auto& ops = plan_->ops;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].id != static_cast<plan::OpId>(i)) {
      error_ = "the plan's op ids are not its op indices";
      return;
    }
  }
  for (const auto& rr : doc.result().ranks) {
    for (const auto& s : rr.spans) {
      const bool known = s.op >= 0 && s.op < static_cast<plan::OpId>(ops.size());
      if (!known || ops[s.op].rank != rr.rank || result::span_kind_of(ops[s.op]) != s.kind) {
        error_ = "rank " + std::to_string(rr.rank) + " op " + std::to_string(s.op) + " (" +
                 result::to_string(s.kind) + ") is not in the plan rebuilt from the scenario";
        return;
      }
    }
  }
  // Reverse edges as compressed rows.
  rev_begin_.assign(ops.size() + 1, 0);
  for (const auto& op : ops) {
    for (plan::OpId d : plan_->deps_of(op)) ++rev_begin_[d + 1];
  }
  for (std::size_t i = 1; i < rev_begin_.size(); ++i) rev_begin_[i] += rev_begin_[i - 1];
  rev_.resize(rev_begin_.back());
  std::vector<std::uint32_t> fill(rev_begin_.begin(), rev_begin_.end() - 1);
  for (const auto& op : ops) {
    for (plan::OpId d : plan_->deps_of(op)) rev_[fill[d]++] = op.id;
  }
}

std::vector<plan::OpId> Dependencies::upstream(plan::OpId id) const {
  std::vector<plan::OpId> out;
  if (!ok() || id < 0 || id >= static_cast<plan::OpId>(plan_->ops.size())) return out;
  const auto& op = plan_->ops[id];
  for (plan::OpId d : plan_->deps_of(op)) out.push_back(d);
  if (const auto* p = std::get_if<plan::P2P>(&op.payload); p && !p->send) {
    out.push_back(plan_->transfers.at(p->transfer).send);
  }
  return out;
}

std::vector<plan::OpId> Dependencies::downstream(plan::OpId id) const {
  std::vector<plan::OpId> out;
  if (!ok() || id < 0 || id >= static_cast<plan::OpId>(plan_->ops.size())) return out;
  out.assign(rev_.begin() + rev_begin_[id], rev_.begin() + rev_begin_[id + 1]);
  const auto& op = plan_->ops[id];
  if (const auto* p = std::get_if<plan::P2P>(&op.payload); p && p->send) {
    out.push_back(plan_->transfers.at(p->transfer).recv);
  }
  return out;
}

std::vector<plan::OpId> Dependencies::peers(plan::OpId id) const {
  std::vector<plan::OpId> out;
  if (!ok() || id < 0 || id >= static_cast<plan::OpId>(plan_->ops.size())) return out;
  if (const auto* c = std::get_if<plan::Collective>(&plan_->ops[id].payload)) {
    for (plan::OpId o : plan_->collectives.at(c->instance).ops) {
      if (o != id) out.push_back(o);
    }
  }
  return out;
}

std::vector<Mark> mark_dependencies(const Dependencies& deps, std::size_t op_count,
                                    plan::OpId selected) {
  std::vector<Mark> marks(op_count, Mark::none);
  auto mark = [&](plan::OpId id, Mark m) {
    if (id >= 0 && static_cast<std::size_t>(id) < op_count && marks[id] == Mark::none) {
      marks[id] = m;
    }
  };
  mark(selected, Mark::selected);
  for (plan::OpId id : deps.upstream(selected)) mark(id, Mark::upstream);
  for (plan::OpId id : deps.downstream(selected)) mark(id, Mark::downstream);
  for (plan::OpId id : deps.peers(selected)) mark(id, Mark::peer);
  return marks;
}

}  // namespace stratagem::viz
