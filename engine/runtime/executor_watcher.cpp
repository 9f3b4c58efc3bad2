#include "engine/runtime/executor_watcher.hpp"

namespace stratagem::runtime {

namespace {
// Between sweeps over the in-flight works: short enough that a span's end is accurate to a
// few tens of microseconds, long enough not to take a core from compute.
constexpr auto kPollPeriod = std::chrono::microseconds(25);
}  // namespace

WorkWatcher::WorkWatcher() : thread_([this] { loop(); }) {}

WorkWatcher::~WorkWatcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  thread_.join();
}

void WorkWatcher::watch(plan::OpId op, comm::WorkPtr work) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    watching_.emplace_back(op, std::move(work));
  }
  work_cv_.notify_all();
}

std::vector<std::pair<plan::OpId, WorkWatcher::Clock::time_point>> WorkWatcher::drain() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(completed_, {});
}

void WorkWatcher::wait_any(std::chrono::microseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait_for(lock, timeout, [&] { return !completed_.empty() || stop_; });
}

void WorkWatcher::loop() {
  std::vector<std::pair<plan::OpId, comm::WorkPtr>> batch;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || !watching_.empty(); });
      if (stop_) return;
      batch = watching_;
    }
    std::vector<plan::OpId> finished;
    for (auto& [op, work] : batch) {
      if (work->is_completed()) finished.push_back(op);
    }
    if (!finished.empty()) {
      const auto now = Clock::now();
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (plan::OpId op : finished) {
          completed_.emplace_back(op, now);
          std::erase_if(watching_, [&](const auto& w) { return w.first == op; });
        }
      }
      done_cv_.notify_all();
    }
    batch.clear();
    std::this_thread::sleep_for(kPollPeriod);
  }
}

}  // namespace stratagem::runtime
