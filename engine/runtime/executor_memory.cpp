#include "engine/runtime/executor_memory.hpp"

#include <atomic>

#include <c10/core/Allocator.h>

namespace stratagem::runtime {

struct AllocationMeter::Reporter final : public c10::MemoryReportingInfoBase {
  std::atomic<std::int64_t> live{0};
  void reportMemoryUsage(void* /*ptr*/, int64_t alloc_size, int64_t /*total_allocated*/,
                         int64_t /*total_reserved*/, c10::Device /*device*/) override {
    live.fetch_add(alloc_size, std::memory_order_relaxed);
  }
  bool memoryProfilingEnabled() const override { return true; }
};

AllocationMeter::AllocationMeter()
    : reporter_(std::make_shared<Reporter>()),
      guard_(std::make_unique<c10::DebugInfoGuard>(c10::DebugInfoKind::PROFILER_STATE, reporter_)) {
}

AllocationMeter::~AllocationMeter() = default;

std::int64_t AllocationMeter::live_bytes() const {
  return reporter_->live.load(std::memory_order_relaxed);
}

void MemoryTimeline::reset(double time_s, const Bytes& bytes) {
  track_ = {};
  peak_ = 0;
  track_.time_s.push_back(time_s);
  track_.bytes.push_back(bytes);
  peak_ = track_.total_at(0);
}

void MemoryTimeline::record(double time_s, const Bytes& bytes) {
  if (!track_.bytes.empty() && track_.bytes.back() == bytes) return;
  track_.time_s.push_back(time_s);
  track_.bytes.push_back(bytes);
  peak_ = std::max(peak_, track_.total_at(track_.time_s.size() - 1));
}

}  // namespace stratagem::runtime
