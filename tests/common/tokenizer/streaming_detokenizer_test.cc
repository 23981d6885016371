#include "common/tokenizer/streaming_detokenizer.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/tokenizer/test_tokenizers.h"

namespace tandem {
namespace {

using ::testing::ElementsAre;

constexpr TokenId VocabByte(int b) { return 3 + b; }  // <0xBB> in the SentencePiece test vocab

std::unique_ptr<Tokenizer> LoadVocab(const nlohmann::json& j) {
  auto tok = Tokenizer::FromJson(j.dump(), "test/tokenizer.json");
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? std::move(*tok) : nullptr;
}

// What Push returns for each id, then Flush's output last.
std::vector<std::string> Stream(const Tokenizer& tok, const std::vector<TokenId>& ids,
                                bool skip_special = false) {
  StreamingDetokenizer d(tok, skip_special);
  std::vector<std::string> out;
  for (TokenId id : ids) out.push_back(d.Push(id));
  out.push_back(d.Flush());
  return out;
}

std::string Join(const std::vector<std::string>& parts) {
  std::string s;
  for (const auto& p : parts) s += p;
  return s;
}

TEST(StreamingDetokenizerTest, ByteLevelHoldsBackSplitCharacters) {
  auto tok = LoadVocab(testing::ByteLevelTokenizerJson());
  // "hi 😀中" in the test vocabulary: bytes of the emoji and of 中 are separate tokens.
  const std::vector<TokenId> ids = {'h', 'i', ' ', 0xF0, 0x9F, 0x98, 0x80, 0xE4, 0xB8, 0xAD};
  EXPECT_THAT(Stream(*tok, ids), ElementsAre("h", "i", " ", "", "", "", "\xF0\x9F\x98\x80", "", "",
                                             "\xE4\xB8\xAD", ""));
  EXPECT_EQ(Join(Stream(*tok, ids)), tok->Decode(ids));
}

TEST(StreamingDetokenizerTest, InvalidAndTruncatedBytes) {
  auto tok = LoadVocab(testing::ByteLevelTokenizerJson());
  // E4 followed by 'a' can never complete: U+FFFD as soon as 'a' arrives.
  EXPECT_THAT(Stream(*tok, {0xE4, 'a'}), ElementsAre("",
                                                     "\xEF\xBF\xBD"
                                                     "a",
                                                     ""));
  // A truncated character at the end is emitted as U+FFFD by Flush.
  EXPECT_THAT(Stream(*tok, {'a', 0xF0, 0x9F}), ElementsAre("a", "", "", "\xEF\xBF\xBD"));
  EXPECT_EQ(Join(Stream(*tok, {'a', 0xF0, 0x9F})),
            tok->Decode(std::vector<TokenId>{'a', 0xF0, 0x9F}));
  // A stray continuation byte is invalid right away.
  EXPECT_THAT(Stream(*tok, {0x80, 'b'}), ElementsAre("\xEF\xBF\xBD", "b", ""));
}

TEST(StreamingDetokenizerTest, SkipsSpecialTokensLikeDecode) {
  auto tok = LoadVocab(testing::ByteLevelTokenizerJson());
  const std::vector<TokenId> ids = {300, 259, 301, 264, 302};
  EXPECT_THAT(Stream(*tok, ids, true), ElementsAre("", "hello", "", " world", "<think>", ""));
  EXPECT_EQ(Join(Stream(*tok, ids, false)), tok->Decode(ids, false));
  // Bytes of a character split by a skipped special token still join (as in Decode).
  const std::vector<TokenId> split = {0xC3, 301, 0xA9};
  EXPECT_EQ(Join(Stream(*tok, split, true)), "\xC3\xA9");
  EXPECT_EQ(tok->Decode(split, true), "\xC3\xA9");
}

TEST(StreamingDetokenizerTest, SentencePieceLeadingSpace) {
  auto tok = LoadVocab(testing::SpmTokenizerJson());
  // The decoder strips one leading space of the whole text only.
  EXPECT_THAT(Stream(*tok, {271, 276}), ElementsAre("Hello", " world", ""));
  EXPECT_THAT(Stream(*tok, {1, 271, 276}), ElementsAre("<s>", " Hello", " world", ""));
  EXPECT_THAT(Stream(*tok, {1, 271, 276}, true), ElementsAre("", "Hello", " world", ""));
  EXPECT_THAT(Stream(*tok, {259, 259, 271}), ElementsAre("", " ", " Hello", ""));
  EXPECT_EQ(tok->Decode(std::vector<TokenId>{259, 259, 271}), "  Hello");
}

TEST(StreamingDetokenizerTest, SentencePieceByteFallbackCharacters) {
  auto tok = LoadVocab(testing::SpmTokenizerJson());
  // "▁😀 w" with the emoji as four byte-fallback tokens.
  const std::vector<TokenId> ids = {
      259, VocabByte(0xF0), VocabByte(0x9F), VocabByte(0x98), VocabByte(0x80), 272};
  EXPECT_THAT(Stream(*tok, ids), ElementsAre("", "", "", "", "\xF0\x9F\x98\x80", " w", ""));
  EXPECT_EQ(Join(Stream(*tok, ids)), tok->Decode(ids));
  // The documented exception: an invalid byte-fallback run. Decode follows Hugging Face's
  // ByteFallback (one U+FFFD per byte of the run); the stream, which must not wait for runs to
  // end, uses errors="replace" (one U+FFFD for the truncated sequence E4 B8).
  const std::vector<TokenId> bad = {VocabByte(0xE4), VocabByte(0xB8), 272};
  EXPECT_EQ(tok->Decode(bad), "\xEF\xBF\xBD\xEF\xBF\xBD w");
  EXPECT_THAT(Stream(*tok, bad), ElementsAre("", "", "\xEF\xBF\xBD w", ""));
}

TEST(StreamingDetokenizerTest, MetaspaceDecoderFirstTokenRule) {
  auto tok = LoadVocab(testing::MetaspaceTokenizerJson());
  for (const std::vector<TokenId>& ids :
       {std::vector<TokenId>{277, 271, 276}, std::vector<TokenId>{271, 277, 276},
        std::vector<TokenId>{1, 271}, std::vector<TokenId>{259, 259, 271}}) {
    EXPECT_EQ(Join(Stream(*tok, ids)), tok->Decode(ids));
    EXPECT_EQ(Join(Stream(*tok, ids, true)), tok->Decode(ids, true));
  }
}

TEST(StreamingDetokenizerTest, UnknownIdsAreIgnored) {
  auto tok = LoadVocab(testing::SpmTokenizerJson());
  EXPECT_THAT(Stream(*tok, {271, 99999, 276}), ElementsAre("Hello", "", " world", ""));
}

}  // namespace
}  // namespace tandem
