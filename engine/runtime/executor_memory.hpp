#pragma once
// Measuring what a rank's tensors hold. Model states, gathered parameters and staged
// gradients are buffers the executor owns, so their bytes are known exactly; activations are
// whatever autograd keeps, measured with an allocation meter: a c10 memory reporter installed
// on the executing thread (the hook PyTorch's profiler uses for profile_memory) that sums
// every allocation and free of that thread. A forward's activations are the bytes it leaves
// allocated; they are released when its backward has run.
#include <array>
#include <cstdint>
#include <memory>

#include <c10/util/ThreadLocalDebugInfo.h>

#include "engine/plan/plan.hpp"
#include "engine/result/result.hpp"

namespace stratagem::runtime {

/// Live bytes allocated (minus freed) by the thread it is installed on, while installed.
class AllocationMeter {
 public:
  AllocationMeter();
  ~AllocationMeter();
  AllocationMeter(const AllocationMeter&) = delete;
  AllocationMeter& operator=(const AllocationMeter&) = delete;
  std::int64_t live_bytes() const;

 private:
  struct Reporter;
  std::shared_ptr<Reporter> reporter_;
  std::unique_ptr<c10::DebugInfoGuard> guard_;
};

/// Bytes per tensor class over a step, sampled whenever a class changes.
class MemoryTimeline {
 public:
  using Bytes = std::array<double, plan::kTensorClassCount>;
  void reset(double time_s, const Bytes& bytes);
  /// Records `bytes` at `time_s` if it differs from the last sample.
  void record(double time_s, const Bytes& bytes);
  const result::MemoryTrack& track() const { return track_; }
  double peak() const { return peak_; }

 private:
  result::MemoryTrack track_;
  double peak_ = 0;
};

}  // namespace stratagem::runtime
