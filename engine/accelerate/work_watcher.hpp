#pragma once
// Waits for launched collectives on a thread of its own, in launch order, and runs each one's
// completion callback (closing its trace span) as soon as it completes, so the trace shows
// when a bucket's all-reduce really ended. drain() waits for all and rethrows the first error.
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "engine/comm/communicator.hpp"

namespace stratagem::accelerate {

class WorkWatcher {
 public:
  WorkWatcher();
  ~WorkWatcher();
  WorkWatcher(const WorkWatcher&) = delete;
  WorkWatcher& operator=(const WorkWatcher&) = delete;

  void push(comm::WorkPtr work, std::function<void()> on_done);
  /// Waits until every pushed work completed; rethrows the first failure.
  void drain();

 private:
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<comm::WorkPtr, std::function<void()>>> queue_;
  int in_flight_ = 0;
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace stratagem::accelerate
