// Byte-level BPE tokenizer (Llama 3 / Qwen layout) on the synthetic vocabulary of
// test_tokenizers.h; expected ids derived by hand from its merge list.
#include "common/tokenizer/tokenizer.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/tokenizer/test_tokenizers.h"

namespace tandem {
namespace {

using testing::Bl;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::unique_ptr<Tokenizer> LoadTokenizer(const nlohmann::json& j) {
  auto tok = Tokenizer::FromJson(j.dump(), "test/tokenizer.json");
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? std::move(*tok) : nullptr;
}

class ByteLevelTokenizerTest : public ::testing::Test {
 protected:
  std::unique_ptr<Tokenizer> tok_ = LoadTokenizer(testing::ByteLevelTokenizerJson());
};

TEST_F(ByteLevelTokenizerTest, MergesInRankOrder) {
  // "hello" -> he, ll, hell, hello; " world" -> Ġw, or, Ġwor, Ġworl, Ġworld.
  EXPECT_THAT(tok_->Encode("hello world", false), ElementsAre(259, 264));
  EXPECT_THAT(tok_->Encode("hell", false), ElementsAre(258));
  // "lloh": only l+l merges.
  EXPECT_THAT(tok_->Encode("lloh", false), ElementsAre(257, 'o', 'h'));
  // Equal ranks merge leftmost first: "lll" -> ll, l.
  EXPECT_THAT(tok_->Encode("lll", false), ElementsAre(257, 'l'));
  // A vocabulary entry no merge path reaches stays unreachable without ignore_merges.
  EXPECT_THAT(tok_->Encode("abc", false), ElementsAre('a', 'b', 'c'));
}

TEST_F(ByteLevelTokenizerTest, PostProcessorAddsBos) {
  EXPECT_THAT(tok_->Encode("hello", true), ElementsAre(300, 259));
  EXPECT_THAT(tok_->Encode("", true), ElementsAre(300));
  EXPECT_THAT(tok_->Encode("", false), ElementsAre());
  EXPECT_THAT(tok_->prefix_special_ids(), ElementsAre(300));
}

TEST_F(ByteLevelTokenizerTest, PreTokenizerDigitsAndContractions) {
  // \p{N}{1,3}: "12345" -> "123" "45"; the contraction "'s" is its own word.
  EXPECT_THAT(tok_->Encode("12345", false), ElementsAre(267, '4', '5'));
  EXPECT_THAT(tok_->Encode("it's", false), ElementsAre('i', 't', 268));
  // "  world": "\s+(?!\S)" leaves one space for the word: "Ġ", "Ġworld".
  EXPECT_THAT(tok_->Encode("  world", false), ElementsAre(' ', 264));
  // Two trailing spaces are one word: "ĠĠ".
  EXPECT_THAT(tok_->Encode("hello  ", false), ElementsAre(259, 265));
}

TEST_F(ByteLevelTokenizerTest, MultiByteCharactersAreBytes) {
  // No merges cover é (C3 A9) or 中 (E4 B8 AD): one token per byte.
  EXPECT_THAT(tok_->Encode("\xC3\xA9", false), ElementsAre(0xC3, 0xA9));
  EXPECT_THAT(tok_->Encode("\xE4\xB8\xAD", false), ElementsAre(0xE4, 0xB8, 0xAD));
  // Invalid UTF-8 input is repaired to U+FFFD (EF BF BD) first.
  EXPECT_THAT(tok_->Encode("\xFF", false), ElementsAre(0xEF, 0xBF, 0xBD));
}

TEST_F(ByteLevelTokenizerTest, AddedTokensAreMatchedBeforePreTokenization) {
  EXPECT_THAT(tok_->Encode("<|bos|>hello<|eot|>", false), ElementsAre(300, 259, 301));
  EXPECT_THAT(tok_->Encode("hello<think>", false), ElementsAre(259, 302));
  // Partial matches are ordinary text.
  EXPECT_THAT(tok_->Encode("<|eot", false), ElementsAre('<', '|', 'e', 'o', 't'));
}

TEST_F(ByteLevelTokenizerTest, AddedTokenStripFlags) {
  // [lst] swallows the whitespace on its left, [rst] the whitespace on its right.
  EXPECT_THAT(tok_->Encode("hello  [lst] hello", false), ElementsAre(259, 303, ' ', 259));
  EXPECT_THAT(tok_->Encode("hello [rst]  hello", false), ElementsAre(259, ' ', 304, 259));
}

TEST_F(ByteLevelTokenizerTest, AddedTokenSingleWord) {
  // WORD only matches as a whole word.
  EXPECT_THAT(tok_->Encode("a WORD b", false), ElementsAre('a', ' ', 305, ' ', 'b'));
  EXPECT_THAT(tok_->Encode("aWORD", false), ElementsAre('a', 'W', 'O', 'R', 'D'));
  EXPECT_THAT(tok_->Encode("WORDs", false), ElementsAre('W', 'O', 'R', 'D', 's'));
  // \w includes '_' and combining marks.
  EXPECT_THAT(tok_->Encode("_WORD", false), ElementsAre('_', 'W', 'O', 'R', 'D'));
  EXPECT_THAT(tok_->Encode("(WORD)", false), ElementsAre('(', 305, ')'));
}

TEST_F(ByteLevelTokenizerTest, NormalizedAddedTokenMatchesAfterNormalization) {
  nlohmann::json j = testing::ByteLevelTokenizerJson();
  j["normalizer"] = {{"type", "Lowercase"}};
  j["added_tokens"].push_back(
      {{"id", 307}, {"content", "<UP>"}, {"special", false}, {"normalized", true}});
  auto tok = LoadTokenizer(j);
  // "~N~" lowercases to "~n~", which matches the normalized added token.
  EXPECT_THAT(tok->Encode("~N~", false), ElementsAre(306));
  EXPECT_THAT(tok->Encode("HELLO", false), ElementsAre(259));
  // A normalized token is matched by its normalized content: "<UP>" is looked for as "<up>",
  // so any casing of it in the input matches.
  EXPECT_THAT(tok->Encode("a<Up>", false), ElementsAre('a', 307));
  // Non-normalized tokens match the raw input only: "<|EOT|>" is not <|eot|>.
  EXPECT_THAT(tok->Encode("<|EOT|>", false), ::testing::Not(::testing::Contains(301)));
}

TEST_F(ByteLevelTokenizerTest, IgnoreMerges) {
  nlohmann::json j = testing::ByteLevelTokenizerJson();
  j["model"]["ignore_merges"] = true;
  auto tok = LoadTokenizer(j);
  EXPECT_THAT(tok->Encode("abc", false), ElementsAre(269));
  EXPECT_THAT(tok->Encode("hello world", false), ElementsAre(259, 264));
}

TEST_F(ByteLevelTokenizerTest, DecodeAndSkipSpecial) {
  const std::vector<TokenId> ids = {300, 259, 264, 301, 302};
  EXPECT_EQ(tok_->Decode(ids), "<|bos|>hello world<|eot|><think>");
  // <think> is not special, so it stays.
  EXPECT_EQ(tok_->Decode(ids, /*skip_special_tokens=*/true), "hello world<think>");
  // Unknown ids are ignored; incomplete UTF-8 becomes U+FFFD.
  EXPECT_EQ(tok_->Decode(std::vector<TokenId>{259, 99999, -5}), "hello");
  EXPECT_EQ(tok_->Decode(std::vector<TokenId>{0xE4, 0xB8}), "\xEF\xBF\xBD");
  EXPECT_EQ(tok_->Decode(std::vector<TokenId>{0xE4, 0xB8, 0xAD}), "\xE4\xB8\xAD");
  EXPECT_EQ(tok_->DecodeBytes(std::vector<TokenId>{0xE4, 0xB8}), "\xE4\xB8");
}

TEST_F(ByteLevelTokenizerTest, RoundTrip) {
  for (const std::string text :
       {"hello world", "  leading and trailing  ", "tabs\tand\nnewlines\n\n",
        "12345 it's <|eot|> WORD \xF0\x9F\x98\x80 \xE4\xB8\xAD\xE6\x96\x87"}) {
    EXPECT_EQ(tok_->Decode(tok_->Encode(text, false)), text);
  }
}

TEST_F(ByteLevelTokenizerTest, VocabularyQueries) {
  EXPECT_EQ(tok_->vocab_size(), 307);
  EXPECT_EQ(tok_->TokenToId("<|eot|>"), 301);
  EXPECT_EQ(tok_->TokenToId(Bl(" world")), 264);
  EXPECT_EQ(tok_->TokenToId("nope"), std::nullopt);
  EXPECT_EQ(tok_->IdToToken(264), Bl(" world"));
  EXPECT_EQ(tok_->IdToToken(302), "<think>");
  EXPECT_EQ(tok_->IdToToken(280), "");
  EXPECT_TRUE(tok_->IsSpecial(301));
  EXPECT_FALSE(tok_->IsSpecial(302));
  EXPECT_FALSE(tok_->IsSpecial(259));
}

TEST_F(ByteLevelTokenizerTest, LegacyMergeStrings) {
  // Merges given as "a b" strings (older files) and as [a, b] pairs give the same model.
  nlohmann::json j = testing::ByteLevelTokenizerJson();
  nlohmann::json pairs = nlohmann::json::array();
  for (const auto& m : j["model"]["merges"]) {
    const std::string s = m.get<std::string>();
    pairs.push_back({s.substr(0, s.find(' ')), s.substr(s.find(' ') + 1)});
  }
  j["model"]["merges"] = pairs;
  auto tok = LoadTokenizer(j);
  EXPECT_THAT(tok->Encode("hello world", false), ElementsAre(259, 264));
}

TEST(TokenizerErrorsTest, MalformedFilesNameFileAndField) {
  auto status_of = [](const nlohmann::json& j) {
    return Tokenizer::FromJson(j.dump(), "m/tokenizer.json").status();
  };
  auto expect_error = [](const absl::Status& s, const std::string& field) {
    EXPECT_FALSE(s.ok());
    EXPECT_THAT(std::string(s.message()), HasSubstr("m/tokenizer.json"));
    EXPECT_THAT(std::string(s.message()), HasSubstr(field)) << s;
  };
  auto bad = Tokenizer::FromJson("{not json", "m/tokenizer.json");
  expect_error(bad.status(), "not valid JSON");

  nlohmann::json j = testing::ByteLevelTokenizerJson();
  j["model"]["type"] = "WordPiece";
  expect_error(status_of(j), "model.type");

  j = testing::ByteLevelTokenizerJson();
  j["pre_tokenizer"]["pretokenizers"][0]["type"] = "BertPreTokenizer";
  expect_error(status_of(j), "pre_tokenizer.pretokenizers[0].type");

  j = testing::ByteLevelTokenizerJson();
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(?<=a+)b";
  expect_error(status_of(j), "pre_tokenizer.pretokenizers[0].pattern.Regex");

  j = testing::ByteLevelTokenizerJson();
  j["normalizer"] = {{"type", "Precompiled"}};
  expect_error(status_of(j), "normalizer.type");

  j = testing::ByteLevelTokenizerJson();
  j["decoder"] = {{"type", "CTC"}};
  expect_error(status_of(j), "decoder.type");

  j = testing::ByteLevelTokenizerJson();
  j["post_processor"]["special_tokens"] = nlohmann::json::object();
  expect_error(status_of(j), "post_processor.special_tokens");

  j = testing::ByteLevelTokenizerJson();
  j["model"]["merges"].push_back("zz qq");
  expect_error(status_of(j), "model.merges[13]");

  j = testing::ByteLevelTokenizerJson();
  j["model"]["vocab"]["x"] = "not an id";
  expect_error(status_of(j), "model.vocab");

  j = testing::ByteLevelTokenizerJson();
  j["added_tokens"][0].erase("id");
  expect_error(status_of(j), "added_tokens[0]");

  j = testing::ByteLevelTokenizerJson();
  j.erase("model");
  expect_error(status_of(j), "model");

  EXPECT_EQ(Tokenizer::FromFile("/nonexistent/tokenizer.json").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tandem
