// StopStringMatcher: held-back text, matches across chunks, the earliest match wins,
// include_stop_str_in_output, Flush.
#include "router/stop_strings.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tandem {
namespace {

// Pushes `chunks` and returns what was emitted, Flush included unless a stop matched.
std::string RunChunks(StopStringMatcher& m, const std::vector<std::string>& chunks) {
  std::string out;
  for (const std::string& c : chunks) {
    StopStringMatcher::Result r = m.Push(c);
    out += r.text;
    if (r.stopped) return out;
  }
  return out + m.Flush();
}

TEST(StopStringMatcherTest, NoStopStringsPassesEverythingThrough) {
  StopStringMatcher m({}, false);
  StopStringMatcher::Result r = m.Push("Hello");
  EXPECT_EQ(r.text, "Hello");
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(m.Push(" world").text, " world");
  EXPECT_EQ(m.Flush(), "");
}

TEST(StopStringMatcherTest, StopsWhereTheStopStringBegins) {
  StopStringMatcher m({"wor"}, false);
  StopStringMatcher::Result r = m.Push("Hello world");
  EXPECT_EQ(r.text, "Hello ");
  EXPECT_TRUE(r.stopped);
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.matched(), "wor");
  // Nothing after a stop.
  EXPECT_EQ(m.Push("more").text, "");
  EXPECT_EQ(m.Flush(), "");
}

TEST(StopStringMatcherTest, IncludeStopStringInOutput) {
  StopStringMatcher m({"wor"}, true);
  StopStringMatcher::Result r = m.Push("Hello world");
  EXPECT_EQ(r.text, "Hello wor");
  EXPECT_TRUE(r.stopped);
}

TEST(StopStringMatcherTest, HoldsBackAPossibleStartAndReleasesItWhenItIsNot) {
  StopStringMatcher m({"STOP"}, false);
  StopStringMatcher::Result r = m.Push("abc ST");
  EXPECT_EQ(r.text, "abc ");
  EXPECT_EQ(m.held_bytes(), 2u);
  r = m.Push("AY");
  EXPECT_EQ(r.text, "STAY");
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(m.held_bytes(), 0u);
}

TEST(StopStringMatcherTest, MatchesAcrossChunkBoundaries) {
  StopStringMatcher m({"o w"}, false);
  EXPECT_EQ(RunChunks(m, {"Hel", "lo", " w", "orld"}), "Hell");
  EXPECT_TRUE(m.stopped());

  StopStringMatcher one_byte_chunks({"</s>"}, false);
  EXPECT_EQ(RunChunks(one_byte_chunks, {"a", "<", "/", "s", ">", "b"}), "a");
  EXPECT_TRUE(one_byte_chunks.stopped());
}

TEST(StopStringMatcherTest, EarliestMatchWinsThenLongestAtTheSamePosition) {
  StopStringMatcher earliest({"world", "lo"}, false);
  EXPECT_EQ(RunChunks(earliest, {"Hello world"}), "Hel");
  EXPECT_EQ(earliest.matched(), "lo");

  StopStringMatcher longest({"ab", "abc"}, true);
  EXPECT_EQ(RunChunks(longest, {"xxabcd"}), "xxabc");
  EXPECT_EQ(longest.matched(), "abc");
}

TEST(StopStringMatcherTest, FlushReturnsHeldTextAtTheEnd) {
  StopStringMatcher m({"STOP"}, false);
  EXPECT_EQ(m.Push("abc S").text, "abc ");
  EXPECT_EQ(m.Flush(), "S");
  EXPECT_FALSE(m.stopped());
}

TEST(StopStringMatcherTest, HoldsOnlyTheLongestPossiblePrefix) {
  // "aab": the held suffix must be "aa" (could start "aab"), not just "a".
  StopStringMatcher m({"aab"}, false);
  EXPECT_EQ(m.Push("xaa").text, "x");
  EXPECT_EQ(m.held_bytes(), 2u);
  StopStringMatcher::Result r = m.Push("b!");
  EXPECT_EQ(r.text, "");
  EXPECT_TRUE(r.stopped);
}

TEST(StopStringMatcherTest, MultiByteStopStrings) {
  StopStringMatcher m({"é!"}, false);
  EXPECT_EQ(RunChunks(m, {"caf", "é", "!", " more"}), "caf");
  EXPECT_TRUE(m.stopped());

  StopStringMatcher no_match({"é!"}, false);
  EXPECT_EQ(RunChunks(no_match, {"caf", "é", "?"}), "café?");
}

TEST(StopStringMatcherTest, EmptyStopStringsAreIgnored) {
  StopStringMatcher m({""}, false);
  EXPECT_EQ(RunChunks(m, {"abc"}), "abc");
  EXPECT_FALSE(m.stopped());
}

}  // namespace
}  // namespace tandem
