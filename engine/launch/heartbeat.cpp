#include "engine/launch/heartbeat.hpp"

#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace stratagem::launch {

namespace {

constexpr std::chrono::milliseconds kPeriod{1000};

struct Beater {
  std::mutex mu;  // guards what, describe, and the thread's start and stop
  std::condition_variable cv;
  std::thread thread;
  bool started = false, stopping = false;
  int fd = -1;
  std::atomic<std::uint64_t> progress{0};
  std::atomic<std::uint64_t> item{0};
  std::atomic<bool> item_latest{false};  // the last progress was a tick(item)
  std::string what = "starting";
  Heartbeat::Describe describe;

  void loop() {
    std::unique_lock<std::mutex> lock(mu);
    while (!stopping) {
      const std::string now = item_latest.load(std::memory_order_relaxed) && describe
                                  ? describe(item.load(std::memory_order_relaxed))
                                  : what;
      std::string line = std::to_string(progress.load(std::memory_order_relaxed)) + " " + now;
      for (char& c : line) {
        if (c == '\n') c = ' ';
      }
      line += '\n';
      lock.unlock();
      // A launcher gone (EPIPE) or a full pipe is no reason to stop the work: drop the beat.
      [[maybe_unused]] const auto n = ::write(fd, line.data(), line.size());
      lock.lock();
      cv.wait_for(lock, kPeriod, [this] { return stopping; });
    }
  }

  ~Beater() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stopping = true;
    }
    cv.notify_all();
    if (thread.joinable()) thread.join();
  }
};

Beater& beater() {
  static Beater b;
  return b;
}

}  // namespace

void Heartbeat::start_from_env() {
  Beater& b = beater();
  std::lock_guard<std::mutex> lock(b.mu);
  if (b.started) return;
  b.started = true;
  const char* env = std::getenv(kHeartbeatFdEnv);
  if (!env) return;
  char* end = nullptr;
  const long fd = std::strtol(env, &end, 10);
  if (end == env || *end != '\0' || fd < 0) return;
  b.fd = static_cast<int>(fd);
  b.thread = std::thread([&b] { b.loop(); });
}

void Heartbeat::progress(const std::string& what) {
  Beater& b = beater();
  std::lock_guard<std::mutex> lock(b.mu);
  b.what = what;
  b.item_latest.store(false, std::memory_order_relaxed);
  b.progress.fetch_add(1, std::memory_order_relaxed);
}

void Heartbeat::tick(std::uint64_t item) {
  Beater& b = beater();
  b.item.store(item, std::memory_order_relaxed);
  b.item_latest.store(true, std::memory_order_relaxed);
  b.progress.fetch_add(1, std::memory_order_relaxed);
}

Heartbeat::Describer::Describer(Describe describe) {
  Beater& b = beater();
  std::lock_guard<std::mutex> lock(b.mu);
  b.describe = std::move(describe);
}

Heartbeat::Describer::~Describer() {
  Beater& b = beater();
  std::lock_guard<std::mutex> lock(b.mu);
  b.describe = nullptr;
  b.item_latest.store(false, std::memory_order_relaxed);
}

void LivenessWatch::beat(int rank, const std::string& line, Clock::time_point now) {
  const auto space = line.find(' ');
  const std::string number = line.substr(0, space);
  if (number.empty() || number.find_first_not_of("0123456789") != std::string::npos) return;
  const std::uint64_t progress = std::strtoull(number.c_str(), nullptr, 10);
  auto [it, fresh] = ranks_.try_emplace(rank);
  Rank& r = it->second;
  if (fresh || progress != r.progress) r.last_progress = now;
  r.progress = progress;
  r.what = space == std::string::npos ? "" : line.substr(space + 1);
  r.last_beat = now;
}

void LivenessWatch::forget(int rank) {
  ranks_.erase(rank);
}

std::optional<LivenessWatch::Stall> LivenessWatch::stalled(Clock::time_point now) const {
  if (limit_.count() <= 0 || ranks_.empty()) return std::nullopt;
  const auto secs = [](Clock::duration d) {
    return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(d).count());
  };
  const auto at = [](const Rank& r) {
    return r.what.empty() ? std::string() : " (last at: " + r.what + ")";
  };
  for (const auto& [rank, r] : ranks_) {
    if (now - r.last_beat <= limit_) continue;
    return Stall{rank, "rank " + std::to_string(rank) + " stopped responding: no heartbeat for " +
                           secs(now - r.last_beat) + " s" + at(r) +
                           "; it may be stopped (SIGSTOP) or frozen"};
  }
  const Rank* behind = nullptr;
  int behind_rank = -1;
  for (const auto& [rank, r] : ranks_) {
    if (now - r.last_progress <= limit_) return std::nullopt;  // someone still moves
    if (!behind || r.progress < behind->progress) {
      behind = &r;
      behind_rank = rank;
    }
  }
  return Stall{behind_rank, "no rank made progress for " + secs(now - behind->last_progress) +
                                " s; rank " + std::to_string(behind_rank) +
                                " is furthest behind" + at(*behind) +
                                " and the others wait for it"};
}

}  // namespace stratagem::launch
