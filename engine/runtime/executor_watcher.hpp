#pragma once
// Notices when the executor's in-flight communication finishes, while the executing thread is
// busy with compute: a small thread polls each Work and timestamps its completion, so spans
// of collectives and transfers end when they really did (the overlap with backward is then
// measured, not rounded up to the next compute op).
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "engine/plan/plan.hpp"
#include "engine/comm/communicator.hpp"

namespace stratagem::runtime {

class WorkWatcher {
 public:
  using Clock = std::chrono::steady_clock;
  WorkWatcher();
  ~WorkWatcher();
  WorkWatcher(const WorkWatcher&) = delete;
  WorkWatcher& operator=(const WorkWatcher&) = delete;

  void watch(plan::OpId op, comm::WorkPtr work);
  /// Ops completed since the last call, with the time each was seen completed.
  std::vector<std::pair<plan::OpId, Clock::time_point>> drain();
  /// Waits until some op completes (or one already has and is undrained), at most `timeout`.
  void wait_any(std::chrono::microseconds timeout);

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable work_cv_;  ///< watcher: something to watch, or stop
  std::condition_variable done_cv_;  ///< executor: something completed
  std::vector<std::pair<plan::OpId, comm::WorkPtr>> watching_;
  std::vector<std::pair<plan::OpId, Clock::time_point>> completed_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace stratagem::runtime
