#include "engine/launch/heartbeat.hpp"

#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace stratagem::runtime {

namespace {

constexpr std::chrono::milliseconds kPeriod{1000};

struct Beater {
  std::mutex mu;
  std::condition_variable cv;
  std::thread thread;
  bool started = false, stopping = false;
  int fd = -1;
  std::uint64_t progress = 0;
  std::string what = "starting";

  void loop() {
    std::unique_lock<std::mutex> lock(mu);
    while (!stopping) {
      std::string line = std::to_string(progress) + " " + what;
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

  ~Beater() { stop(); }

  void stop() {
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
  ++b.progress;
  b.what = what;
}

void Heartbeat::stop() {
  beater().stop();
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

int LivenessWatch::stalled_rank(Clock::time_point now) const {
  if (limit_.count() <= 0 || ranks_.empty()) return -1;
  for (const auto& [rank, r] : ranks_) {
    if (now - r.last_beat > limit_) return rank;
  }
  const Rank* behind = nullptr;
  int behind_rank = -1;
  for (const auto& [rank, r] : ranks_) {
    if (now - r.last_progress <= limit_) return -1;  // someone still moves
    if (!behind || r.progress < behind->progress) {
      behind = &r;
      behind_rank = rank;
    }
  }
  return behind_rank;
}

std::optional<std::string> LivenessWatch::stalled(Clock::time_point now) const {
  const int rank = stalled_rank(now);
  if (rank < 0) return std::nullopt;
  const Rank& r = ranks_.at(rank);
  const auto s = [](Clock::duration d) {
    return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(d).count());
  };
  const std::string op = r.what.empty() ? "" : " (last at: " + r.what + ")";
  if (now - r.last_beat > limit_) {
    return "rank " + std::to_string(rank) + " stopped responding: no heartbeat for " +
           s(now - r.last_beat) + " s" + op + "; it may be stopped (SIGSTOP) or frozen";
  }
  return "no rank made progress for " + s(now - r.last_progress) + " s; rank " +
         std::to_string(rank) + " is furthest behind" + op + " and the others wait for it";
}

}  // namespace stratagem::runtime
