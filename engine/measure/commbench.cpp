#include "engine/measure/commbench.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include <ATen/ATen.h>

#include "engine/measure/stopwatch.hpp"
#include "engine/scenario/error.hpp"
#include "engine/scenario/units.hpp"

namespace stratagem::measure {

namespace {

constexpr std::int64_t kPattern = 7;  // inputs are ((index + rank) mod 7) + 1

// ((offset + i + shift) mod 7) + 1 for i in [0, count): one rank's contribution.
at::Tensor pattern(std::int64_t count, std::int64_t offset, std::int64_t shift) {
  return at::remainder(at::arange(count, at::kLong) + (offset + shift), kPattern) + 1;
}

// Σ over ranks r < n of ((offset + i + r) mod 7) + 1, by a 7-entry table on (offset + i) mod 7.
at::Tensor pattern_sum(std::int64_t count, std::int64_t offset, int n) {
  std::vector<std::int64_t> table(kPattern);
  for (std::int64_t m = 0; m < kPattern; ++m) {
    std::int64_t s = 0;
    for (int r = 0; r < n; ++r) s += (m + r) % kPattern + 1;
    table[static_cast<std::size_t>(m)] = s;
  }
  const auto lookup = at::tensor(table, at::kLong);
  return lookup.index({at::remainder(at::arange(count, at::kLong) + offset, kPattern)});
}

int element_bytes(at::ScalarType t) {
  return static_cast<int>(c10::elementSize(t));
}

// The buffers of one op at one size.
struct Buffers {
  at::Tensor in, out;  // in-place ops: out is in
};

class Bench {
 public:
  Bench(comm::Communicator& comm, const CommBenchOptions& o)
      : comm_(comm), o_(o), n_(comm.world_size()), rank_(comm.rank()) {}

  CommBenchRow run_size(std::int64_t bytes) {
    CommBenchRow row;
    row.bytes = bytes;
    row.count = scenario::element_count(o_.op, bytes, element_bytes(o_.dtype), n_);
    Buffers b = allocate(row.count);
    fill(b, row.count, false);
    comm_.barrier({});
    // Warm-up, timed as one batch: it sizes the timed loop when a budget is given.
    const int warm = std::max(o_.warmup, o_.budget_s > 0 ? 1 : 0);
    double warm_s = 0;
    if (warm > 0) {
      const auto t0 = Clock::now();
      issue_and_wait(b, warm);
      warm_s = seconds_since(t0) / warm;
    }
    row.iters = o_.iters;
    if (o_.budget_s > 0) {
      const double slowest = reduce_scalar(comm_, warm_s, comm::ReduceOp::max, o_.device);
      const double fit = slowest > 0 ? std::ceil(o_.budget_s / slowest) : o_.iters;
      row.iters = static_cast<int>(std::clamp<double>(fit, 2, std::max(o_.iters, 2)));
    }
    comm_.barrier({});
    const auto t0 = Clock::now();
    issue_and_wait(b, row.iters);
    const double mine = seconds_since(t0) / std::max(row.iters, 1);
    row.time_s = reduce_scalar(comm_, mine, comm::ReduceOp::max, o_.device);
    row.algbw = row.time_s > 0 ? static_cast<double>(bytes) / row.time_s : 0;
    row.busbw = row.algbw * scenario::bus_factor(o_.op, n_);
    if (o_.check) {
      fill(b, row.count, rank_ == o_.fault_rank);
      issue_and_wait(b, 1);
      row.wrong = static_cast<std::int64_t>(reduce_scalar(
          comm_, static_cast<double>(mismatches(b, row.count)), comm::ReduceOp::sum, o_.device));
    }
    return row;
  }

 private:
  at::TensorOptions options() const {
    return at::TensorOptions().device(o_.device).dtype(o_.dtype);
  }

  Buffers allocate(std::int64_t count) const {
    Buffers b;
    switch (o_.op) {
      case scenario::CommOp::all_reduce:
      case scenario::CommOp::broadcast:
        b.in = b.out = at::empty({count}, options());
        break;
      case scenario::CommOp::reduce_scatter:
        b.in = at::empty({count}, options());
        b.out = at::empty({count / n_}, options());
        break;
      case scenario::CommOp::all_gather:
        b.in = at::empty({count / n_}, options());
        b.out = at::empty({count}, options());
        break;
      case scenario::CommOp::sendrecv:
        b.in = at::empty({count}, options());
        b.out = at::empty({count}, options());
        break;
    }
    return b;
  }

