// Experiment trackers (engine/accelerate/trackers.hpp): parse_trackers, the exact text of
// metrics.jsonl and metrics.csv, flattening, resume and the errors, each naming where.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/accelerate/trackers.hpp"
#include "engine/scenario/error.hpp"

namespace stratagem::test {
namespace {

namespace fs = std::filesystem;
using accelerate::TrackerKind;
using nlohmann::json;
constexpr auto npos = std::string::npos;

// A fresh directory per test (named after it), removed at the end; the trackers' project is
// "run" inside it.
class ScratchDir {
 public:
  ScratchDir() {
    const char* test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    path_ = fs::temp_directory_path() / ("stratagem-trackers-" + std::to_string(::getpid()) +
                                         "-" + test + "-" + std::to_string(counter_++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  std::string str() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / "run" / name).string(); }

 private:
  fs::path path_;
  static inline int counter_ = 0;
};

std::string contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> lines(const std::string& path) {
  std::istringstream in(contents(path));
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

template <typename F>
SpecError spec_error(F&& f) {
  try {
    f();
  } catch (const SpecError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a SpecError";
  return SpecError("", "");
}

double seconds_now() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

TEST(AccelerateTrackers, ParseTrackersTakesNamesAllAndLists) {
  using Kinds = std::vector<TrackerKind>;
  EXPECT_EQ(accelerate::parse_trackers("jsonl", "log_with"), Kinds{TrackerKind::jsonl});
  EXPECT_EQ(accelerate::parse_trackers("csv", "log_with"), Kinds{TrackerKind::csv});
  EXPECT_EQ(accelerate::parse_trackers("all", "log_with"),
            (Kinds{TrackerKind::jsonl, TrackerKind::csv}));
  EXPECT_EQ(accelerate::parse_trackers(" csv , jsonl ", "log_with"),
            (Kinds{TrackerKind::csv, TrackerKind::jsonl}));
  EXPECT_EQ(accelerate::parse_trackers("jsonl,all,csv", "log_with"),
            (Kinds{TrackerKind::jsonl, TrackerKind::csv}));
  EXPECT_TRUE(accelerate::parse_trackers("", "log_with").empty());
}

TEST(AccelerateTrackers, ParseTrackersNamesTheBadItemAndField) {
  const SpecError bad = spec_error([] { accelerate::parse_trackers("jsonl,wandb", "log_with"); });
  EXPECT_EQ(bad.path(), "log_with");
  EXPECT_NE(bad.reason().find("unknown tracker \"wandb\""), npos) << bad.what();
  const SpecError empty = spec_error([] { accelerate::parse_trackers("csv,", "LOG_WITH"); });
  EXPECT_EQ(empty.path(), "LOG_WITH");
  EXPECT_NE(empty.reason().find("unknown tracker \"\""), npos) << empty.what();
}

TEST(AccelerateTrackers, JsonlWritesAnInitLineThenOneObjectPerLog) {
  ScratchDir dir;
  const json config = json::parse(R"({"lr":0.001,"model":"tiny","layers":[2,2]})");
  const double before = seconds_now();
  accelerate::Trackers t({TrackerKind::jsonl}, dir.str(), "run", config);
  const double after = seconds_now();
  EXPECT_EQ(t.files(), std::vector<std::string>{dir.file("metrics.jsonl")});
  t.log(json::parse(R"({"loss":0.5,"acc":1,"tag":"warm"})"), 3);
  json odd = json::object();
  odd["sum"] = 0.1 + 0.2;
  odd["bad"] = std::numeric_limits<double>::quiet_NaN();
  odd["ok"] = true;
  t.log(odd);
  t.close();

  const auto text = lines(dir.file("metrics.jsonl"));
  ASSERT_EQ(text.size(), 3u);
  const json init = json::parse(text[0]);
  EXPECT_EQ(init.at("event"), "init");
  EXPECT_EQ(init.at("project"), "run");
  EXPECT_EQ(init.at("config"), config);
  ASSERT_TRUE(init.at("time").is_number());
  EXPECT_GE(init.at("time").get<double>(), before - 1);
  EXPECT_LE(init.at("time").get<double>(), after + 1);
  EXPECT_EQ(text[1], R"({"step":3,"acc":1,"loss":0.5,"tag":"warm"})");
  const json second = json::parse(text[2]);
  EXPECT_FALSE(second.contains("step"));               // no step given
  EXPECT_TRUE(second.at("bad").is_null());             // JSON has no NaN
  EXPECT_EQ(second.at("sum").get<double>(), 0.1 + 0.2);  // bit for bit
  EXPECT_EQ(second.at("ok"), true);
  EXPECT_EQ(second.size(), 3u);
}

TEST(AccelerateTrackers, CsvQuotesCellsAndLeavesMissingKeysEmpty) {
  ScratchDir dir;
  const json config = json::parse(R"({"lr":0.1})");
  {
    accelerate::Trackers t({TrackerKind::csv}, dir.str(), "run", config);
    EXPECT_EQ(t.files(), std::vector<std::string>{dir.file("metrics.csv")});
    t.log(json::parse(R"({"loss":0.25,"note":"a,b","ok":true})"), 1);
    t.log(json::parse(R"({"loss":1.0})"));
    json odd = json::object();
    odd["loss"] = -std::numeric_limits<double>::infinity();
    odd["note"] = "say \"hi\"\nbye";
    t.log(odd, 7);
    odd = json::object();
    odd["loss"] = std::numeric_limits<double>::quiet_NaN();
    t.log(odd, 8);
    t.close();
  }
  EXPECT_EQ(contents(dir.file("metrics.csv")),
            "step,loss,note,ok\n"
            "1,0.25,\"a,b\",true\n"
            ",1.0,,\n"
            "7,-inf,\"say \"\"hi\"\"\nbye\",\n"
            "8,nan,,\n");
  EXPECT_EQ(json::parse(contents(dir.file("config.json"))), config);
  EXPECT_FALSE(fs::exists(dir.file("metrics.jsonl")));
}

TEST(AccelerateTrackers, CsvRejectsAKeyTheFirstLogDidNotHave) {
  ScratchDir dir;
  accelerate::Trackers t({TrackerKind::jsonl, TrackerKind::csv}, dir.str(), "run", json{});
  t.log(json::parse(R"({"loss":1})"), 0);
  const SpecError e = spec_error([&] { t.log(json::parse(R"({"loss":2,"lr":0.5})"), 1); });
  EXPECT_EQ(e.path(), "log");
  EXPECT_NE(e.reason().find("key \"lr\""), npos) << e.what();
  EXPECT_NE(e.reason().find("CSV columns are fixed by the first log call"), npos) << e.what();
  // The rejected record reached neither file, and the trackers still log.
  EXPECT_EQ(contents(dir.file("metrics.csv")), "step,loss\n0,1\n");
  EXPECT_EQ(lines(dir.file("metrics.jsonl")).size(), 2u);
  t.log(json::parse(R"({"loss":3})"), 2);
  EXPECT_EQ(contents(dir.file("metrics.csv")), "step,loss\n0,1\n2,3\n");
}

TEST(AccelerateTrackers, NestedObjectsFlattenWithSlashes) {
  ScratchDir dir;
  accelerate::Trackers t({TrackerKind::jsonl, TrackerKind::csv}, dir.str(), "run", json{});
  t.log(json::parse(R"({"eval":{"loss":1,"acc":{"top1":0.5}},"lr":0.1})"), 2);
  const auto jsonl = lines(dir.file("metrics.jsonl"));
  ASSERT_EQ(jsonl.size(), 2u);
  EXPECT_EQ(jsonl[1], R"({"step":2,"eval/acc/top1":0.5,"eval/loss":1,"lr":0.1})");
  EXPECT_EQ(contents(dir.file("metrics.csv")), "step,eval/acc/top1,eval/loss,lr\n2,0.5,1,0.1\n");
  // What cannot be a column is refused by its flattened name.
  const auto reason = [&](const char* values) {
    return spec_error([&] { t.log(json::parse(values), 3); }).reason();
  };
  EXPECT_NE(reason(R"({"eval":{"loss":[1,2]}})").find("\"eval/loss\" is array"), npos);
  EXPECT_NE(reason(R"({"lr":null})").find("\"lr\" is null"), npos);
  EXPECT_NE(reason(R"({"eval/loss":1,"eval":{"loss":2}})").find("\"eval/loss\" appears twice"),
            npos);
  EXPECT_NE(reason(R"({"step":1})").find("\"step\" is reserved"), npos);
  EXPECT_EQ(lines(dir.file("metrics.jsonl")).size(), 2u);
}

TEST(AccelerateTrackers, AResumedRunAppendsAndKeepsTheCsvHeader) {
  ScratchDir dir;
  const std::vector<TrackerKind> both = {TrackerKind::jsonl, TrackerKind::csv};
  {
    accelerate::Trackers t(both, dir.str(), "run", json::parse(R"({"run":1})"));
    t.log(json::parse(R"({"loss":1,"x,y":2})"), 0);
    t.close();
  }
  {
    accelerate::Trackers t(both, dir.str(), "run", json::parse(R"({"run":2})"));
    t.log(json::parse(R"({"x,y":4})"), 1);  // a quoted column read back from the header
    const SpecError e = spec_error([&] { t.log(json::parse(R"({"acc":1})"), 2); });
    EXPECT_NE(e.reason().find("key \"acc\""), npos) << e.what();
  }
  EXPECT_EQ(contents(dir.file("metrics.csv")), "step,loss,\"x,y\"\n0,1,2\n1,,4\n");
  EXPECT_EQ(json::parse(contents(dir.file("config.json"))), json::parse(R"({"run":2})"));
  const auto jsonl = lines(dir.file("metrics.jsonl"));
  ASSERT_EQ(jsonl.size(), 4u);
  EXPECT_EQ(json::parse(jsonl[0]).at("config"), json::parse(R"({"run":1})"));
  EXPECT_EQ(jsonl[1], R"({"step":0,"loss":1,"x,y":2})");
  EXPECT_EQ(json::parse(jsonl[2]).at("config"), json::parse(R"({"run":2})"));
  EXPECT_EQ(jsonl[3], R"({"step":1,"x,y":4})");
}

TEST(AccelerateTrackers, ACsvTheTrackersDidNotWriteIsRefusedBeforeAnyWrite) {
  ScratchDir dir;
  fs::create_directories(dir.str() + "/run");
  {
    std::ofstream foreign(dir.file("metrics.csv"));
    foreign << "loss,acc\n1,2\n";
  }
  const SpecError e = spec_error([&] {
    accelerate::Trackers t({TrackerKind::jsonl, TrackerKind::csv}, dir.str(), "run", json{});
  });
  EXPECT_EQ(e.path(), "init_trackers");
  EXPECT_NE(e.reason().find("does not start with a \"step\" column"), npos) << e.what();
  EXPECT_FALSE(fs::exists(dir.file("metrics.jsonl")));
  EXPECT_FALSE(fs::exists(dir.file("config.json")));
}

TEST(AccelerateTrackers, LogAfterEndTrainingThrows) {
  ScratchDir dir;
  accelerate::Trackers t({TrackerKind::jsonl}, dir.str(), "run", json{});
  t.log(json::parse(R"({"loss":1})"), 0);
  t.close();
  t.close();  // a second end_training does nothing
  const SpecError e = spec_error([&] { t.log(json::parse(R"({"loss":2})"), 1); });
  EXPECT_EQ(e.path(), "log");
  EXPECT_NE(e.reason().find("after end_training"), npos) << e.what();
  EXPECT_EQ(lines(dir.file("metrics.jsonl")).size(), 2u);
}

TEST(AccelerateTrackers, ProjectNamesMustBePlainNames) {
  ScratchDir dir;
  for (const std::string name : {"", ".", "..", "a/b", "/abs", "../up"}) {
    const SpecError e = spec_error([&] {
      accelerate::Trackers t({TrackerKind::jsonl, TrackerKind::csv}, dir.str(), name, json{});
    });
    EXPECT_EQ(e.path(), "init_trackers") << "project name \"" << name << "\"";
    EXPECT_NE(e.reason().find("plain directory name"), npos) << e.what();
  }
  EXPECT_TRUE(fs::is_empty(dir.str()));  // nothing was created
  accelerate::Trackers ok({TrackerKind::jsonl}, dir.str(), "run.2", json{});
  EXPECT_TRUE(fs::exists(dir.str() + "/run.2/metrics.jsonl"));
}

}  // namespace
}  // namespace stratagem::test
