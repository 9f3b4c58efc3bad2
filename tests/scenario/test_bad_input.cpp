// Bad scenarios: each error names where (a JSON path, or file:line:col) and why, in one line,
// and nothing crashes.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "engine/scenario/error.hpp"
#include "engine/scenario/json_reader.hpp"
#include "engine/scenario/scenario.hpp"
#include "tests/scenario/temp_files.hpp"

namespace stratagem::scenario {
namespace {

using nlohmann::json;

json base() {
  return json::parse(R"({
    "model": "gpt2",
    "cluster": "dgx-a100-80gb",
    "strategy": {"dp": 8, "micro_batch_size": 2, "grad_accum": 4, "mixed_precision": "bf16"},
    "training": {"seq_len": 1024, "global_batch": 64}
  })");
}

struct Caught {
  std::string path;
  std::string what;
};

// Parses `j`, expecting a SpecError; returns its path and message.
Caught error_of(const json& j) {
  try {
    parse_scenario(j);
  } catch (const SpecError& e) {
    return {e.path(), e.what()};
  }
  ADD_FAILURE() << "no SpecError for " << j.dump();
  return {};
}

void expect_has(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
}

TEST(BadInput, BaseIsValid) {
  EXPECT_NO_THROW(parse_scenario(base()));
}

TEST(BadInput, MalformedJsonGivesLineAndColumn) {
  const std::string text = "{\n  \"model\": \"gpt2\",\n  \"cluster\" \"dgx-a100-80gb\"\n}\n";
  try {
    parse_json_text(text, "bad.json");
    FAIL() << "no error";
  } catch (const SpecError& e) {
    // Line 3, at the start of the string that stands where ':' should be (nlohmann reports
    // its end, column 27; the reader points at the token).
    EXPECT_EQ(e.path(), "bad.json:3:13");
    expect_has(e.what(), "invalid JSON");
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
}

TEST(BadInput, MalformedJsonPointsAtTheToken) {
  auto where = [](const std::string& text) {
    try {
      parse_json_text(text, "t.json");
    } catch (const SpecError& e) {
      return e.path();
    }
    return std::string("no error");
  };
  EXPECT_EQ(where("{\"a\": 1,,}"), "t.json:1:9");                // punctuation: itself
  EXPECT_EQ(where("{\"a\": tru}"), "t.json:1:7");                // a literal: its start
  EXPECT_EQ(where("{\"a\": 1\n \"b\\\"c\": 2}"), "t.json:2:2");  // escaped quote inside
  EXPECT_EQ(where("{\"a\": "), "t.json:1:7");                    // end of input
}

// #44 item 3: a key written twice in one object of a scenario is refused where the second one
// stands (nlohmann, like every JSON parser, would keep the last silently); the same name in
// two objects, or inside strings, is not a duplicate.
TEST(BadInput, AKeyWrittenTwiceIsRefusedAtTheSecond) {
  const std::string text =
      "{\"model\": \"gpt2\",\n \"strategy\": {\"dp\": 8,\n   \"pp\": 1, \"dp\": 4}}";
  try {
    parse_json_text(text, "dup.json");
    FAIL() << "no error";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.path(), "dup.json:3:13");
    expect_has(e.what(), "key \"dp\" written twice in strategy (first at 2:15)");
  }
  EXPECT_NO_THROW(parse_json_text(
      R"({"a": {"dp": 1}, "b": {"dp": 2}, "c": [{"dp": 1}, {"dp": 2}], "d": "\"dp\": 1, \"dp\""})",
      "ok.json"));
  std::vector<DuplicateKey> found;
  parse_json_text(R"({"x": [{"k": 1, "k": 2}]})", "list.json", &found);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].path, "x[0]");
  EXPECT_EQ(found[0].key, "k");
}

TEST(BadInput, UnknownKeySuggestsClosest) {
  json j = base();
  j["strategy"]["dpp"] = 8;
  const Caught c = error_of(j);
  EXPECT_EQ(c.path, "strategy.dpp");
  expect_has(c.what, "unknown key (did you mean 'dp'?)");
}

