// The in-process backend: closed-form results on 1-4 threads, subgroups, errors that name the
// rank that never arrived, fault injection.
#include <gtest/gtest.h>

#include <atomic>

#include "engine/comm/inproc_communicator.hpp"
#include "engine/scenario/error.hpp"
#include "tests/runtime/test_comm_util.hpp"

namespace stratagem::test {
namespace {

using comm::GroupSpec;
using comm::ReduceOp;
using std::chrono::milliseconds;

TEST(CommInproc, ClosedFormResultsOnOneToFourRanks) {
  for (int n = 1; n <= 4; ++n) {
    for (auto type : {at::kFloat, at::kDouble, at::kBFloat16, at::kLong}) {
      auto comms = comm::make_inproc_world(n);
      const auto errors = run_ranks(n, [&](int r) { check_collectives(*comms[r], type); });
      EXPECT_TRUE(errors.empty()) << joined(errors);
    }
  }
}

TEST(CommInproc, SubgroupsReduceAmongTheirMembersOnly) {
  auto comms = comm::make_inproc_world(4);
  const auto errors = run_ranks(4, [&](int r) {
    auto& c = *comms[r];
    // Pairs {0,2} and {1,3}: the sum of the pair's ranks.
    const comm::GroupSpec pair{r % 2 == 0 ? std::vector<int>{0, 2} : std::vector<int>{1, 3}};
    auto t = at::full({3}, static_cast<double>(r), at::dtype(at::kDouble));
    c.all_reduce(t, pair, comm::ReduceOp::sum)->wait();
    expect_equal(t, at::full({3}, r % 2 == 0 ? 2.0 : 4.0, at::dtype(at::kDouble)), "pair sum");
    // An overlapping group {1,2,3}, which rank 0 skips.
    if (r != 0) {
      auto u = at::full({2}, static_cast<double>(r), at::dtype(at::kDouble));
      c.all_reduce(u, comm::GroupSpec{{1, 2, 3}}, comm::ReduceOp::sum)->wait();
      expect_equal(u, at::full({2}, 6.0, at::dtype(at::kDouble)), "triple sum");
      // reduce_scatter on the triple: rank at index i gets shard i.
      auto in = at::arange(6, at::dtype(at::kDouble));
      auto out = at::zeros({2}, at::dtype(at::kDouble));
      c.reduce_scatter(out, in, comm::GroupSpec{{1, 2, 3}})->wait();
      const int64_t i = r - 1;
      expect_equal(out, at::arange(2, at::dtype(at::kDouble)).add(2 * i).mul(3), "triple shard");
    }
    c.barrier({});
  });
  EXPECT_TRUE(errors.empty()) << joined(errors);
}

TEST(CommInproc, ResultsAreDeterministicWhateverTheArrivalOrder) {
  // Sums of values that are not exact in float: the group-order sum must not depend on which
  // thread arrives last.
  std::vector<float> first;
  for (int trial = 0; trial < 5; ++trial) {
    auto comms = comm::make_inproc_world(3);
    std::vector<float> result(3);
    const auto errors = run_ranks(3, [&](int r) {
      std::this_thread::sleep_for(milliseconds(((trial + r) % 3) * 5));
      auto t = at::full({1}, 0.1f * static_cast<float>(r + 1) + 1e-7f * static_cast<float>(r),
                        at::dtype(at::kFloat));
      comms[r]->all_reduce(t, {}, comm::ReduceOp::sum)->wait();
      result[static_cast<std::size_t>(r)] = t.item<float>();
    });
    ASSERT_TRUE(errors.empty()) << joined(errors);
    if (trial == 0) first = result;
    EXPECT_EQ(result, first);
  }
}

TEST(CommInproc, TimeoutNamesTheRankThatNeverArrivedAndItsLastOp) {
  auto comms = comm::make_inproc_world(3, milliseconds(300));
  std::vector<std::string> messages(3);
  const auto errors = run_ranks(3, [&](int r) {
    auto& c = *comms[r];
    if (r != 0) {
      // Ranks 1 and 2 first meet on their own group.
      auto p = at::ones({2});
      c.all_reduce(p, comm::GroupSpec{{1, 2}}, comm::ReduceOp::sum)->wait();
    }
    if (r == 2) return;  // rank 2 never reaches the world all_reduce
    auto t = at::ones({4});
    auto w = c.all_reduce(t, {}, comm::ReduceOp::sum);
    try {
      w->wait(milliseconds(200));
    } catch (const std::exception& e) {
      messages[static_cast<std::size_t>(r)] = e.what();
    }
    EXPECT_FALSE(w->is_completed());
  });
  ASSERT_TRUE(errors.empty()) << joined(errors);
  for (int r : {0, 1}) {
    const auto& m = messages[static_cast<std::size_t>(r)];
    EXPECT_NE(m.find("all_reduce #0 on [0,1,2]"), std::string::npos) << m;
    EXPECT_NE(m.find("did not complete within 200 ms on rank " + std::to_string(r)),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("rank 2 has not reached it (last issued: all_reduce #0 on [1,2])"),
              std::string::npos)
        << m;
    // The rank that did arrive is not blamed.
    EXPECT_EQ(m.find("rank " + std::to_string(1 - r) + " has not"), std::string::npos) << m;
  }
  EXPECT_NE(messages[0].find("16 B, Float"), std::string::npos) << messages[0];
}

TEST(CommInproc, AFailedRankFailsThePeersWaitingOnIt) {
  auto comms = comm::make_inproc_world(3);
  std::atomic<int> posted{0};
  std::vector<std::string> messages(3);
  const auto errors = run_ranks(3, [&](int r) {
    auto& c = *comms[r];
    if (r == 1) {
      while (posted.load() < 2) std::this_thread::yield();
      dynamic_cast<comm::InprocCommunicator&>(c).fail("injected fault");
      return;
    }
    auto t = at::ones({4});
    auto coll = c.all_reduce(t, {}, comm::ReduceOp::sum);
    auto rbuf = at::zeros({2});
    auto p2p = c.recv(rbuf, 1, 7);
    ++posted;
    for (const auto& w : {coll, p2p}) {
      try {
        w->wait();
      } catch (const std::exception& e) {
        messages[static_cast<std::size_t>(r)] += std::string(e.what()) + "\n";
      }
    }
  });
  ASSERT_TRUE(errors.empty()) << joined(errors);
  for (int r : {0, 2}) {
    const auto& m = messages[static_cast<std::size_t>(r)];
    EXPECT_NE(m.find("all_reduce #0 on [0,1,2] failed: rank 1 failed: injected fault"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("recv from rank 1 (tag 7, 8 B) failed: rank 1 failed: injected fault"),
              std::string::npos)
        << m;
  }
  // Later ops involving the failed rank fail at once.
  auto t = at::ones({1});
  EXPECT_THROW(comms[0]->all_reduce(t, {}, comm::ReduceOp::sum)->wait(), RuntimeError);
}

TEST(CommInproc, MismatchedCollectivesFailOnBothRanks) {
  auto comms = comm::make_inproc_world(2);
  std::vector<std::string> messages(2);
  const auto errors = run_ranks(2, [&](int r) {
    auto t = at::ones({4});
    auto w =
        r == 0 ? comms[r]->all_reduce(t, {}, comm::ReduceOp::sum) : comms[r]->broadcast(t, 0, {});
    try {
      w->wait();
    } catch (const std::exception& e) {
      messages[static_cast<std::size_t>(r)] = e.what();
    }
  });
  ASSERT_TRUE(errors.empty()) << joined(errors);
  for (const auto& m : messages) {
    EXPECT_NE(m.find("collective mismatch at #0 on [0,1]"), std::string::npos) << m;
  }
}

TEST(CommInproc, RecvWithoutSendTimesOutNamingThePeer) {
  auto comms = comm::make_inproc_world(2, milliseconds(100));
  auto buf = at::zeros({3});
  auto w = comms[0]->recv(buf, 1, 42);
  try {
    w->wait();
    FAIL() << "recv completed without a send";
  } catch (const RuntimeError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("recv from rank 1 (tag 42, 12 B) did not complete within 100 ms"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("rank 1 has not posted the matching send"), std::string::npos) << m;
  }
  // The matching send completes both.
  auto s = comms[1]->send(at::full({3}, 5.0f), 0, 42);
  s->wait();
  w->wait();
  expect_equal(buf, at::full({3}, 5.0), "late recv");
}

TEST(CommInproc, MisuseIsRejectedWhenIssued) {
  auto comms = comm::make_inproc_world(2);
  auto t = at::ones({4});
  EXPECT_THROW(comms[0]->all_reduce(t, comm::GroupSpec{{1}}, comm::ReduceOp::sum), RuntimeError);
  EXPECT_THROW(comms[0]->all_reduce(t, comm::GroupSpec{{1, 0}}, comm::ReduceOp::sum), RuntimeError);
  EXPECT_THROW(comms[0]->all_reduce(t.t().reshape({2, 2}).t(), {}, comm::ReduceOp::sum),
               RuntimeError);
  auto out = at::zeros({3});
  EXPECT_THROW(comms[0]->reduce_scatter(out, t, {}), RuntimeError);
  EXPECT_THROW(comms[0]->broadcast(t, 5, {}), RuntimeError);
  EXPECT_THROW(comms[0]->send(t, 0, 1), RuntimeError);
}

}  // namespace
}  // namespace stratagem::test
