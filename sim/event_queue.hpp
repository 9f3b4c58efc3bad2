#pragma once
// The simulator's event queue: a binary heap ordered by (time, sequence). Events at the
// same time pop in the order they were pushed, so a run is deterministic. An instance owns
// all its state (no statics, no wall clock); clear() keeps the storage for the next run.
#include <cstdint>
#include <vector>

namespace stratagem::sim {

struct Event {
  double time_s = 0;
  std::uint64_t seq = 0;
  std::uint32_t kind = 0;     ///< what the owner of the queue dispatches on
  std::int32_t index = 0;     ///< op, flow or activity the event is about
  std::uint32_t version = 0;  ///< lets the owner ignore events superseded by a reschedule
};

class EventQueue {
 public:
  void push(double time_s, std::uint32_t kind, std::int32_t index, std::uint32_t version = 0);
  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  const Event& top() const { return heap_.front(); }
  Event pop();
  /// Empties the queue and restarts sequence numbers; keeps the allocated storage.
  void clear();
  void reserve(std::size_t n) { heap_.reserve(n); }
  std::uint64_t pushed() const { return next_seq_; }

 private:
  std::vector<Event> heap_;
  std::uint64_t next_seq_ = 0;
};

}  // namespace stratagem::sim