TEST(BadInput, UnknownKeyFarFromAllListsKnown) {
  json j = base();
  j["training"]["epochs_to_run"] = 3;
  const Caught c = error_of(j);
  EXPECT_EQ(c.path, "training.epochs_to_run");
  expect_has(c.what, "known keys: global_batch, seed, seq_len, steps");
}

TEST(BadInput, UnknownPresetListsValidOnes) {
  json j = base();
  j["model"] = "gpt5";
  const Caught c = error_of(j);
  EXPECT_EQ(c.path, "model");
  expect_has(c.what, "unknown model preset 'gpt5'");
  expect_has(c.what,
             "valid: bert-base, bert-large, deepseek-v2-lite, deepseek-v3, gpt-oss-120b, "
             "gpt-oss-20b, gpt2,");
  expect_has(c.what, "llama3-70b");
}

TEST(BadInput, UnknownGpuInClusterOverride) {
  json j = base();
  j["cluster"] = {{"preset", "dgx-a100-80gb"}, {"gpu", "a100-80g"}};
  const Caught c = error_of(j);
  EXPECT_EQ(c.path, "cluster.gpu");
  expect_has(c.what, "did you mean 'a100-80gb'?");
}

TEST(BadInput, WrongType) {
  json j = base();
  j["strategy"]["dp"] = "eight";
  const Caught c = error_of(j);
  EXPECT_EQ(c.path, "strategy.dp");
  expect_has(c.what, "expected an integer, got string");

  j = base();
  j["strategy"] = json::array();
  EXPECT_EQ(error_of(j).path, "strategy");
  expect_has(error_of(j).what, "expected an object, got array");
}

TEST(BadInput, OutOfRange) {
  json j = base();
  j["strategy"]["dp"] = 0;
  const Caught c = error_of(j);
  EXPECT_EQ(c.path, "strategy.dp");
  expect_has(c.what, "must be in [1, 16777216], got 0");

  j = base();
  j["training"]["seq_len"] = 4096;  // GPT-2 has 1024 learned positions
  EXPECT_EQ(error_of(j).path, "training.seq_len");
  expect_has(error_of(j).what, "exceeds the model's learned position table (1024)");
}

TEST(BadInput, UnknownChoiceListsValid) {
  json j = base();
  j["strategy"]["mixed_precision"] = "fp4";
  const Caught c = error_of(j);
  EXPECT_EQ(c.path, "strategy.mixed_precision");
  expect_has(c.what, "valid: no, fp16, bf16, fp8");

  j = base();
  j["strategy"]["sharding"] = "zero4";
  EXPECT_EQ(error_of(j).path, "strategy.sharding");
  expect_has(error_of(j).what, "did you mean 'zero");
}

TEST(BadInput, DpTimesPpMustMatchGpus) {
  json j = base();
  j["strategy"]["dp"] = 4;
  j["training"].erase("global_batch");
  const Caught c = error_of(j);
  EXPECT_EQ(c.path, "strategy.dp");
  expect_has(c.what, "dp × pp = 4 × 1 = 4, but the cluster has 8 GPUs (1 nodes × 8)");
}

TEST(BadInput, PipelineDeeperThanModel) {
  json j = base();
  j["cluster"] = {{"preset", "dgx-a100-80gb"}, {"nodes", 2}};
  j["strategy"] = {{"dp", 1}, {"pp", 16}};
  j["training"] = {{"seq_len", 1024}};
  const Caught c = error_of(j);
  EXPECT_EQ(c.path, "strategy.pp");
  expect_has(c.what, "pp = 16 exceeds the model's 12 layers");
}

TEST(BadInput, InterleavedChunksMustDivideStageLayers) {
  json j = base();
  j["strategy"] = {
      {"dp", 2}, {"pp", 4}, {"schedule", "interleaved"}, {"chunks", 2}, {"grad_accum", 4}};
  j["training"] = {{"seq_len", 1024}};
  const Caught c = error_of(j);  // 12 layers / 4 stages = 3 per stage, not a multiple of 2
  EXPECT_EQ(c.path, "strategy.chunks");
  expect_has(c.what, "chunks = 2 must divide the layers per stage (12 layers / pp 4 = 3)");
}

