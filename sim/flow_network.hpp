#pragma once
// Transfers that share links. Each link (one rank's NIC or NVLink port, one direction) splits
// its bandwidth equally between the flows on it, and a flow advances at the smallest share
// among its links. When a flow starts or ends, the flows that share a link with it get their
// rate recomputed and their completion event rescheduled (older events go stale by version).
// A flow's work is in seconds at full bandwidth, so flows on links of different speeds mix.
#include <cstdint>
#include <span>
#include <vector>

#include "sim/event_queue.hpp"

namespace stratagem::sim {

class FlowNetwork {
 public:
  /// Forgets all flows; `links` link ids 0..links−1. Keeps storage. Completion events are
  /// pushed to `queue` with kind `event_kind`, index = flow id and the flow's version.
  void reset(int links, EventQueue* queue, std::uint32_t event_kind);
  /// Starts a flow that needs `work_s` seconds alone on `links`; returns its id. While one of
  /// its links is busy (set_link_busy) it runs 1 + `busy_slowdown` times slower there.
  int start(double now_s, std::span<const int> links, double work_s, int owner,
            double busy_slowdown = 0);
  /// Whether a popped completion event is the flow's latest (not superseded).
  bool current(int flow, std::uint32_t version) const {
    return flows_[flow].active && flows_[flow].version == version;
  }
  int owner(int flow) const { return flows_[flow].owner; }
  /// Removes a completed flow; the flows it shared links with speed up.
  void finish(double now_s, int flow);
  int active() const { return active_; }
  /// The rate (fraction of full bandwidth) a flow currently runs at.
  double rate(int flow) const { return flows_[flow].rate; }
  /// Marks `link` busy (its rank computes on the cores or SMs communication also needs) or
  /// free; the flows on it are re-rated.
  void set_link_busy(double now_s, int link, bool busy);

 private:
  struct Flow {
    std::vector<int> links;
    double remaining_s = 0;  ///< work left at full bandwidth, as of last_s
    double rate = 1;
    double last_s = 0;
    std::uint32_t version = 0;
    int owner = -1;
    double busy_slowdown = 0;
    std::uint32_t stamp = 0;
    bool active = false;
  };
  double share(const Flow& f) const;
  void update_neighbours(double now_s, const Flow& changed, int changed_id);
  /// Recomputes flow `id`'s rate (once per stamp) and reschedules its completion if it changed.
  void rerate(double now_s, int id);

  /// The flows on `link` (empty for a link that never carried one).
  const std::vector<int>& on_link(int link) const {
    const int s = link_slot_[static_cast<std::size_t>(link)];
    return s < 0 ? no_flows_ : slots_[static_cast<std::size_t>(s)];
  }
  std::vector<int>& on_link_for_write(int link);

  std::vector<Flow> flows_;
  std::vector<int> free_;
  // Flow lists only for links that carried a flow: a million-GPU plan has four million links,
  // of which only the built ranks' are ever used (per link: 4 bytes, not a vector).
  std::vector<int> link_slot_;  ///< per link: index into slots_, or -1
  std::vector<std::vector<int>> slots_;
  std::vector<int> no_flows_;
  int used_slots_ = 0;
  std::vector<char> link_busy_;
  EventQueue* queue_ = nullptr;
  std::uint32_t event_kind_ = 0;
  std::uint32_t stamp_ = 0;
  int active_ = 0;
};

}  // namespace stratagem::sim
