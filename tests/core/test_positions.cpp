// Tests for the --positions grammar (core/positions.hpp) and the pieces other grammars reuse. Pure
// parsing: no error model.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ropecheck/core/positions.hpp"

namespace ropecheck {
namespace {

std::string error_of(auto&& f) {
  try {
    f();
  } catch (const SpecError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Positions, RangesListsTriplesAndGrids) {
  const PositionSet r = parse_positions("0:6:2,9,1/2/3");
  ASSERT_EQ(r.positions.size(), 5u);
  EXPECT_EQ(r.positions[1], Position::uniform(2));
  EXPECT_EQ(r.positions[3], Position::uniform(9));
  EXPECT_EQ(r.positions[4], (Position{1, 2, 3}));
  EXPECT_TRUE(r.has_triples);
  EXPECT_EQ(parse_positions("grid:10:2:3").positions.size(), 6u);
}

TEST(Positions, RefusalsNameTheItem) {
  EXPECT_EQ(error_of([] { parse_positions("5:2"); }), "--positions: '5:2': empty range (B must be > A)");
  EXPECT_EQ(error_of([] { parse_positions("0:x"); }), "--positions: '0:x': 'x' is not an integer");
  EXPECT_EQ(error_of([] { parse_positions("0:10", 4); }), "--positions: '0:10': more than 4 positions");
}

TEST(Positions, NumbersOfAnyGrammar) {
  EXPECT_EQ(parse_position_number("--pairs", "q:7", "7"), 7);
  EXPECT_EQ(parse_position_number("--pairs", "x", "9007199254740992"), 9007199254740992);  // 2^53
  EXPECT_EQ(error_of([] { parse_position_number("--pairs", "q:-1", "-1"); }), "--pairs: 'q:-1': -1 is outside [0, 2^53]");
  EXPECT_EQ(error_of([] { parse_position_number("--pairs", "q:", ""); }), "--pairs: 'q:': '' is not an integer");
  EXPECT_EQ(error_of([] { parse_position_number("--pairs", "q:1e3", "1e3"); }), "--pairs: 'q:1e3': '1e3' is not an integer");
}

TEST(Positions, SplitKeepsEmptyPieces) {
  EXPECT_EQ(split_items("a:b:c", ':'), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(split_items("a,,b,", ','), (std::vector<std::string>{"a", "", "b", ""}));
  EXPECT_TRUE(split_items("", ',').empty());
}

}  // namespace
}  // namespace ropecheck
