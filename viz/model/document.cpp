#include "viz/model/document.hpp"

#include <algorithm>
#include <filesystem>

#include "engine/result/metrics.hpp"

namespace stratagem::viz {

std::vector<Lane> make_lanes(const std::vector<result::Span>& spans) {
  std::vector<Lane> lanes;
  for (int s = 0; s < plan::kStreamCount; ++s) {
    const auto stream = static_cast<plan::Stream>(s);
    std::vector<int> idx;
    for (int i = 0; i < static_cast<int>(spans.size()); ++i) {
      if (spans[i].stream == stream) idx.push_back(i);
    }
    std::stable_sort(idx.begin(), idx.end(),
                     [&](int a, int b) { return spans[a].start_s < spans[b].start_s; });
    std::vector<double> lane_end;  // per sub-lane: end of its last span
    const std::size_t first = lanes.size();
    for (int i : idx) {
      std::size_t sub = 0;
      while (sub < lane_end.size() && lane_end[sub] > spans[i].start_s) ++sub;
      if (sub == lane_end.size()) {
        lane_end.push_back(0);
        lanes.push_back({stream, static_cast<int>(sub), {}});
      }
      lane_end[sub] = spans[i].end_s;
      lanes[first + sub].spans.push_back(i);
    }
  }
  return lanes;
}

Document::Document(result::RunResult result, std::string label)
    : result_(std::move(result)), label_(std::move(label)), mesh_(mesh_of(result_)) {
  const int n = world();
  lanes_.resize(n);
  summaries_.resize(n);
  double model_end = 0;
  for (int r = 0; r < n; ++r) {
    const auto& rr = result_.ranks[r];
    if (rr.same_as >= 0) continue;
    lanes_[r] = make_lanes(rr.spans);
    std::vector<std::pair<double, double>> model;
    for (const auto& s : rr.spans) {
      summaries_[r].end_s = std::max(summaries_[r].end_s, s.end_s);
      if (result::is_layer_work(s)) model.emplace_back(s.start_s, s.end_s);
      if (result::is_model_compute(s.kind)) model_end = std::max(model_end, s.end_s);
    }
    summaries_[r].model_busy_s = result::union_length(std::move(model));
    end_s_ = std::max(end_s_, summaries_[r].end_s);
  }
  for (int r = 0; r < n; ++r) {
    const auto& rr = result_.ranks[r];
    if (rr.same_as >= 0) {
      summaries_[r] = summaries_.at(rr.same_as);
    } else if (model_end > 0) {
      summaries_[r].bubble_fraction = 1.0 - summaries_[r].model_busy_s / model_end;
    }
    peak_memory_bytes_ = std::max(peak_memory_bytes_, rr.peak_memory_bytes);
    any_oom_ = any_oom_ || rr.oom;
  }
  end_s_ = std::max(end_s_, result_.metrics.step_time_s);
}

std::shared_ptr<Document> Document::load(const std::string& path) {
  auto r = result::load_result(path);
  return std::make_shared<Document>(std::move(r), std::filesystem::path(path).stem().string());
}

int Document::resolved_rank(int rank) const {
  const int same = result_.ranks.at(rank).same_as;
  return same >= 0 ? same : rank;
}

const std::vector<Lane>& Document::lanes(int rank) const {
  return lanes_.at(resolved_rank(rank));
}

const std::vector<result::Span>& Document::spans(int rank) const {
  return result_.ranks.at(resolved_rank(rank)).spans;
}

const RankSummary& Document::summary(int rank) const {
  return summaries_.at(rank);
}

}  // namespace stratagem::viz
