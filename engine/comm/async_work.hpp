#pragma once
// A Work completed by another thread (a backend's worker, a p2p waiter, the last rank to
// arrive in-process). wait() past its timeout throws RuntimeError with the op's description
// and, from the backend, which ranks did not reach it.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>

#include "engine/comm/communicator.hpp"

namespace stratagem::comm {

class AsyncWork : public Work {
 public:
  /// `what`: "all_reduce #3 on [0,1] (4096 B)". `diagnose` is called on a timeout, without
  /// locks held, and returns the laggard sentence (may be empty).
  AsyncWork(std::string what, int rank, std::chrono::milliseconds default_timeout,
            std::function<std::string()> diagnose);

  void complete();
  /// Completes with an error; `why` is the whole message wait() will throw.
  void fail(const std::string& why);

  bool is_completed() override;
  void wait(std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) override;

  const std::string& what() const { return what_; }
  /// Waits like wait() but returns false on timeout instead of throwing.
  bool wait_for(std::chrono::milliseconds timeout);

 private:
  std::string what_;
  int rank_;
  std::chrono::milliseconds default_timeout_;
  std::function<std::string()> diagnose_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::string error_;
};

/// "2.5 s", "300 ms"
std::string duration_text(std::chrono::milliseconds t);

}  // namespace stratagem::comm
