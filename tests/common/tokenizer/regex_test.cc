#include "common/tokenizer/regex.h"

#include "common/tokenizer/pattern.h"
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
  auto matches = re->FindAll(text);
  EXPECT_TRUE(matches.ok()) << matches.status();
  if (!matches.ok()) return {};
  std::vector<std::string> out;
  for (auto [b, e] : *matches) out.push_back(text.substr(b, e - b));
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
  const std::string text = "abbab";
  size_t b, e;
  ASSERT_TRUE(*re->Find(text, 0, &b, &e));
  EXPECT_EQ(b, 1u);
  EXPECT_EQ(e, 3u);
  ASSERT_TRUE(*re->Find(text, 3, &b, &e));
  EXPECT_EQ(b, 4u);
  EXPECT_FALSE(*re->Find(text, 5, &b, &e));
}

TEST(RegexTest, LongInputsStayLinear) {
  // A million spaces before a letter: the Llama 3 whitespace alternatives backtrack once.
  auto re = Regex::Compile(R"(\s*[\r\n]+|\s+(?!\S)|\s+)");
  ASSERT_TRUE(re.ok());
  std::string text(1000000, ' ');
  text.push_back('x');
  size_t b, e;
  ASSERT_TRUE(*re->Find(text, 0, &b, &e));
  EXPECT_EQ(e - b, 999999u);
}

TEST(RegexTest, UnsupportedConstructsAreErrors) {
  // Syntax errors, and Oniguruma constructs PCRE2 would read differently (nested classes,
  // class intersection, unknown inline flags).
  for (const char* bad : {"(?<=a+)b", "a**", "[a", "(a", "a)", "\\p{NoSuchProperty}", "a{3,2}",
                          "[[a]]", "[a&&b]", "(?W)a", "\\u12"}) {
    auto re = Regex::Compile(bad);
    EXPECT_FALSE(re.ok()) << bad;
    if (!re.ok()) {
      EXPECT_THAT(std::string(re.status().message()), HasSubstr("regex /"));
    }
  }
}

TEST(RegexTest, LookBehindBackReferencesBoundariesAndPossessives) {
  EXPECT_THAT(Matches("(?<=a)b", "ab cb ab"), ElementsAre("b", "b"));
  EXPECT_THAT(Matches("(?<!a)b", "ab cb"), ElementsAre("b"));
  EXPECT_THAT(Matches(R"((a)\1)", "aa a aa"), ElementsAre("aa", "aa"));
  EXPECT_THAT(Matches(R"(\bab\b)", "ab cab ab_ ab"), ElementsAre("ab", "ab"));
  EXPECT_THAT(Matches("a++b|a+", "aaab aa"), ElementsAre("aaab", "aa"));
  EXPECT_THAT(Matches("(?>a+)b", "aab"), ElementsAre("aab"));
  EXPECT_THAT(Matches("(a*)*b", "aab b"), ElementsAre("aab", "b"));
}

TEST(RegexTest, OnigurumaMeaningsWherePcre2Differs) {
  // \w is letters, marks, decimal digits and connector punctuation: a combining accent is a word
  // character, a superscript digit (No) is not.
  EXPECT_THAT(Matches(R"(\w+)", "e\xCC\x81t\xC3\xA9\xC2\xB2x\xE2\x80\xBFy"),
              ElementsAre("e\xCC\x81t\xC3\xA9", "x\xE2\x80\xBFy"));
  EXPECT_THAT(Matches(R"(\W+)",
                      "a\xC2\xB2"
                      "b"),
              ElementsAre("\xC2\xB2"));
  EXPECT_THAT(Matches(R"([^\w\s]+)", "a!\xC2\xB2 b"), ElementsAre("!\xC2\xB2"));
  EXPECT_THAT(Matches(R"([\W\d]+)", "ab!2c"), ElementsAre("!2"));
  // \s is White_Space: U+180E (Mongolian vowel separator) is not, U+0085 is.
  EXPECT_THAT(Matches(R"(\s+)",
                      "a\xE1\xA0\x8E\xC2\x85"
                      "b"),
              ElementsAre("\xC2\x85"));
  EXPECT_THAT(Matches(R"([\S]+)", "a\xE1\xA0\x8E b"), ElementsAre("a\xE1\xA0\x8E", "b"));
  // \h is a hexadecimal digit, \v the vertical tab, {,n} is {0,n}.
  EXPECT_THAT(Matches(R"(\h+)", "xbeef1 zz"), ElementsAre("beef1"));
  EXPECT_THAT(Matches(R"(\v)", "a\v\nb"), ElementsAre("\v"));
  EXPECT_THAT(Matches("ba{,2}", "baaa b"), ElementsAre("baa", "b"));
  // Long general-category names and \p{^...}.
  EXPECT_THAT(Matches(R"(\p{Letter}+)", "ab1c"), ElementsAre("ab", "c"));
  EXPECT_THAT(Matches(R"(\p{Lowercase_Letter}+)", "abCd"), ElementsAre("ab", "d"));
  EXPECT_THAT(Matches(R"(\p{^L}+)", "ab12c"), ElementsAre("12"));
  // (?m) lets . match a newline.
  EXPECT_THAT(Matches("(?m:a.b)|a", "a\nb"), ElementsAre("a\nb"));
  EXPECT_THAT(Matches("a.b|a", "a\nb"), ElementsAre("a"));
  // ^ also matches after a final newline.
  EXPECT_THAT(Matches("\n^", "a\n"), ElementsAre("\n"));
}

TEST(RegexTest, InvalidUtf8IsAnError) {
  auto re = Regex::Compile("a");
  ASSERT_TRUE(re.ok());
  EXPECT_EQ(re->FindAll("a\xFF"
                        "a")
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  size_t b, e;
  EXPECT_EQ(re->Find("\xC3\xA9", 1, &b, &e).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RegexTest, CatastrophicBacktrackingHitsTheMatchLimit) {
  auto re = Regex::Compile("x|(a+)+b");
  ASSERT_TRUE(re.ok());
  const std::string text = "x" + std::string(40, 'a');
  size_t b, e;
  EXPECT_EQ(re->Find(text, 1, &b, &e).status().code(), absl::StatusCode::kResourceExhausted);
  // ForEachMatch reports the matches before the failing search, then the error.
  std::vector<std::pair<size_t, size_t>> seen;
  const absl::Status s = re->ForEachMatch(text, [&](size_t mb, size_t me) {
    seen.emplace_back(mb, me);
    return true;
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(seen, ElementsAre(std::make_pair(size_t{0}, size_t{1})));
  // A tokenizer pattern treats the rest of the text as unmatched instead.
  auto pattern = TextPattern::FromJson({{"Regex", "x|(a+)+b"}}, "p");
  ASSERT_TRUE(pattern.ok());
  EXPECT_THAT(pattern->FindAll(text), ElementsAre(std::make_pair(size_t{0}, size_t{1})));
  EXPECT_EQ(pattern->ReplaceAll(text, "-"), "-" + std::string(40, 'a'));
}

TEST(RegexTest, ForEachMatchStopsWhenAsked) {
  auto re = Regex::Compile("a");
  ASSERT_TRUE(re.ok());
  int calls = 0;
  EXPECT_TRUE(re->ForEachMatch("aaaa", [&](size_t, size_t) { return ++calls < 2; }).ok());
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace tandem
