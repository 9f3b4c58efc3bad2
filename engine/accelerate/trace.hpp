#pragma once
// What an Accelerator records while a user's loop runs, per optimizer step: spans (forward,
// backward, each gradient bucket's collective from launch to completion, optimizer,
// parameter all-gathers) and memory per tensor class of the model states it manages. Spans
// may be opened and closed from different threads (a collective completes on a watcher).
// The last completed step becomes this rank's RankResult (times from the step's start), the
// same structure the plan executors write, so `stratagem view` shows a user's own run.
#include <array>
#include <chrono>
#include <mutex>
#include <vector>

#include "engine/result/result.hpp"

namespace stratagem::accelerate {

class Tracer {
 public:
  Tracer();
  /// Seconds since the tracer started.
  double now() const;
  /// Opens a span now; returns its id for end().
  int begin(result::SpanKind kind, plan::Stream stream, double bytes = 0, int bucket = -1,
            plan::CommPurpose purpose = plan::CommPurpose::grad_sync);
  /// A span that already happened.
  void add(result::SpanKind kind, plan::Stream stream, double start_s, double end_s,
           double bytes = 0);
  void end(int id);
  /// A memory sample (bytes per tensor class) now.
  void memory(const std::array<double, plan::kTensorClassCount>& bytes);
  /// The optimizer step finished: the spans since the previous one form the last step.
  void end_step();

  /// The last completed step of this rank: spans sorted by start, memory samples, and its
  /// duration; empty before the first step ends.
  result::RankResult last_step(int rank, double* step_time_s) const;
  /// Every completed step's duration, in order.
  std::vector<double> step_times() const;

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point t0_;
  mutable std::mutex mu_;
  double step_start_ = 0;
  std::vector<result::Span> current_;
  std::vector<std::pair<double, std::array<double, plan::kTensorClassCount>>> current_mem_;
  std::vector<result::Span> last_;
  std::vector<std::pair<double, std::array<double, plan::kTensorClassCount>>> last_mem_;
  double last_start_ = 0, last_end_ = 0;
  std::vector<double> step_times_;
  int next_op_ = 0;
};

}  // namespace stratagem::accelerate
