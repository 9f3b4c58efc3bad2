// nccl-tests conventions (bus factors, sizes) and the least-squares fits calibration uses,
// on data with known answers.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/scenario/comm_op.hpp"
#include "engine/scenario/error.hpp"
#include "engine/scenario/fit.hpp"

namespace stratagem::scenario {
namespace {

TEST(CommOp, BusFactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(bus_factor(CommOp::all_reduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(CommOp::all_reduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(bus_factor(CommOp::all_reduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(bus_factor(CommOp::reduce_scatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor(CommOp::all_gather, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(bus_factor(CommOp::broadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(CommOp::sendrecv, 8), 1.0);
  for (int i = 0; i < kCommOpCount; ++i) EXPECT_EQ(bus_factor(static_cast<CommOp>(i), 1), 1.0);
}

TEST(CommOp, NamesRoundTripAndAliases) {
  for (int i = 0; i < kCommOpCount; ++i) {
    const auto op = static_cast<CommOp>(i);
    EXPECT_EQ(parse_comm_op(to_string(op), "--op"), op);
  }
  EXPECT_EQ(parse_comm_op("allreduce", "--op"), CommOp::all_reduce);
  EXPECT_EQ(parse_comm_op("all-gather", "--op"), CommOp::all_gather);
  EXPECT_EQ(parse_comm_op("p2p", "--op"), CommOp::sendrecv);
  try {
    parse_comm_op("alltoall", "--op");
    FAIL() << "alltoall accepted";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.path(), "--op");
  }
}

TEST(CommOp, Sizes) {
  EXPECT_EQ(parse_size("8", "-b"), 8);
  EXPECT_EQ(parse_size("4K", "-b"), 4096);
  EXPECT_EQ(parse_size("64M", "-e"), 64LL << 20);
  EXPECT_EQ(parse_size("1G", "-e"), 1LL << 30);
  EXPECT_EQ(parse_size("2MB", "-e"), 2LL << 20);
  EXPECT_THROW(parse_size("0", "-b"), SpecError);
  EXPECT_THROW(parse_size("12Q", "-b"), SpecError);
  EXPECT_THROW(parse_size("x", "-b"), SpecError);
  EXPECT_EQ(format_size(65536), "64K");
  EXPECT_EQ(format_size(3000), "3000");
  EXPECT_EQ(format_size(1LL << 30), "1G");

  const auto s = size_sweep(8, 64LL << 20, 2);
  ASSERT_EQ(s.size(), 24u);  // 8 B … 64 MiB: 2^3 … 2^26
  EXPECT_EQ(s.front(), 8);
  EXPECT_EQ(s.back(), 64LL << 20);
  EXPECT_EQ(size_sweep(1024, 16384, 4), (std::vector<std::int64_t>{1024, 4096, 16384}));
  EXPECT_EQ(size_sweep(1000, 5000, 4), (std::vector<std::int64_t>{1000, 4000}));
  EXPECT_THROW(size_sweep(64, 8, 2), SpecError);
  EXPECT_THROW(size_sweep(8, 64, 1), SpecError);
}

TEST(CommOp, ElementCountsFollowNcclTests) {
  EXPECT_EQ(element_count(CommOp::all_reduce, 1024, 4, 3), 256);
  // reduce_scatter and all_gather: the full buffer, rounded down to a multiple of n.
  EXPECT_EQ(element_count(CommOp::all_gather, 1024, 4, 3), 255);
  EXPECT_EQ(element_count(CommOp::reduce_scatter, 8, 4, 4), 4);  // at least one per rank
  EXPECT_EQ(element_count(CommOp::sendrecv, 2, 4, 2), 1);
}

TEST(Fit, LineRecoversAlphaBetaExactly) {
  // t = 25 µs + S / 2 GB/s over 1 KiB … 16 MiB.
  std::vector<double> x, y;
  for (double s = 1024; s <= 16 << 20; s *= 4) {
    x.push_back(s);
    y.push_back(25e-6 + s / 2e9);
  }
  const LineFit f = fit_line_relative(x, y);
  EXPECT_NEAR(f.intercept, 25e-6, 1e-15);
  EXPECT_NEAR(f.slope, 1 / 2e9, 1e-22);
  EXPECT_LT(f.rms_rel_error, 1e-9);
}

TEST(Fit, LineWeighsRelativeErrors) {
  // Noise of ±10 % on every point: the small points still pin α within ~10 %.
  std::vector<double> x, y;
  int sign = 1;
  for (double s = 1024; s <= 16 << 20; s *= 4, sign = -sign) {
    x.push_back(s);
    y.push_back((40e-6 + s / 1e9) * (1 + 0.1 * sign));
  }
  const LineFit f = fit_line_relative(x, y);
  EXPECT_NEAR(f.intercept, 40e-6, 4e-6);
  EXPECT_NEAR(1 / f.slope, 1e9, 0.1e9);
  EXPECT_NEAR(f.rms_rel_error, 0.1, 0.02);
}

TEST(Fit, LineClampsNegativeTerms) {
  // Pure bandwidth with a little super-linearity would give α < 0: clamped to 0.
  const LineFit f = fit_line_relative({1e3, 1e6}, {0.9e-6, 1.1e-3});
  EXPECT_EQ(f.intercept, 0.0);
  EXPECT_GT(f.slope, 0.0);
  // Flat times (latency only) would give a negative slope: clamped to 0.
  const LineFit g = fit_line_relative({1e3, 1e6}, {10e-6, 9e-6});
  EXPECT_EQ(g.slope, 0.0);
  EXPECT_GT(g.intercept, 0.0);
  EXPECT_THROW(fit_line_relative({1}, {1}), RuntimeError);
  EXPECT_THROW(fit_line_relative({1, 1}, {1, 2}), RuntimeError);
  EXPECT_THROW(fit_line_relative({1, 2}, {1, 0}), RuntimeError);
}

TEST(Fit, EfficiencyCurveRecovered) {
  // rate(d) = 100 GFLOP/s · d / (d + 300).
  std::vector<double> d, r;
  for (double dim : {16, 64, 256, 1024}) {
    d.push_back(dim);
    r.push_back(100e9 * dim / (dim + 300));
  }
  const EfficiencyFit f = fit_efficiency(d, r);
  EXPECT_NEAR(f.peak, 100e9, 1e-3);
  EXPECT_NEAR(f.half_dim, 300, 1e-6);
  EXPECT_LT(f.rms_rel_error, 1e-9);
  // One size: the rate is the peak.
  const EfficiencyFit one = fit_efficiency({256}, {5e9});
  EXPECT_EQ(one.peak, 5e9);
  EXPECT_EQ(one.half_dim, 0.0);
}

}  // namespace
}  // namespace stratagem::scenario
