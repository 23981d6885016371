// SentencePiece-style BPE (Llama 2 / Mistral tokenizer.json layouts) on the synthetic vocabulary
// of test_tokenizers.h; expected ids derived by hand.
#include "common/tokenizer/tokenizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/tokenizer/test_tokenizers.h"

namespace tandem {
namespace {

using ::testing::ElementsAre;

constexpr TokenId SpmByte(int b) { return 3 + b; }  // id of <0xBB>

std::unique_ptr<Tokenizer> LoadSpm(const nlohmann::json& j) {
  auto tok = Tokenizer::FromJson(j.dump(), "spm/tokenizer.json");
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? std::move(*tok) : nullptr;
}

class SpmTokenizerTest : public ::testing::Test {
 protected:
  std::unique_ptr<Tokenizer> tok_ = LoadSpm(testing::SpmTokenizerJson());
};

TEST_F(SpmTokenizerTest, PrependAndReplaceNormalizer) {
  // "▁Hello▁world" is a single word; merges build ▁Hello and ▁world.
  EXPECT_THAT(tok_->Encode("Hello world", false), ElementsAre(271, 276));
  EXPECT_THAT(tok_->Encode("Hello world", true), ElementsAre(1, 271, 276));
  // "▁▁▁Hi": ▁H (rank 1) merges before ▁▁ (rank 10); "i" falls back to its byte.
  EXPECT_THAT(tok_->Encode("  Hi", false), ElementsAre(277, 268, SpmByte('i')));
}

TEST_F(SpmTokenizerTest, ByteFallback) {
  EXPECT_THAT(tok_->Encode("H\xC3\xA9", false), ElementsAre(268, SpmByte(0xC3), SpmByte(0xA9)));
  EXPECT_THAT(tok_->Encode("\xF0\x9F\x98\x80", false),
              ElementsAre(259, SpmByte(0xF0), SpmByte(0x9F), SpmByte(0x98), SpmByte(0x80)));
}

TEST_F(SpmTokenizerTest, UnknownTokenWithoutByteFallback) {
  nlohmann::json j = testing::SpmTokenizerJson();
  j["model"]["byte_fallback"] = false;
  auto tok = LoadSpm(j);
  // fuse_unk: consecutive unknown characters become one <unk>.
  EXPECT_THAT(tok->Encode("H\xC3\xA9\xC3\xA9w", false), ElementsAre(268, 0, 264));
  j["model"]["fuse_unk"] = false;
  tok = LoadSpm(j);
  EXPECT_THAT(tok->Encode("H\xC3\xA9\xC3\xA9w", false), ElementsAre(268, 0, 0, 264));
}

TEST_F(SpmTokenizerTest, SpecialTokensInText) {
  // Every text segment gets the ▁ prefix from the normalizer, as in Hugging Face.
  EXPECT_THAT(tok_->Encode("<s>Hello</s>", false), ElementsAre(1, 271, 2));
}

TEST_F(SpmTokenizerTest, DecoderStripsOneLeadingSpace) {
  EXPECT_EQ(tok_->Decode(std::vector<TokenId>{271, 276}), "Hello world");
  EXPECT_EQ(tok_->Decode(std::vector<TokenId>{1, 271, 276}), "<s> Hello world");
  EXPECT_EQ(tok_->Decode(std::vector<TokenId>{1, 271, 276}, true), "Hello world");
  EXPECT_EQ(tok_->Decode(std::vector<TokenId>{277, 268, SpmByte('i')}), "  Hi");
  EXPECT_EQ(tok_->Decode(std::vector<TokenId>{268, SpmByte(0xC3), SpmByte(0xA9)}), "H\xC3\xA9");
}

TEST_F(SpmTokenizerTest, InvalidByteRunsBecomeOneReplacementPerByte) {
  // Hugging Face's ByteFallback replaces each byte of a run that is not valid UTF-8.
  EXPECT_EQ(tok_->Decode(std::vector<TokenId>{SpmByte(0xE4), SpmByte(0xB8), 272}),
            "\xEF\xBF\xBD\xEF\xBF\xBD w");
}

TEST_F(SpmTokenizerTest, RoundTrip) {
  for (const std::string text :
       {"Hello world", "  Hi", "H\xC3\xA9 w\xF0\x9F\x98\x80rld", "a  b   "}) {
    EXPECT_EQ(tok_->Decode(tok_->Encode(text, true), true), text);
  }
}

TEST(MetaspaceTokenizerTest, PrependSchemeFirst) {
  auto tok = LoadSpm(testing::MetaspaceTokenizerJson());
  // The pre-tokenizer replaces spaces and prepends ▁ at the start of the input only.
  EXPECT_THAT(tok->Encode("Hello world", false), ElementsAre(271, 276));
  // After a special token the next segment does not start at offset 0: no ▁.
  EXPECT_THAT(tok->Encode("<s>Hello", false), ElementsAre(1, 260, 261, 267, 263));
  EXPECT_THAT(tok->Encode("<s> Hello", false), ElementsAre(1, 271));
}

TEST(MetaspaceTokenizerTest, MetaspaceDecoder) {
  auto tok = LoadSpm(testing::MetaspaceTokenizerJson());
  EXPECT_EQ(tok->Decode(std::vector<TokenId>{271, 276}), "Hello world");
  EXPECT_EQ(tok->Decode(std::vector<TokenId>{1, 271, 276}), "<s> Hello world");
  // Hugging Face drops every ▁ of the first token, not only the leading one.
  EXPECT_EQ(tok->Decode(std::vector<TokenId>{277, 271}), " Hello");
}

TEST(MetaspaceTokenizerTest, SplitAndPrependAlways) {
  nlohmann::json j = testing::MetaspaceTokenizerJson();
  j["pre_tokenizer"]["prepend_scheme"] = "always";
  j["pre_tokenizer"]["split"] = true;
  auto tok = LoadSpm(j);
  // Words are split before each ▁, so "▁▁" cannot form across them: "▁", "▁Hello".
  EXPECT_THAT(tok->Encode("  Hello", false), ElementsAre(259, 271));
  EXPECT_THAT(tok->Encode(" Hello", false), ElementsAre(271));
  EXPECT_THAT(tok->Encode("<s>Hello", false), ElementsAre(1, 271));
}

}  // namespace
}  // namespace tandem
