// Error messages stay one readable line whatever the input holds (#19): control bytes and
// invalid UTF-8 are escaped, huge values are cut, and wrapping an error again changes nothing.
#include <gtest/gtest.h>

#include <string>

#include "engine/scenario/error.hpp"
#include "engine/scenario/scenario.hpp"

namespace stratagem::scenario {
namespace {

using nlohmann::json;

json base() {
  return json::parse(R"({
    "model": "gpt2",
    "cluster": "dgx-a100-80gb",
    "strategy": {"dp": 8},
    "training": {"seq_len": 1024, "global_batch": 64}
  })");
}

SpecError error_of(const json& j) {
  try {
    parse_scenario(j);
  } catch (const SpecError& e) {
    return e;
  }
  ADD_FAILURE() << "no SpecError for " << j.dump().substr(0, 200);
  return SpecError("", "");
}

TEST(Messages, ControlBytesAndInvalidUtf8AreEscapedValidUtf8Kept) {
  EXPECT_EQ(printable("a\nb\tc\rd"), "a\\nb\\tc\\rd");
  EXPECT_EQ(printable(std::string("x\0y", 3)), "x\\x00y");
  EXPECT_EQ(printable("\x1b[31mred"), "\\x1b[31mred");
  EXPECT_EQ(printable("\xff\xc3"), "\\xff\\xc3");           // not UTF-8
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a UTF-16 surrogate
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");           // overlong '/'
  EXPECT_EQ(printable("dp × pp — 8·A100 ✓ 🚀"), "dp × pp — 8·A100 ✓ 🚀");
}

TEST(Messages, LongTextIsCutSayingHowMuchAndPrintableIsIdempotent) {
  const std::string huge(1 << 20, 'v');
  const std::string cut = printable(huge, 100);
  EXPECT_EQ(cut, std::string(100, 'v') + "… (" + std::to_string((1 << 20) - 100) + " more bytes)");
  EXPECT_EQ(printable(cut, 100), cut);
  const std::string mixed = printable(std::string(300, '\n') + "tail", 100);
  EXPECT_EQ(printable(mixed, 100), mixed);
  EXPECT_EQ(mixed.find('\n'), std::string::npos);
  // Rewrapping a SpecError (as profile loading does) keeps it the same.
  const SpecError once("a\nb", huge);
  const SpecError twice(once.path(), once.reason());
  EXPECT_EQ(std::string(once.what()), std::string(twice.what()));
}

TEST(Messages, AKeyWithANewlineCannotForgeASecondLine) {
  json j = base();
  j["strategy"]["dp\nerror: all good"] = 1;
  const SpecError e = error_of(j);
  const std::string what = e.what();
  EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  EXPECT_NE(what.find("strategy.dp\\nerror: all good"), std::string::npos) << what;
}

TEST(Messages, ANulInAKeyDoesNotCutTheMessage) {
  json j = base();
  j["strategy"][std::string("dp\0x", 4)] = 1;
  const std::string what = error_of(j).what();
  EXPECT_NE(what.find("strategy.dp\\x00x"), std::string::npos) << what;
  EXPECT_NE(what.find("unknown key"), std::string::npos) << what;
}

TEST(Messages, AMegabyteValueIsNotEchoedInFull) {
  json j = base();
  j["strategy"]["schedule"] = std::string(1 << 20, 'z');
  const std::string what = error_of(j).what();
  EXPECT_LT(what.size(), 1000u) << what.substr(0, 200);
  EXPECT_NE(what.find("strategy.schedule"), std::string::npos) << what.substr(0, 200);
  EXPECT_NE(what.find("more bytes)"), std::string::npos) << what.substr(0, 200);
}

}  // namespace
}  // namespace stratagem::scenario
