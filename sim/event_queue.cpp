#include "sim/event_queue.hpp"

#include <algorithm>

namespace stratagem::sim {

namespace {
// std heaps are max-heaps: "a after b" puts the earliest (time, seq) on top. A function
// object, not a function pointer, so the heap operations inline it.
struct Later {
  bool operator()(const Event& a, const Event& b) const {
    if (a.time_s != b.time_s) return a.time_s > b.time_s;
    return a.seq > b.seq;
  }
};
constexpr Later later{};
}  // namespace

void EventQueue::push(double time_s, std::uint32_t kind, std::int32_t index,
                      std::uint32_t version) {
  heap_.push_back(Event{time_s, next_seq_++, kind, index, version});
  std::push_heap(heap_.begin(), heap_.end(), later);
}

Event EventQueue::pop() {
  std::pop_heap(heap_.begin(), heap_.end(), later);
  Event e = heap_.back();
  heap_.pop_back();
  return e;
}

void EventQueue::clear() {
  heap_.clear();
  next_seq_ = 0;
}

}  // namespace stratagem::sim
