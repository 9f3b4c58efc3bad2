#include "engine/accelerate/work_watcher.hpp"

namespace stratagem::accelerate {

WorkWatcher::WorkWatcher() : thread_([this] { loop(); }) {}

WorkWatcher::~WorkWatcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void WorkWatcher::push(comm::WorkPtr work, std::function<void()> on_done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.emplace_back(std::move(work), std::move(on_done));
    ++in_flight_;
  }
  cv_.notify_all();
}

void WorkWatcher::drain() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return in_flight_ == 0; });
  if (error_) {
    auto e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

void WorkWatcher::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and nothing left
    auto [work, on_done] = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    std::exception_ptr error;
    try {
      work->wait();  // the communicator's timeout: never a hang
      if (on_done) on_done();
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error && !error_) error_ = error;
    --in_flight_;
    cv_.notify_all();
  }
}

}  // namespace stratagem::accelerate
