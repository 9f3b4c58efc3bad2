#include "engine/accelerate/trace.hpp"

#include <algorithm>

namespace stratagem::accelerate {

Tracer::Tracer() : t0_(Clock::now()) {}

double Tracer::now() const {
  return std::chrono::duration<double>(Clock::now() - t0_).count();
}

int Tracer::begin(result::SpanKind kind, plan::Stream stream, double bytes, int bucket,
                  plan::CommPurpose purpose) {
  result::Span s;
  s.kind = kind;
  s.stream = stream;
  s.bytes = bytes;
  s.purpose = purpose;
  s.unit_begin = std::max(bucket, 0);
  s.unit_end = bucket >= 0 ? bucket + 1 : 0;
  s.start_s = s.end_s = now();
  std::lock_guard<std::mutex> lock(mu_);
  s.op = next_op_++;
  current_.push_back(s);
  return static_cast<int>(current_.size()) - 1;
}

void Tracer::add(result::SpanKind kind, plan::Stream stream, double start_s, double end_s,
                 double bytes) {
  result::Span s;
  s.kind = kind;
  s.stream = stream;
  s.bytes = bytes;
  s.start_s = start_s;
  s.end_s = end_s;
  std::lock_guard<std::mutex> lock(mu_);
  s.op = next_op_++;
  current_.push_back(s);
}

void Tracer::end(int id) {
  const double t = now();
  std::lock_guard<std::mutex> lock(mu_);
  if (id >= 0 && id < static_cast<int>(current_.size())) current_[id].end_s = t;
}

void Tracer::memory(const std::array<double, plan::kTensorClassCount>& bytes) {
  const double t = now();
  std::lock_guard<std::mutex> lock(mu_);
  current_mem_.emplace_back(t, bytes);
}

void Tracer::end_step() {
  const double t = now();
  std::lock_guard<std::mutex> lock(mu_);
  last_ = std::move(current_);
  last_mem_ = std::move(current_mem_);
  current_.clear();
  current_mem_.clear();
  last_start_ = step_start_;
  for (const auto& s : last_) last_start_ = std::min(last_start_, s.start_s);
  last_end_ = t;
  step_times_.push_back(t - step_start_);
  step_start_ = t;
  next_op_ = 0;
  if (!last_mem_.empty()) current_mem_.push_back({t, last_mem_.back().second});
}

result::RankResult Tracer::last_step(int rank, double* step_time_s) const {
  std::lock_guard<std::mutex> lock(mu_);
  result::RankResult r;
  r.rank = rank;
  r.dp = rank;
  for (result::Span s : last_) {
    s.start_s -= last_start_;
    s.end_s -= last_start_;
    r.spans.push_back(s);
  }
  std::sort(r.spans.begin(), r.spans.end(), [](const auto& a, const auto& b) {
    return a.start_s != b.start_s ? a.start_s < b.start_s : a.op < b.op;
  });
  for (const auto& [t, bytes] : last_mem_) {
    r.memory.time_s.push_back(std::max(0.0, t - last_start_));
    r.memory.bytes.push_back(bytes);
    double total = 0;
    for (double b : bytes) total += b;
    r.peak_memory_bytes = std::max(r.peak_memory_bytes, total);
  }
  if (step_time_s) *step_time_s = last_end_ - last_start_;
  return r;
}

std::vector<double> Tracer::step_times() const {
  std::lock_guard<std::mutex> lock(mu_);
  return step_times_;
}

}  // namespace stratagem::accelerate
