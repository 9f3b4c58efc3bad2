#include "engine/result/export.hpp"

#include <charconv>
#include <fstream>

#include "engine/scenario/error.hpp"
#include "engine/scenario/units.hpp"

namespace stratagem::result {

namespace {

double to_us(double seconds) {
  return seconds / units::kMicro;
}

std::string number(double v) {
  char buf[32];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

// Assigns each span of one rank a trace thread. Spans are sorted by start; a span goes to
// the first lane of its stream whose last slice has ended, so slices on a lane never overlap.
std::vector<int> assign_tids(const RankResult& rank, std::vector<std::string>& tid_names) {
  struct Lane {
    int tid;
    double end;
  };
  std::array<std::vector<Lane>, plan::kStreamCount> lanes;
  tid_names.clear();
  for (int s = 0; s < plan::kStreamCount; ++s) {
    tid_names.push_back(plan::to_string(static_cast<plan::Stream>(s)));
  }
  std::vector<int> tids;
  tids.reserve(rank.spans.size());
  for (const Span& span : rank.spans) {
    auto& stream_lanes = lanes[static_cast<int>(span.stream)];
    Lane* lane = nullptr;
    for (Lane& l : stream_lanes) {
      if (l.end <= span.start_s) {
        lane = &l;
        break;
      }
    }
    if (!lane) {
      int tid = static_cast<int>(span.stream);
      if (!stream_lanes.empty()) {
        tid = static_cast<int>(tid_names.size());
        tid_names.push_back(std::string(plan::to_string(span.stream)) + " #" +
                            std::to_string(stream_lanes.size() + 1));
      }
      stream_lanes.push_back({tid, span.start_s});
      lane = &stream_lanes.back();
    }
    lane->end = span.end_s;
    tids.push_back(lane->tid);
  }
  return tids;
}

nlohmann::json span_args(const Span& s) {
  nlohmann::json args = {{"op", s.op}, {"stage", s.stage}, {"bytes", s.bytes}};
  if (is_compute(s.kind)) {
    args["flops"] = s.flops;
    args["chunk"] = s.chunk;
    args["microbatch"] = s.microbatch;
    args["units"] = {s.unit_begin, s.unit_end};
  } else if (is_collective(s.kind)) {
    args["purpose"] = plan::to_string(s.purpose);
    args["units"] = {s.unit_begin, s.unit_end};
  } else {
    args["peer"] = s.peer;
    args["chunk"] = s.chunk;
    args["microbatch"] = s.microbatch;
  }
  return args;
}

}  // namespace

std::string span_label(const Span& s) {
  std::string label = to_string(s.kind);
  if (is_collective(s.kind)) return label + " " + plan::to_string(s.purpose);
  if (s.kind == SpanKind::send) return label + " to " + std::to_string(s.peer);
  if (s.kind == SpanKind::recv) return label + " from " + std::to_string(s.peer);
  if (s.microbatch >= 0) label += " mb " + std::to_string(s.microbatch);
  return label;
}

nlohmann::json chrome_trace(const RunResult& r) {
  nlohmann::json events = nlohmann::json::array();
  auto meta = [&](const char* name, int pid, int tid, nlohmann::json args) {
    events.push_back({{"ph", "M"}, {"name", name}, {"pid", pid}, {"tid", tid}, {"args", args}});
  };
  std::vector<std::string> tid_names;
  for (const RankResult& rank : r.ranks) {
    const int pid = rank.rank;
    std::string pname = "rank " + std::to_string(rank.rank) + " (stage " +
                        std::to_string(rank.stage) + ", dp " + std::to_string(rank.dp) + ")";
    if (rank.same_as >= 0) pname += " same as rank " + std::to_string(rank.same_as);
    meta("process_name", pid, 0, {{"name", pname}});
    meta("process_sort_index", pid, 0, {{"sort_index", rank.rank}});
    if (rank.same_as >= 0) continue;

    const std::vector<int> tids = assign_tids(rank, tid_names);
    std::vector<bool> used(tid_names.size(), false);
    for (int tid : tids) used[tid] = true;
    for (std::size_t t = 0; t < tid_names.size(); ++t) {
      if (!used[t]) continue;
      meta("thread_name", pid, static_cast<int>(t), {{"name", tid_names[t]}});
      meta("thread_sort_index", pid, static_cast<int>(t), {{"sort_index", t}});
    }
    for (std::size_t i = 0; i < rank.spans.size(); ++i) {
      const Span& s = rank.spans[i];
      events.push_back({{"name", span_label(s)},
                        {"cat", plan::to_string(s.stream)},
                        {"ph", "X"},
                        {"pid", pid},
                        {"tid", tids[i]},
                        {"ts", to_us(s.start_s)},
                        {"dur", to_us(s.end_s - s.start_s)},
                        {"args", span_args(s)}});
    }
    for (std::size_t i = 0; i < rank.memory.time_s.size(); ++i) {
      nlohmann::json args = nlohmann::json::object();
      for (int c = 0; c < plan::kTensorClassCount; ++c) {
        args[plan::to_string(static_cast<plan::TensorClass>(c))] = rank.memory.bytes[i][c];
      }
      events.push_back({{"name", "memory bytes"},
                        {"ph", "C"},
                        {"pid", pid},
                        {"tid", 0},
                        {"ts", to_us(rank.memory.time_s[i])},
                        {"args", std::move(args)}});
    }
  }
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

void write_chrome_trace(const RunResult& r, const std::string& path) {
  std::ofstream out(path);
  if (!out) throw RuntimeError("cannot write " + path);
  out << chrome_trace(r).dump() << "\n";
  if (!out) throw RuntimeError("error writing " + path);
}

void write_spans_csv(const RunResult& r, std::ostream& out) {
  out << "rank,op,kind,stream,purpose,stage,chunk,microbatch,unit_begin,unit_end,peer,bytes,"
         "flops,start_s,end_s\n";
  for (const RankResult& rank : r.ranks) {
    for (const Span& s : rank.spans) {
      out << rank.rank << ',' << s.op << ',' << to_string(s.kind) << ','
          << plan::to_string(s.stream) << ','
          << (is_collective(s.kind) ? plan::to_string(s.purpose) : "") << ',' << s.stage << ','
          << s.chunk << ',' << s.microbatch << ',' << s.unit_begin << ',' << s.unit_end << ','
          << s.peer << ',' << number(s.bytes) << ',' << number(s.flops) << ',' << number(s.start_s)
          << ',' << number(s.end_s) << '\n';
    }
  }
}

void write_spans_csv(const RunResult& r, const std::string& path) {
  std::ofstream out(path);
  if (!out) throw RuntimeError("cannot write " + path);
  write_spans_csv(r, out);
  if (!out) throw RuntimeError("error writing " + path);
}

}  // namespace stratagem::result