TEST(BadInput, InterleavedMicroBatchesMultipleOfPp) {
  json j = base();
  j["strategy"] = {
      {"dp", 2}, {"pp", 4}, {"schedule", "interleaved"}, {"chunks", 3}, {"grad_accum", 6}};
  j["training"] = {{"seq_len", 1024}};
  const Caught c = error_of(j);
  EXPECT_EQ(c.path, "strategy.grad_accum");
  expect_has(c.what, "multiple of pp (4)");
}

TEST(BadInput, GlobalBatchArithmetic) {
  json j = base();
  j["training"]["global_batch"] = 100;
  const Caught c = error_of(j);
  EXPECT_EQ(c.path, "training.global_batch");
  expect_has(c.what, "100 ≠ micro_batch_size × grad_accum × dp = 2 × 4 × 8 = 64");

  j = base();
  j["strategy"].erase("grad_accum");
  j["training"]["global_batch"] = 100;  // not a multiple of 2 × 8
  EXPECT_EQ(error_of(j).path, "training.global_batch");
  expect_has(error_of(j).what, "not a multiple of micro_batch_size × dp = 16");
}

TEST(BadInput, LossScaleKeysNeedFp16) {
  json j = base();
  j["strategy"]["initial_scale_power"] = 16;  // bf16 needs no loss scaling
  const Caught c = error_of(j);
  EXPECT_EQ(c.path, "strategy.initial_scale_power");
  expect_has(c.what, "loss scaling applies to fp16 only, but mixed_precision is 'bf16'");
  j["strategy"]["mixed_precision"] = "fp16";
  EXPECT_NO_THROW(parse_scenario(j));
}

TEST(BadInput, ShardingRules) {
  json j = base();
  j["strategy"]["sharding"] = "HYBRID_SHARD";
  EXPECT_EQ(error_of(j).path, "strategy.sharding");
  expect_has(error_of(j).what, "needs nodes >= 2");

  j = base();
  j["strategy"] = {{"dp", 2}, {"pp", 4}, {"sharding", "zero2"}};
  j["training"] = {{"seq_len", 1024}};
  EXPECT_EQ(error_of(j).path, "strategy.sharding");
  expect_has(error_of(j).what, "use zero1 or none with pp > 1");

  j = base();
  j["strategy"]["offload_optimizer"] = "cpu";
  EXPECT_EQ(error_of(j).path, "strategy.offload_optimizer");
}

TEST(BadInput, MissingRequiredKey) {
  json j = base();
  j.erase("cluster");
  EXPECT_EQ(error_of(j).path, "cluster");
  expect_has(error_of(j).what, "missing required key");
}

TEST(BadInput, MissingFile) {
  try {
    load_scenario("/nonexistent/dir/scenario.json");
    FAIL() << "no error";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.path(), "/nonexistent/dir/scenario.json");
    expect_has(e.what(), "no such file");
  }
}

TEST(BadInput, FileWithSyntaxErrorNamesTheFile) {
  const test::TempDir dir("bad-input");
  const std::string file = dir.write("broken.json", "{\"model\": \"gpt2\",,}");
  try {
    load_scenario(file);
    FAIL() << "no error";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.path(), file + ":1:18");
  }
}

// Any JSON value at any place must give a SpecError, never a crash or another exception.
TEST(BadInput, NoCrashOnOddValues) {
  const json odd[] = {nullptr, true, -1, 1.5, 1e300, "x", json::array({1, 2}), json::object()};
  const char* places[][2] = {
      {"strategy", "dp"},       {"strategy", "pp"},       {"strategy", "chunks"},
      {"strategy", "schedule"}, {"strategy", "sharding"}, {"strategy", "bucket_mb"},
      {"training", "seq_len"},  {"training", "steps"},    {"training", "seed"}};
  for (const auto& place : places) {
    for (const json& value : odd) {
      json j = base();
      j[place[0]][place[1]] = value;
      try {
        parse_scenario(j);
      } catch (const SpecError&) {
      } catch (const std::exception& e) {
        ADD_FAILURE() << place[0] << "." << place[1] << " = " << value.dump() << ": " << e.what();
      }
    }
  }
  for (const json& value : odd) {
    json j = base();
    j["model"] = value;
    try {
      parse_scenario(j);
      ADD_FAILURE() << "model = " << value.dump() << " accepted";
    } catch (const SpecError&) {
    }
  }
}

}  // namespace
}  // namespace stratagem::scenario