  // This rank's input for the correctness pass (also before timing, so values stay finite
  // for long enough); `fault` perturbs its first element.
  void fill(Buffers& b, std::int64_t count, bool fault) const {
    const std::int64_t k = b.in.numel();
    at::Tensor values;
    if (o_.op == scenario::CommOp::broadcast && rank_ != o_.root) {
      values = at::zeros({k}, at::kLong);
    } else if (o_.op == scenario::CommOp::broadcast) {
      values = pattern(k, 0, o_.root);
    } else {
      values = pattern(k, 0, rank_);
    }
    if (fault) values.index_put_({0}, values.index({0}) + 1);
    b.in.copy_(values.to(b.in.options()));
    if (o_.op == scenario::CommOp::sendrecv || o_.op == scenario::CommOp::reduce_scatter ||
        o_.op == scenario::CommOp::all_gather) {
      b.out.zero_();
    }
    (void)count;
  }

  at::Tensor expected(std::int64_t count) const {
    switch (o_.op) {
      case scenario::CommOp::all_reduce:
        return pattern_sum(count, 0, n_);
      case scenario::CommOp::reduce_scatter: {
        const std::int64_t k = count / n_;
        return pattern_sum(k, rank_ * k, n_);
      }
      case scenario::CommOp::all_gather: {
        const std::int64_t k = count / n_;
        std::vector<at::Tensor> blocks;
        for (int q = 0; q < n_; ++q) blocks.push_back(pattern(k, 0, q));
        return at::cat(blocks);
      }
      case scenario::CommOp::broadcast:
        return pattern(count, 0, o_.root);
      case scenario::CommOp::sendrecv:
        return pattern(count, 0, (rank_ - 1 + n_) % n_);
    }
    return {};
  }

  std::int64_t mismatches(const Buffers& b, std::int64_t count) const {
    const auto got = b.out.to(at::kCPU).to(at::kDouble);
    const auto want = expected(count).to(at::kDouble);
    return at::ne(got, want).sum().item<std::int64_t>();
  }

  void issue_and_wait(Buffers& b, int times) {
    if (o_.op == scenario::CommOp::sendrecv) {
      for (int i = 0; i < times; ++i) exchange(b);
      return;
    }
    std::vector<comm::WorkPtr> works;
    works.reserve(static_cast<std::size_t>(times));
    for (int i = 0; i < times; ++i) works.push_back(issue(b));
    for (auto& w : works) w->wait();
  }

  comm::WorkPtr issue(Buffers& b) {
    switch (o_.op) {
      case scenario::CommOp::all_reduce:
        return comm_.all_reduce(b.out, {}, comm::ReduceOp::sum);
      case scenario::CommOp::reduce_scatter:
        return comm_.reduce_scatter(b.out, b.in, {});
      case scenario::CommOp::all_gather:
        return comm_.all_gather(b.out, b.in, {});
      case scenario::CommOp::broadcast:
        return comm_.broadcast(b.out, o_.root, {});
      case scenario::CommOp::sendrecv:
        break;
    }
    throw RuntimeError("commbench: sendrecv is not a collective");
  }

  // Rank r sends to r+1 and receives from r−1 (nccl-tests' sendrecv), one exchange at a time.
  void exchange(Buffers& b) {
    const std::uint32_t tag = next_tag_++;
    if (n_ == 1) {
      b.out.copy_(b.in);
      return;
    }
    auto recv = comm_.recv(b.out, (rank_ - 1 + n_) % n_, tag);
    auto send = comm_.send(b.in, (rank_ + 1) % n_, tag);
    send->wait();
    recv->wait();
  }

  comm::Communicator& comm_;
  const CommBenchOptions& o_;
  int n_;
  int rank_;
  std::uint32_t next_tag_ = 1u << 20;  // clear of the plan's transfer indices
};

const char* redop_name(scenario::CommOp op) {
  return op == scenario::CommOp::all_reduce || op == scenario::CommOp::reduce_scatter ? "sum"
                                                                                      : "none";
}

}  // namespace

at::ScalarType parse_bench_dtype(const std::string& name, const std::string& path) {
  if (name == "float" || name == "fp32" || name == "float32") return at::kFloat;
  if (name == "double" || name == "fp64" || name == "float64") return at::kDouble;
  if (name == "bf16" || name == "bfloat16") return at::kBFloat16;
  if (name == "half" || name == "fp16" || name == "float16") return at::kHalf;
  throw SpecError(path, "unknown type \"" + name + "\" (float, double, bf16, half)");
}

std::string bench_dtype_name(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return "float";
    case at::kDouble:
      return "double";
    case at::kBFloat16:
      return "bfloat16";
    case at::kHalf:
      return "half";
    default:
      return c10::toString(t);
  }
}

