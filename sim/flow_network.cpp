#include "sim/flow_network.hpp"

#include <algorithm>

namespace stratagem::sim {

void FlowNetwork::reset(int links, EventQueue* queue, std::uint32_t event_kind) {
  for (auto& l : slots_) l.clear();
  used_slots_ = 0;
  link_slot_.assign(static_cast<std::size_t>(links), -1);
  link_busy_.assign(static_cast<std::size_t>(links), 0);
  free_.clear();
  for (int i = static_cast<int>(flows_.size()) - 1; i >= 0; --i) {
    flows_[i].active = false;
    free_.push_back(i);
  }
  queue_ = queue;
  event_kind_ = event_kind;
  active_ = 0;
}

std::vector<int>& FlowNetwork::on_link_for_write(int link) {
  int& s = link_slot_[static_cast<std::size_t>(link)];
  if (s < 0) {
    s = used_slots_++;
    if (static_cast<std::size_t>(s) == slots_.size()) slots_.emplace_back();
  }
  return slots_[static_cast<std::size_t>(s)];
}

double FlowNetwork::share(const Flow& f) const {
  double rate = 1.0;
  const double busy = 1.0 / (1.0 + f.busy_slowdown);
  for (int l : f.links) {
    const double factor = link_busy_[l] ? busy : 1.0;
    rate = std::min(rate,
                    factor / static_cast<double>(std::max<std::size_t>(1, on_link(l).size())));
  }
  return rate;
}

void FlowNetwork::set_link_busy(double now_s, int link, bool busy) {
  if ((link_busy_[link] != 0) == busy) return;
  link_busy_[link] = busy ? 1 : 0;
  ++stamp_;
  for (int g_id : on_link(link)) rerate(now_s, g_id);
}

void FlowNetwork::rerate(double now_s, int id) {
  Flow& g = flows_[id];
  if (g.stamp == stamp_) return;
  g.stamp = stamp_;
  const double rate = share(g);
  if (rate == g.rate) return;
  g.remaining_s = std::max(0.0, g.remaining_s - g.rate * (now_s - g.last_s));
  g.last_s = now_s;
  g.rate = rate;
  ++g.version;
  queue_->push(now_s + g.remaining_s / g.rate, event_kind_, id, g.version);
}

int FlowNetwork::start(double now_s, std::span<const int> links, double work_s, int owner,
                       double busy_slowdown) {
  int id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else {
    id = static_cast<int>(flows_.size());
    flows_.emplace_back();
  }
  Flow& f = flows_[id];
  f.links.assign(links.begin(), links.end());
  for (int l : f.links) on_link_for_write(l).push_back(id);
  f.remaining_s = work_s;
  f.last_s = now_s;
  f.owner = owner;
  f.busy_slowdown = busy_slowdown;
  f.active = true;
  f.rate = share(f);
  ++f.version;
  queue_->push(now_s + f.remaining_s / f.rate, event_kind_, id, f.version);
  ++active_;
  update_neighbours(now_s, f, id);
  return id;
}

void FlowNetwork::finish(double now_s, int flow) {
  Flow& f = flows_[flow];
  for (int l : f.links) {
    auto& flows = on_link_for_write(l);
    auto it = std::find(flows.begin(), flows.end(), flow);
    if (it != flows.end()) flows.erase(it);  // keeps the others' order: determinism
  }
  f.active = false;
  ++f.version;
  --active_;
  free_.push_back(flow);
  update_neighbours(now_s, f, flow);
}

void FlowNetwork::update_neighbours(double now_s, const Flow& changed, int changed_id) {
  ++stamp_;
  for (int l : changed.links) {
    for (int g_id : on_link(l)) {
      if (g_id != changed_id) rerate(now_s, g_id);
    }
  }
}

}  // namespace stratagem::sim
