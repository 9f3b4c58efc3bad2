// measure_compute_contention: each rank alone, then all at once, on an in-process world whose
// "work" contends by construction (a shared lock) or not at all (a sleep).
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "engine/comm/inproc_communicator.hpp"
#include "engine/measure/compute_contention.hpp"
#include "tests/runtime/test_comm_util.hpp"

namespace stratagem::test {
namespace {

// A first-come first-served lock, so that two ranks alternate instead of one re-taking it.
class TicketLock {
 public:
  void lock() {
    std::unique_lock<std::mutex> l(m_);
    const long ticket = next_++;
    cv_.wait(l, [&] { return serving_ == ticket; });
  }
  void unlock() {
    {
      std::lock_guard<std::mutex> l(m_);
      ++serving_;
    }
    cv_.notify_all();
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  long next_ = 0, serving_ = 0;
};

measure::ComputeContention measure(int n, const std::function<void()>& work) {
  auto comms = comm::make_inproc_world(n);
  std::vector<measure::ComputeContention> got(static_cast<std::size_t>(n));
  const auto errors = run_ranks(n, [&](int r) {
    got[r] = measure::measure_compute_contention(*comms[r], work, 0.03, c10::Device(c10::kCPU));
  });
  EXPECT_TRUE(errors.empty()) << joined(errors);
  for (int r = 1; r < n; ++r) EXPECT_EQ(got[r].per_peer, got[0].per_peer);  // one answer
  return got[0];
}

TEST(ComputeContention, WorkThatTakesTurnsCostsOneWorkItemPerOtherProcess) {
  // Two ranks that must take turns on one lock: together each call waits for the other's.
  TicketLock one_core;
  const auto work = [&] {
    std::lock_guard<TicketLock> lock(one_core);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  };
  const auto c = measure(2, work);
  EXPECT_EQ(c.processes, 2);
  EXPECT_GT(c.alone_s, 1.5e-3);
  EXPECT_GT(c.together_s, 1.5 * c.alone_s);
  EXPECT_GT(c.per_peer, 0.5);
  EXPECT_LT(c.per_peer, 1.5);
}

TEST(ComputeContention, WorkThatSharesNothingHasNone) {
  const auto work = [] { std::this_thread::sleep_for(std::chrono::milliseconds(2)); };
  const auto c = measure(3, work);
  EXPECT_EQ(c.processes, 3);
  EXPECT_LT(c.per_peer, 0.25);
  EXPECT_GE(c.per_peer, 0.0);
}

TEST(ComputeContention, OneProcessHasNoPeers) {
  const auto c = measure(1, [] { std::this_thread::sleep_for(std::chrono::microseconds(200)); });
  EXPECT_EQ(c.per_peer, 0.0);
}

}  // namespace
}  // namespace stratagem::test
