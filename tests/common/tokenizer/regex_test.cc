#include "common/tokenizer/regex.h"

#include "common/tokenizer/unicode/unicode_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// All matches of `pattern` in `text`, as UTF-8 strings.
std::vector<std::string> Matches(const std::string& pattern, const std::string& text) {
  auto re = Regex::Compile(pattern);
  EXPECT_TRUE(re.ok()) << re.status();
  if (!re.ok()) return {};
  const std::u32string cps = unicode::Utf8ToCodePoints(text);
  std::vector<std::string> out;
  for (auto [b, e] : re->FindAll(cps))
    out.push_back(unicode::CodePointsToUtf8(cps.substr(b, e - b)));
  return out;
}

TEST(RegexTest, AlternativesAreTriedInOrder) {
  // Leftmost-first, not leftmost-longest.
  EXPECT_THAT(Matches("a|ab", "ab"), ElementsAre("a"));
  EXPECT_THAT(Matches("ab|a", "ab"), ElementsAre("ab"));
}

TEST(RegexTest, GreedyQuantifiersGiveBack) {
  EXPECT_THAT(Matches("a+ab", "aaab"), ElementsAre("aaab"));
  EXPECT_THAT(Matches("x*y", "xxy y"), ElementsAre("xxy", "y"));
  EXPECT_THAT(Matches("a{2,3}", "aaaaaaa"), ElementsAre("aaa", "aaa"));
  EXPECT_THAT(Matches("a{2}", "aaaaa"), ElementsAre("aa", "aa"));
  EXPECT_THAT(Matches("ba{1,}", "baaa ba"), ElementsAre("baaa", "ba"));
  EXPECT_THAT(Matches("a+?", "aaa"), ElementsAre("a", "a", "a"));
  EXPECT_THAT(Matches("<.*?>", "<a><b>"), ElementsAre("<a>", "<b>"));
}

TEST(RegexTest, NegativeLookahead) {
  EXPECT_THAT(Matches(R"(\s+(?!\S))", "a   b"), ElementsAre("  "));
  EXPECT_THAT(Matches(R"(\s+(?!\S)|\s+)", "a   b   "), ElementsAre("  ", " ", "   "));
  EXPECT_THAT(Matches("a(?=b)", "ab ac ab"), ElementsAre("a", "a"));
  EXPECT_THAT(Matches("a(?!b)", "ab ac"), ElementsAre("a"));
}

TEST(RegexTest, UnicodeClasses) {
  EXPECT_THAT(Matches(R"(\p{L}+)", "h\xC3\xA9llo w\xC3\xB6rld \xE4\xB8\xAD\xE6\x96\x87 42"),
              ElementsAre("h\xC3\xA9llo", "w\xC3\xB6rld", "\xE4\xB8\xAD\xE6\x96\x87"));
  // \p{N} includes other digits and numerals (Arabic-Indic, superscripts, Roman numerals).
  EXPECT_THAT(Matches(R"(\p{N})", "1\xD9\xA3\xC2\xB2\xE2\x85\xAB"),
              ElementsAre("1", "\xD9\xA3", "\xC2\xB2", "\xE2\x85\xAB"));
  EXPECT_THAT(Matches(R"([^\s\p{L}\p{N}]+)", "ab!?  --x"), ElementsAre("!?", "--"));
  // \s is Unicode White_Space, including NBSP and U+3000, not just ASCII.
  EXPECT_THAT(Matches(R"(\s+)",
                      "a\xC2\xA0\xE3\x80\x80"
                      "b\tc"),
              ElementsAre("\xC2\xA0\xE3\x80\x80", "\t"));
  EXPECT_THAT(Matches(R"(\p{Lu}\p{Ll}+)", "Hello World"), ElementsAre("Hello", "World"));
  EXPECT_THAT(Matches(R"(\p{Han}+)",
                      "ab\xE4\xB8\xAD\xE6\x96\x87"
                      "cd"),
              ElementsAre("\xE4\xB8\xAD\xE6\x96\x87"));
  EXPECT_THAT(Matches(R"(\d+|\w+)", "ab_1 23"), ElementsAre("ab_1", "23"));
  EXPECT_THAT(Matches(R"(\P{L}+)", "ab12cd"), ElementsAre("12"));
}

TEST(RegexTest, CaseInsensitiveGroups) {
  EXPECT_THAT(Matches("(?i:'s|'t)", "'S 's 'T 'x"), ElementsAre("'S", "'s", "'T"));
  EXPECT_THAT(Matches("(?i)ab|c", "AB C c"), ElementsAre("AB", "C", "c"));
  EXPECT_THAT(Matches("(?i:[a-c]+)x", "ABCx abcX"), ElementsAre("ABCx"));
}

TEST(RegexTest, ClassesEscapesAndAnchors) {
  EXPECT_THAT(Matches(R"([\r\n]+)", "a\r\n\nb"), ElementsAre("\r\n\n"));
  EXPECT_THAT(Matches(R"([a-c-])", "b-d"), ElementsAre("b", "-"));
  EXPECT_THAT(Matches(R"(\x41\u00e9\x{4E2D}\.)", "A\xC3\xA9\xE4\xB8\xAD."),
              ElementsAre("A\xC3\xA9\xE4\xB8\xAD."));
  EXPECT_THAT(Matches("^a", "a\na"), ElementsAre("a", "a"));
  EXPECT_THAT(Matches(R"(\Aa)", "a\na"), ElementsAre("a"));
  EXPECT_THAT(Matches("a$", "a\na"), ElementsAre("a", "a"));
  EXPECT_THAT(Matches(".+", "ab\ncd"), ElementsAre("ab", "cd"));
  EXPECT_THAT(Matches("(?:ab)+|(c)", "ababc"), ElementsAre("abab", "c"));
}

TEST(RegexTest, FindFromOffset) {
  auto re = Regex::Compile("b+");
  ASSERT_TRUE(re.ok());
  const std::u32string text = U"abbab";
  size_t b, e;
  ASSERT_TRUE(re->Find(text, 0, &b, &e));
  EXPECT_EQ(b, 1u);
  EXPECT_EQ(e, 3u);
  ASSERT_TRUE(re->Find(text, 3, &b, &e));
  EXPECT_EQ(b, 4u);
  EXPECT_FALSE(re->Find(text, 5, &b, &e));
}

TEST(RegexTest, LongInputsStayLinear) {
  // A million spaces before a letter: the Llama 3 whitespace alternatives backtrack once.
  auto re = Regex::Compile(R"(\s*[\r\n]+|\s+(?!\S)|\s+)");
  ASSERT_TRUE(re.ok());
  std::u32string text(1000000, U' ');
  text.push_back(U'x');
  size_t b, e;
  ASSERT_TRUE(re->Find(text, 0, &b, &e));
  EXPECT_EQ(e - b, 999999u);
}

TEST(RegexTest, UnsupportedConstructsAreErrors) {
  for (const char* bad : {"(?<=a)b", "(a)\\1", "a**", "[a", "(a", "a)", "\\p{NoSuchProperty}",
                          "(a*)*", "a{3,2}", "a++", "[[a]]", "\\b"}) {
    auto re = Regex::Compile(bad);
    EXPECT_FALSE(re.ok()) << bad;
    if (!re.ok()) EXPECT_THAT(std::string(re.status().message()), HasSubstr("regex /"));
  }
}

}  // namespace
}  // namespace tandem
