#include <gtest/gtest.h>

#include "engine/scenario/error.hpp"
#include "viz/model/input_script.hpp"

namespace stratagem::viz {
namespace {

TEST(InputScript, ExpandsActionsIntoFrames) {
  const auto f = parse_input_script("move 10,20; click 30,40 ; wheel 5,6 -2");
  ASSERT_EQ(f.size(), 1u + 3u + 2u);
  EXPECT_FLOAT_EQ(f[0].x, 10);
  EXPECT_FLOAT_EQ(f[0].y, 20);
  EXPECT_FALSE(f[0].left);
  EXPECT_TRUE(f[2].left);   // pressed
  EXPECT_FALSE(f[3].left);  // released
  EXPECT_FLOAT_EQ(f[5].wheel, -2);
  EXPECT_FLOAT_EQ(f[4].wheel, 0);
}

TEST(InputScript, DragsMoveInStepsWithTheButtonHeld) {
  const auto f = parse_input_script("rdrag 100,50 200,50");
  ASSERT_EQ(f.size(), 1u + 9u + 1u);
  EXPECT_FALSE(f[0].right);
  for (int i = 1; i <= 9; ++i) {
    EXPECT_TRUE(f[i].right);
    EXPECT_FALSE(f[i].left);
  }
  EXPECT_FLOAT_EQ(f[1].x, 100);
  EXPECT_FLOAT_EQ(f[5].x, 150);
  EXPECT_FLOAT_EQ(f[9].x, 200);
  EXPECT_FALSE(f[10].right);
  EXPECT_TRUE(parse_input_script("drag 0,0 8,0")[1].left);
}

TEST(InputScript, RejectsMalformedScripts) {
  EXPECT_TRUE(parse_input_script("").empty());
  EXPECT_THROW(parse_input_script("tap 1,2"), SpecError);
  EXPECT_THROW(parse_input_script("click 1;2"), SpecError);
  EXPECT_THROW(parse_input_script("drag 1,2"), SpecError);
  EXPECT_THROW(parse_input_script("wheel 1,2 lots"), SpecError);
}

}  // namespace
}  // namespace stratagem::viz