namespace stratagem::scenario {
namespace {

std::string load_error(const std::string& file) {
  try {
    load_scenario(file);
  } catch (const SpecError& e) {
    return e.what();  // "<path>: <message>"
  }
  ADD_FAILURE() << "no SpecError for " << file;
  return "";
}

// Inputs that used to crash or escape as library exceptions (issue 19's fuzzing): a number
// beyond a double, nesting deep enough to overflow a recursive walk, and files that are not
// regular files.
TEST(BadInput, HostileJsonIsALocatedErrorNotACrash) {
  test::TempDir dir("hostile");
  const std::string huge = dir.write(
      "huge.json",
      R"({"model": "gpt2", "cluster": "dgx-a100-80gb", "strategy": {"dp": 8, "bucket_mb": 1e309}})");
  EXPECT_EQ(load_error(huge), huge + ":1:82: number 1e309 is beyond the range of a double");
  std::string objects = R"({"model": )";
  for (int i = 0; i < 60000; ++i) objects += R"({"a": )";
  objects += "1" + std::string(60000, '}') + "}";
  const std::string deep = dir.write("deep.json", objects);
  const std::string e1 = load_error(deep);
  EXPECT_NE(e1.find("nested deeper than 256 levels"), std::string::npos) << e1;
  std::string arrays = R"({"strategy": {"master_weights": )" + std::string(100000, '[') +
                       std::string(100000, ']') + "}}";
  EXPECT_NE(load_error(dir.write("arrays.json", arrays)).find("nested deeper"), std::string::npos);
  // Brackets inside strings do not count.
  EXPECT_NO_THROW(parse_json_text(R"({"name": ")" + std::string(1000, '[') + R"("})", "s.json"));
  EXPECT_EQ(load_error(dir.path()), dir.path() + ": is a directory");
  EXPECT_NE(load_error("/dev/zero").find("not a regular file"), std::string::npos);
  const std::string fifo = dir.path() + "/fifo.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(load_error(fifo).find("not a regular file"), std::string::npos);  // no hang
}

}  // namespace
}  // namespace stratagem::scenario

namespace stratagem::scenario {
namespace {

// The accepts that were silent (#44 round 3): each is one located error now.
TEST(BadInput, LearnedPositionsWithoutATableAreRefused) {
  json j = base();
  j["model"] = {{"preset", "gpt2"}, {"max_positions", 0}};
  const Caught c = error_of(j);
  EXPECT_EQ(c.path, "model.max_positions");
  expect_has(c.what, "learned positions need a table");
}

TEST(BadInput, ANullOverrideIsRefusedNotDroppedWhateverTheKey) {
  json j = base();
  j["model"] = {{"preset", "gpt2"}, {"x\nerror: forged", nullptr}};
  const Caught c = error_of(j);
  EXPECT_EQ(c.path, "model.x\\nerror: forged");  // kept on one line
  expect_has(c.what, "null is not a value here");
  EXPECT_EQ(c.what.find('\n'), std::string::npos) << c.what;
  j = base();
  j["cluster"] = {{"preset", "dgx-a100-80gb"}, {"inter_node", {{"latency_us", nullptr}}}};
  EXPECT_EQ(error_of(j).path, "cluster.inter_node.latency_us");
}

TEST(BadInput, DescriptionsAndSourcesAreText) {
  for (const json& value : {json::object(), json::array({1, 2}), json(3), json(nullptr)}) {
    json j = base();
    j["description"] = value;
    EXPECT_EQ(error_of(j).path, "description") << value.dump();
    j = base();
    j["model"] = {{"preset", "gpt2"}, {"description", value}};
    EXPECT_EQ(error_of(j).path, "model.description") << value.dump();
  }
  json j = base();
  j["description"] = "free text";
  j["model"] = {{"preset", "gpt2"}, {"source", "my notes"}};
  EXPECT_NO_THROW(parse_scenario(j));
}

}  // namespace
}  // namespace stratagem::scenario
