#pragma once
// Helpers for the communicator tests: run one function per rank on its own thread, and the
// closed-form checks every backend must pass (sums of ranks, shards, gathers, ring send/recv).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/comm/communicator.hpp"

namespace stratagem::test {

/// Runs body(rank) on n threads and returns the messages of the exceptions they threw.
inline std::vector<std::string> run_ranks(int n, const std::function<void(int)>& body) {
  std::mutex mu;
  std::vector<std::string> errors;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mu);
        errors.push_back("rank " + std::to_string(r) + ": " + e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

inline std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& e : v) s += e + "\n";
  return s;
}

/// Exact equality of two tensors (values are small integers, exact in every dtype used).
inline void expect_equal(const at::Tensor& got, const at::Tensor& want, const std::string& what) {
  ASSERT_EQ(got.numel(), want.numel()) << what;
  const auto g = got.to(at::kDouble).reshape({-1});
  const auto w = want.to(at::kDouble).reshape({-1});
  if (at::equal(g, w)) return;
  const auto bad = at::nonzero(at::ne(g, w)).reshape({-1});
  const int64_t i = bad[0].item<int64_t>();
  ADD_FAILURE() << what << " at element " << i << " (" << bad.numel() << " wrong): got "
                << g[i].item<double>() << ", want " << w[i].item<double>();
}

/// The same closed-form checks on any backend, run by every rank of `c`'s world.
inline void check_collectives(comm::Communicator& c, at::ScalarType type) {
  using comm::GroupSpec;
  const int n = c.world_size();
  const int r = c.rank();
  const int64_t k = 5;
  const std::string tag = " (" + std::string(c10::toString(type)) + ", rank " + std::to_string(r) +
                          " of " + std::to_string(n) + ")";

  // all_reduce: each rank holds rank + i; the sum is n(n-1)/2 + n*i.
  auto t = at::arange(k, at::dtype(at::kDouble)).add(r).to(type);
  c.all_reduce(t, {}, comm::ReduceOp::sum)->wait();
  expect_equal(t, at::arange(k, at::dtype(at::kDouble)).mul(n).add(n * (n - 1) / 2),
               "all_reduce sum" + tag);

  // all_reduce max: the largest rank's values.
  auto m = at::full({k}, static_cast<double>(r), at::dtype(at::kDouble)).to(type);
  c.all_reduce(m, {}, comm::ReduceOp::max)->wait();
  expect_equal(m, at::full({k}, static_cast<double>(n - 1), at::dtype(at::kDouble)),
               "all_reduce max" + tag);

  // reduce_scatter: input[j] = 10*rank + j over n*k elements; shard r sums to
  // 10*n(n-1)/2 + n*(r*k + i). The input stays as it was.
  const auto in = at::arange(n * k, at::dtype(at::kDouble)).add(10 * r).to(type);
  const auto in_copy = in.clone();
  auto shard = at::zeros({k}, at::dtype(type));
  c.reduce_scatter(shard, in, {})->wait();
  expect_equal(shard,
               at::arange(k, at::dtype(at::kDouble)).add(r * k).mul(n).add(10 * n * (n - 1) / 2),
               "reduce_scatter" + tag);
  expect_equal(in, in_copy, "reduce_scatter input unchanged" + tag);

  // all_gather: rank q contributes 10*q + i; the output is every rank's block in rank order.
  const auto part = at::arange(k, at::dtype(at::kDouble)).add(10 * r).to(type);
  auto all = at::zeros({n * k}, at::dtype(type));
  c.all_gather(all, part, {})->wait();
  std::vector<at::Tensor> blocks;
  for (int q = 0; q < n; ++q) blocks.push_back(at::arange(k, at::dtype(at::kDouble)).add(10 * q));
  expect_equal(all, at::cat(blocks), "all_gather" + tag);

  // broadcast from the last rank.
  auto b = at::full({k}, static_cast<double>(r), at::dtype(at::kDouble)).to(type);
  c.broadcast(b, n - 1, {})->wait();
  expect_equal(b, at::full({k}, static_cast<double>(n - 1), at::dtype(at::kDouble)),
               "broadcast" + tag);

  // send/recv around the ring; odd ranks post the recv first.
  if (n > 1) {
    const int next = (r + 1) % n;
    const int prev = (r + n - 1) % n;
    auto out = at::arange(k, at::dtype(at::kDouble)).mul(r + 1).to(type);
    auto got = at::zeros({k}, at::dtype(type));
    comm::WorkPtr s, rv;
    if (r % 2) {
      rv = c.recv(got, prev, 100 + static_cast<uint32_t>(prev));
      s = c.send(out, next, 100 + static_cast<uint32_t>(r));
    } else {
      s = c.send(out, next, 100 + static_cast<uint32_t>(r));
      rv = c.recv(got, prev, 100 + static_cast<uint32_t>(prev));
    }
    rv->wait();
    s->wait();
    EXPECT_TRUE(rv->is_completed());
    expect_equal(got, at::arange(k, at::dtype(at::kDouble)).mul(prev + 1), "ring recv" + tag);
  }
  c.barrier({});
}

}  // namespace stratagem::test
