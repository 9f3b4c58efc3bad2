#pragma once
// The clock every measurement in engine/measure times with.
#include <chrono>

namespace stratagem::measure {

using Clock = std::chrono::steady_clock;

/// Seconds elapsed since `t` on Clock.
inline double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace stratagem::measure
