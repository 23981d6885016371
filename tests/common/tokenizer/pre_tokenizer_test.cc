// Pre-tokenizer splitting, including the `\s+(?!\S)` alternative of the Llama 3 / Qwen
// patterns that RE2 cannot express.
#include "common/tokenizer/pre_tokenizer.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/tokenizer/test_tokenizers.h"

namespace tandem {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

std::vector<std::string> Split(const nlohmann::json& config, const std::string& text,
                               bool at_origin = true) {
  auto p = PreTokenizer::FromJson(config, "pre_tokenizer");
  EXPECT_TRUE(p.ok()) << p.status();
  std::vector<std::string> out;
  for (auto& t : p->Apply(text, at_origin)) out.push_back(t.text);
  return out;
}

nlohmann::json RegexSplit(const char* pattern, const char* behavior = "Isolated",
                          bool invert = false) {
  return {{"type", "Split"},
          {"pattern", {{"Regex", pattern}}},
          {"behavior", behavior},
          {"invert", invert}};
}

TEST(PreTokenizerTest, Llama3PatternWhitespace) {
  const auto llama3 = RegexSplit(testing::kLlama3Pattern);
  EXPECT_THAT(Split(llama3, "Hello world"), ElementsAre("Hello", " world"));
  // \s+(?!\S): the last space of a run goes with the next word.
  EXPECT_THAT(Split(llama3, "a  b"), ElementsAre("a", " ", " b"));
  EXPECT_THAT(Split(llama3, "a    b"), ElementsAre("a", "   ", " b"));
  // ...but a run at the end of the text stays whole.
  EXPECT_THAT(Split(llama3, "a   "), ElementsAre("a", "   "));
  EXPECT_THAT(Split(llama3, "\t\tx"), ElementsAre("\t", "\tx"));
  // Before punctuation the last space joins it (" ?[^\s\p{L}\p{N}]+").
  EXPECT_THAT(Split(llama3, "a   !"), ElementsAre("a", "  ", " !"));
  // \s*[\r\n]+ takes whitespace up to and including newlines.
  EXPECT_THAT(Split(llama3, "x\n\ny"), ElementsAre("x", "\n\n", "y"));
  EXPECT_THAT(Split(llama3, "x \n y"), ElementsAre("x", " \n", " y"));
  EXPECT_THAT(Split(llama3, "x  \n\n  "), ElementsAre("x", "  \n\n", "  "));
  // Unicode whitespace counts (NBSP, ideographic space).
  EXPECT_THAT(Split(llama3, "a\u00a0\u00a0b"), ElementsAre("a", "\u00a0", "\u00a0b"));
  EXPECT_THAT(Split(llama3, "\u3000x"), ElementsAre("\u3000x"));
  // Hugging Face's \s is Unicode White_Space: NEL (U+0085) is whitespace, the BOM is not
  // (JavaScript's \s, used by transformers.js, has it the other way round).
  EXPECT_THAT(Split(llama3, "a  \u0085b"), ElementsAre("a", "  ", "\u0085b"));
  EXPECT_THAT(Split(llama3, "x \ufeffy"), ElementsAre("x", " \ufeff", "y"));
}

TEST(PreTokenizerTest, Llama3PatternWordsNumbersPunctuation) {
  const auto llama3 = RegexSplit(testing::kLlama3Pattern);
  EXPECT_THAT(Split(llama3, "I'M don't they'Re"),
              ElementsAre("I", "'M", " don", "'t", " they", "'Re"));
  EXPECT_THAT(Split(llama3, "12345 1234567"), ElementsAre("123", "45", " ", "123", "456", "7"));
  EXPECT_THAT(Split(llama3, "Hi!!! ok"), ElementsAre("Hi", "!!!", " ok"));
  EXPECT_THAT(Split(llama3, "end.\n\nNext"), ElementsAre("end", ".\n\n", "Next"));
  EXPECT_THAT(Split(llama3, "(hello)"), ElementsAre("(hello", ")"));
  EXPECT_THAT(Split(llama3, "\xE4\xBD\xA0\xE5\xA5\xBD \xE4\xB8\x96"),
              ElementsAre("\xE4\xBD\xA0\xE5\xA5\xBD", " \xE4\xB8\x96"));
  EXPECT_THAT(Split(llama3, "abc123def"), ElementsAre("abc", "123", "def"));
  EXPECT_THAT(Split(llama3, "x'sy"), ElementsAre("x", "'s", "y"));
}

TEST(PreTokenizerTest, QwenPatternSplitsSingleDigits) {
  EXPECT_THAT(Split(RegexSplit(testing::kQwenPattern), "12345"),
              ElementsAre("1", "2", "3", "4", "5"));
}

TEST(PreTokenizerTest, SplitBehaviors) {
  const nlohmann::json space = {{"String", " "}};
  auto split = [&](const char* behavior, bool invert = false) {
    return Split(
        {{"type", "Split"}, {"pattern", space}, {"behavior", behavior}, {"invert", invert}},
        "a b  c");
  };
  EXPECT_THAT(split("Removed"), ElementsAre("a", "b", "c"));
  EXPECT_THAT(split("Isolated"), ElementsAre("a", " ", "b", " ", " ", "c"));
  EXPECT_THAT(split("MergedWithPrevious"), ElementsAre("a ", "b ", " ", "c"));
  EXPECT_THAT(split("MergedWithNext"), ElementsAre("a", " b", " ", " c"));
  EXPECT_THAT(split("Contiguous"), ElementsAre("a", " ", "b", "  ", "c"));
  EXPECT_THAT(split("Removed", true), ElementsAre(" ", " ", " "));
}

TEST(PreTokenizerTest, ByteLevelWithGpt2Regex) {
  const nlohmann::json config = {
      {"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
  EXPECT_THAT(Split(config, "Hello world's 42"),
              ElementsAre(testing::Bl(" Hello"), testing::Bl(" world"), "'s", testing::Bl(" 42")));
  EXPECT_THAT(
      Split({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}, "a b\n"),
      ElementsAre(testing::Bl("a b\n")));
}

TEST(PreTokenizerTest, Metaspace) {
  nlohmann::json config = {{"type", "Metaspace"},
                           {"replacement", "\u2581"},
                           {"prepend_scheme", "first"},
                           {"split", false}};
  EXPECT_THAT(Split(config, "Hello world"), ElementsAre("\u2581Hello\u2581world"));
  EXPECT_THAT(Split(config, "Hello world", /*at_origin=*/false), ElementsAre("Hello\u2581world"));
  config["split"] = true;
  EXPECT_THAT(Split(config, "Hello  world"), ElementsAre("\u2581Hello", "\u2581", "\u2581world"));
  config["prepend_scheme"] = "never";
  EXPECT_THAT(Split(config, "Hello world"), ElementsAre("Hello", "\u2581world"));
  // Legacy add_prefix_space without prepend_scheme means "always".
  EXPECT_THAT(Split({{"type", "Metaspace"}, {"replacement", "\u2581"}, {"add_prefix_space", true}},
                    "x", false),
              ElementsAre("\u2581x"));
}

TEST(PreTokenizerTest, DigitsAndWhitespace) {
  EXPECT_THAT(Split({{"type", "Digits"}, {"individual_digits", true}}, "a123b"),
              ElementsAre("a", "1", "2", "3", "b"));
  EXPECT_THAT(Split({{"type", "Digits"}, {"individual_digits", false}}, "a123b"),
              ElementsAre("a", "123", "b"));
  EXPECT_THAT(Split({{"type", "WhitespaceSplit"}}, " a  b\tc "), ElementsAre("a", "b", "c"));
  EXPECT_THAT(Split({{"type", "Whitespace"}}, "hi, you!"), ElementsAre("hi", ",", "you", "!"));
}

TEST(PreTokenizerTest, SequenceAndNull) {
  const nlohmann::json seq = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "WhitespaceSplit"}}, {{"type", "Digits"}, {"individual_digits", true}}}}};
  EXPECT_THAT(Split(seq, "ab12 c3"), ElementsAre("ab", "1", "2", "c", "3"));
  EXPECT_THAT(Split(nullptr, " any text "), ElementsAre(" any text "));
}

TEST(PreTokenizerTest, Errors) {
  EXPECT_FALSE(
      PreTokenizer::FromJson({{"type", "Split"}, {"pattern", {{"Regex", "("}}}}, "p").ok());
  EXPECT_FALSE(
      PreTokenizer::FromJson(
          {{"type", "Split"}, {"pattern", {{"String", "x"}}}, {"behavior", "Sideways"}}, "p")
          .ok());
  EXPECT_FALSE(PreTokenizer::FromJson({{"type", "Metaspace"}, {"replacement", "ab"}}, "p").ok());
  EXPECT_FALSE(PreTokenizer::FromJson({{"no_type", 1}}, "p").ok());
}

}  // namespace
}  // namespace tandem