double reduce_scalar(comm::Communicator& comm, double value, comm::ReduceOp op,
                     const c10::Device& device) {
  auto t = at::full({1}, value, at::TensorOptions().dtype(at::kDouble).device(device));
  comm.all_reduce(t, {}, op)->wait();
  return t.to(at::kCPU).item<double>();
}

std::vector<CommBenchRow> run_commbench(comm::Communicator& comm, const CommBenchOptions& o,
                                        const std::function<void(const CommBenchRow&)>& on_row) {
  if (o.sizes.empty()) throw SpecError("-b", "no sizes to run");
  if (o.iters < 1) throw SpecError("-n", "must be >= 1");
  if (o.warmup < 0) throw SpecError("-w", "must be >= 0");
  if (o.root < 0 || o.root >= comm.world_size()) {
    throw SpecError("--root",
                    "must be a rank of the job (0.." + std::to_string(comm.world_size() - 1) + ")");
  }
  Bench bench(comm, o);
  std::vector<CommBenchRow> rows;
  for (std::int64_t bytes : o.sizes) {
    rows.push_back(bench.run_size(bytes));
    if (on_row) on_row(rows.back());
  }
  return rows;
}

std::string commbench_header(const CommBenchOptions& o, int world_size) {
  const char* placement =
      o.op == scenario::CommOp::all_reduce || o.op == scenario::CommOp::broadcast ? "in-place"
                                                                                  : "out-of-place";
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "# %s, %d rank%s, %s; busbw factor %.4g\n"
                "#                                                         %s\n"
                "#       size         count      type   redop    root      time   algbw   busbw "
                " #wrong\n"
                "#        (B)    (elements)                                 (us)  (GB/s)  (GB/s)\n",
                scenario::to_string(o.op), world_size, world_size == 1 ? "" : "s", placement,
                scenario::bus_factor(o.op, world_size), placement);
  return buf;
}

std::string commbench_row_text(const CommBenchRow& r, const CommBenchOptions& o) {
  char wrong[32];
  if (r.wrong < 0) {
    std::snprintf(wrong, sizeof wrong, "%7s", "N/A");
  } else {
    std::snprintf(wrong, sizeof wrong, "%7lld", static_cast<long long>(r.wrong));
  }
  char buf[256];
  std::snprintf(buf, sizeof buf, "%12lld  %12lld  %8s  %6s  %6d  %8.2f  %6.2f  %6.2f  %s",
                static_cast<long long>(r.bytes), static_cast<long long>(r.count),
                bench_dtype_name(o.dtype).c_str(), redop_name(o.op),
                o.op == scenario::CommOp::broadcast ? o.root : -1, r.time_s / units::kMicro,
                r.algbw / units::kGB, r.busbw / units::kGB, wrong);
  return buf;
}

namespace {
double average_busbw(const std::vector<CommBenchRow>& rows) {
  double sum = 0;
  for (const auto& r : rows) sum += r.busbw;
  return rows.empty() ? 0.0 : sum / static_cast<double>(rows.size());
}
std::int64_t total_wrong(const std::vector<CommBenchRow>& rows) {
  std::int64_t w = 0;
  for (const auto& r : rows) w += std::max<std::int64_t>(r.wrong, 0);
  return w;
}
}  // namespace

std::string commbench_footer(const std::vector<CommBenchRow>& rows) {
  const std::int64_t wrong = total_wrong(rows);
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "# Out of bounds values : %lld %s\n# Avg bus bandwidth    : %.4g \n",
                static_cast<long long>(wrong), wrong == 0 ? "OK" : "FAILED",
                average_busbw(rows) / units::kGB);
  return buf;
}

nlohmann::json commbench_json(const CommBenchOptions& o, int world_size,
                              const std::vector<CommBenchRow>& rows) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& r : rows) {
    a.push_back({{"bytes", r.bytes},
                 {"count", r.count},
                 {"iters", r.iters},
                 {"time_us", r.time_s / units::kMicro},
                 {"algbw_GBps", r.algbw / units::kGB},
                 {"busbw_GBps", r.busbw / units::kGB},
                 {"wrong", r.wrong < 0 ? nlohmann::json() : nlohmann::json(r.wrong)}});
  }
  return {{"op", scenario::to_string(o.op)},
          {"dtype", bench_dtype_name(o.dtype)},
          {"bus_factor", scenario::bus_factor(o.op, world_size)},
          {"rows", std::move(a)},
          {"avg_busbw_GBps", average_busbw(rows) / units::kGB},
          {"wrong", total_wrong(rows)}};
}

}  // namespace stratagem::measure
