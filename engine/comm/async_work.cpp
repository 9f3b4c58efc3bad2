#include "engine/comm/async_work.hpp"

#include <sstream>

#include "engine/scenario/error.hpp"

namespace stratagem::comm {

std::string duration_text(std::chrono::milliseconds t) {
  std::ostringstream s;
  if (t.count() >= 1000) {
    s << static_cast<double>(t.count()) / 1000.0 << " s";
  } else {
    s << t.count() << " ms";
  }
  return s.str();
}

AsyncWork::AsyncWork(std::string what, int rank, std::chrono::milliseconds default_timeout,
                     std::function<std::string()> diagnose)
    : what_(std::move(what)),
      rank_(rank),
      default_timeout_(default_timeout),
      diagnose_(std::move(diagnose)) {}

void AsyncWork::complete() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
}

void AsyncWork::fail(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = why.empty() ? what_ + " failed" : why;
    done_ = true;
  }
  cv_.notify_all();
}

bool AsyncWork::is_completed() {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

bool AsyncWork::wait_for(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) timeout = default_timeout_;
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [this] { return done_; })) return false;
  if (!error_.empty()) throw RuntimeError(error_);
  return true;
}

void AsyncWork::wait(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) timeout = default_timeout_;
  if (wait_for(timeout)) return;
  std::string msg = what_ + " did not complete within " + duration_text(timeout) + " on rank " +
                    std::to_string(rank_);
  const std::string laggards = diagnose_ ? diagnose_() : std::string();
  if (!laggards.empty()) msg += ": " + laggards;
  throw RuntimeError(msg);
}

}  // namespace stratagem::comm
