// RunResult: JSON round trip, version checks, metrics from spans, Chrome trace and CSV.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <unistd.h>

#include "engine/result/export.hpp"
#include "engine/result/metrics.hpp"
#include "engine/result/result.hpp"
#include "engine/scenario/error.hpp"

namespace stratagem::result {
namespace {

Span span(plan::OpId op, SpanKind kind, plan::Stream stream, double start, double end,
          double bytes = 0) {
  Span s;
  s.op = op;
  s.kind = kind;
  s.stream = stream;
  s.start_s = start;
  s.end_s = end;
  s.bytes = bytes;
  s.microbatch = is_collective(kind) ? -1 : 0;
  if (is_p2p(kind)) s.peer = 1;
  return s;
}

// Rank 0 and 1 simulated, rank 2 a folded copy of rank 0.
RunResult sample_result() {
  RunResult r;
  r.scenario = scenario::load_scenario("default");
  r.hardware = "test";
  r.events = 42;
  r.ranks.resize(3);
  for (int i = 0; i < 3; ++i) {
    r.ranks[i].rank = i;
    r.ranks[i].capacity_bytes = 80 * units::kGiB;
  }
  auto& r0 = r.ranks[0];
  r0.spans = {span(0, SpanKind::forward, plan::Stream::compute, 0, 1),
              span(1, SpanKind::backward, plan::Stream::compute, 1, 3),
              span(2, SpanKind::all_reduce, plan::Stream::collective, 2, 4, 100),
              span(3, SpanKind::send, plan::Stream::p2p, 4, 5, 10)};
  r0.spans[0].flops = 1e12;
  r0.spans[0].unit_begin = 0;
  r0.spans[0].unit_end = 3;
  r0.memory.time_s = {0, 1, 3};
  r0.memory.bytes.resize(3);
  r0.memory.bytes[0][0] = 10;
  r0.memory.bytes[1] = r0.memory.bytes[0];
  r0.memory.bytes[1][static_cast<int>(plan::TensorClass::activations)] = 5;
  r0.memory.bytes[2] = r0.memory.bytes[0];
  r0.peak_memory_bytes = 15;
  auto& r1 = r.ranks[1];
  r1.stage = 1;
  r1.spans = {span(5, SpanKind::recv, plan::Stream::p2p, 0.5, 1, 10),
              span(6, SpanKind::forward, plan::Stream::compute, 1, 2),
              span(7, SpanKind::backward, plan::Stream::compute, 2, 4)};
  r1.memory.time_s = {0};
  r1.memory.bytes.resize(1);
  r1.peak_memory_bytes = 0;
  r.ranks[2].same_as = 0;
  r.ranks[2].dp = 1;
  r.ranks[2].peak_memory_bytes = 15;
  r.metrics = compute_metrics(r, 3e15);
  return r;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("stratagem-result-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

TEST(Metrics, FromSpans) {
  const RunResult r = sample_result();
  const Metrics& m = r.metrics;
  EXPECT_EQ(m.step_time_s, 5.0);
  // Model compute ends at 4; every rank is busy 3 s of it.
  EXPECT_DOUBLE_EQ(m.bubble_fraction, 0.25);
  // Rank 0 (and its copy): comm without compute in [3, 5]; rank 1: [0.5, 1].
  EXPECT_DOUBLE_EQ(m.exposed_comm_s, (2.0 + 0.5 + 2.0) / 3);
  EXPECT_EQ(m.comm_bytes[static_cast<int>(CommCategory::grad_sync)], 200.0);
  EXPECT_EQ(m.comm_bytes[static_cast<int>(CommCategory::pipeline)], 20.0);  // sends only
  EXPECT_EQ(m.peak_flops.dtype, scenario::DType::bf16);
  EXPECT_EQ(m.peak_flops.flops_per_s, 312e12);
  EXPECT_DOUBLE_EQ(m.mfu, 3e15 / (5.0 * 3 * 312e12));
  EXPECT_DOUBLE_EQ(m.samples_per_s, r.scenario.training.global_batch / 5.0);
  EXPECT_DOUBLE_EQ(m.tokens_per_s, r.scenario.tokens_per_step() / 5.0);
}

TEST(Metrics, UnionLength) {
  EXPECT_EQ(union_length({{0, 1}, {0.5, 2}, {3, 4}, {3.5, 3.75}}), 3.0);
  EXPECT_EQ(union_length({}), 0.0);
}

TEST(ResultJson, RoundTrips) {
  const RunResult r = sample_result();
  const nlohmann::json j = to_json(r);
  EXPECT_EQ(j["format"], "stratagem-result");
  EXPECT_EQ(j["version"], kFormatVersion);
  EXPECT_EQ(j["ranks"][2]["same_as"], 0);
  EXPECT_FALSE(j["ranks"][2].contains("spans"));
  const RunResult back = result_from_json(j, "mem");
  EXPECT_EQ(to_json(back).dump(), j.dump());
  EXPECT_EQ(back.ranks[0].spans[2].purpose, plan::CommPurpose::grad_sync);
  EXPECT_EQ(back.ranks[0].spans[0].unit_end, 3);
  EXPECT_EQ(back.resolved(2).spans.size(), 4u);

  const std::string path = temp_path("roundtrip.json");
  save_result(r, path);
  EXPECT_EQ(to_json(load_result(path)).dump(), j.dump());
  std::filesystem::remove(path);
}

TEST(ResultJson, RejectsNewerVersionsNamingTheFile) {
  nlohmann::json j = to_json(sample_result());
  j["version"] = kFormatVersion + 1;
  const std::string path = temp_path("newer.json");
  std::ofstream(path) << j.dump();
  try {
    load_result(path);
    FAIL() << "expected an error";
  } catch (const SpecError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find("version 2 is newer"), std::string::npos) << msg;
    EXPECT_NE(msg.find("upgrade"), std::string::npos) << msg;
  }
  std::filesystem::remove(path);
}

TEST(ResultJson, RejectsOtherFormats) {
  nlohmann::json j = to_json(sample_result());
  j["format"] = "chrome-trace";
  EXPECT_THROW(result_from_json(j, "x.json"), SpecError);
  try {
    result_from_json({{"traceEvents", nlohmann::json::array()}}, "trace.json");
    FAIL();
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("not a stratagem result"), std::string::npos);
  }
  const std::string path = temp_path("garbage.json");
  std::ofstream(path) << "{not json";
  EXPECT_THROW(load_result(path), SpecError);
  std::filesystem::remove(path);
}

TEST(ResultJson, RejectsMissingFields) {
  nlohmann::json j = to_json(sample_result());
  j["ranks"][0].erase("peak_memory_bytes");
  EXPECT_THROW(result_from_json(j, "x.json"), SpecError);
}

TEST(ChromeTrace, ValidWithNestedSlicesPerThread) {
  RunResult r = sample_result();
  // Two p2p ops in flight together on rank 1: the second needs its own thread.
  r.ranks[1].spans.insert(r.ranks[1].spans.begin() + 1,
                          span(8, SpanKind::send, plan::Stream::p2p, 0.75, 1.5, 10));
  const nlohmann::json t = nlohmann::json::parse(chrome_trace(r).dump());
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> slices;
  std::map<std::pair<int, int>, std::string> thread_names;
  std::map<int, std::string> process_names;
  int counters = 0;
  for (const auto& e : t.at("traceEvents")) {
    const std::string ph = e.at("ph");
    const int pid = e.at("pid"), tid = e.value("tid", 0);
    if (ph == "X") {
      const double ts = e.at("ts"), dur = e.at("dur");
      slices[{pid, tid}].emplace_back(ts, ts + dur);
    } else if (ph == "M" && e.at("name") == "thread_name") {
      thread_names[{pid, tid}] = e.at("args").at("name");
    } else if (ph == "M" && e.at("name") == "process_name") {
      process_names[pid] = e.at("args").at("name");
    } else if (ph == "C") {
      ++counters;
      EXPECT_TRUE(e.at("args").contains("activations"));
    }
  }
  EXPECT_EQ(process_names.size(), 3u);
  EXPECT_NE(process_names[2].find("same as rank 0"), std::string::npos);
  EXPECT_EQ(counters, 4);  // rank 0: 3 samples, rank 1: 1
  for (auto& [key, list] : slices) {
    EXPECT_TRUE(thread_names.count(key)) << key.first << "/" << key.second;
    std::sort(list.begin(), list.end());
    for (std::size_t i = 1; i < list.size(); ++i) {
      EXPECT_LE(list[i - 1].second, list[i].first) << "overlap on " << thread_names[key];
    }
  }
  // Extra lanes get tids after the one-per-stream ones.
  const std::pair<int, int> p2p_1{1, 3}, p2p_2{1, plan::kStreamCount}, compute_0{0, 0};
  EXPECT_EQ(thread_names[p2p_1], "p2p");
  EXPECT_EQ(thread_names[p2p_2], "p2p #2");
  const std::pair<double, double> first_us{0, 1e6};
  EXPECT_EQ(slices[compute_0].front(), first_us);
}

TEST(Csv, OneRowPerSpan) {
  std::ostringstream out;
  write_spans_csv(sample_result(), out);
  std::istringstream in(out.str());
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(in, line)) lines.push_back(line);
  ASSERT_EQ(lines.size(), 1u + 4 + 3);
  EXPECT_EQ(lines[0].rfind("rank,op,kind,stream,purpose", 0), 0u);
  EXPECT_EQ(lines[3], "0,2,all_reduce,collective,grad_sync,0,0,-1,0,0,-1,100,0,2,4");
  EXPECT_EQ(lines[4], "0,3,send,p2p,,0,0,0,0,0,1,10,0,4,5");
}

TEST(SpanLabel, Names) {
  EXPECT_EQ(span_label(span(0, SpanKind::forward, plan::Stream::compute, 0, 1)), "forward mb 0");
  EXPECT_EQ(span_label(span(0, SpanKind::all_reduce, plan::Stream::collective, 0, 1)),
            "all_reduce grad_sync");
  EXPECT_EQ(span_label(span(0, SpanKind::recv, plan::Stream::p2p, 0, 1)), "recv from 1");
}

}  // namespace
}  // namespace stratagem::result
