// OutputText: streamed text equals Tokenizer::Decode, stays valid UTF-8 when characters span
// tokens, and stop strings cut it at the right token.
#include "router/output_text.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "router/served_model.h"
#include "tests/integration/test_model_dir.h"

namespace tandem {
namespace {

bool IsValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    int n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (int k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

class OutputTextTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto model = LoadServedModel(TestModelDir("llama"), "");
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *model;
  }
  const Tokenizer& tokenizer() { return *model_->tokenizer; }
  std::shared_ptr<const ServedModel> model_;
};

TEST_F(OutputTextTest, StreamedTextEqualsDecodeAndIsValidUtf8) {
  const std::string text = "Llamas 🦙 love 日本語 and emoji ❤️ — ok";
  std::vector<TokenId> ids = tokenizer().Encode(text, false);
  OutputText out(tokenizer(), true, {}, false);
  std::string streamed;
  bool held_some = false;
  for (TokenId id : ids) {
    OutputText::Step step = out.Add(std::vector<TokenId>{id});
    EXPECT_EQ(step.tokens_used, 1u);
    EXPECT_TRUE(IsValidUtf8(step.text)) << step.text;
    if (step.text.empty()) held_some = true;
    streamed += step.text;
  }
  streamed += out.Finish();
  EXPECT_EQ(streamed, tokenizer().Decode(ids, true));
  EXPECT_EQ(streamed, text);
  // Some character of the text spans tokens, so some step had nothing complete to emit.
  EXPECT_TRUE(held_some);
}

TEST_F(OutputTextTest, StopStringCutsTheTextAndCountsTokensUpToIt) {
  const std::string text = "Hello world, this is a test";
  std::vector<TokenId> ids = tokenizer().Encode(text, false);
  OutputText out(tokenizer(), true, {"is a"}, false);
  OutputText::Step step = out.Add(ids);
  EXPECT_TRUE(step.stopped);
  EXPECT_TRUE(out.stopped());
  EXPECT_EQ(step.text, "Hello world, this ");
  EXPECT_LT(step.tokens_used, ids.size());
  // The tokens used decode to text that contains the stop string.
  std::vector<TokenId> used(ids.begin(), ids.begin() + step.tokens_used);
  EXPECT_NE(tokenizer().Decode(used, true).find("is a"), std::string::npos);
  EXPECT_EQ(out.Finish(), "");
}

TEST_F(OutputTextTest, StopStringCompletedByTheLastTokenIsFoundBeforeTheEnd) {
  std::vector<TokenId> ids = tokenizer().Encode("one two three", false);
  OutputText out(tokenizer(), true, {"three"}, true);
  std::string streamed;
  for (TokenId id : ids) streamed += out.Add(std::vector<TokenId>{id}).text;
  EXPECT_TRUE(out.stopped());
  streamed += out.Finish();
  EXPECT_EQ(streamed, "one two three");
}

TEST_F(OutputTextTest, HeldTextComesOutAtTheEnd) {
  std::vector<TokenId> ids = tokenizer().Encode("the end is near", false);
  OutputText out(tokenizer(), true, {"near by"}, false);
  std::string streamed;
  for (TokenId id : ids) streamed += out.Add(std::vector<TokenId>{id}).text;
  EXPECT_EQ(streamed, "the end is ");  // "near" could still become "near by"
  streamed += out.Finish();
  EXPECT_EQ(streamed, "the end is near");
  EXPECT_FALSE(out.stopped());
}

TEST_F(OutputTextTest, SpecialTokensAreSkippedUnlessAsked) {
  std::vector<TokenId> ids = tokenizer().Encode("Hi", false);
  ids.push_back(128009);  // <|eot_id|>
  OutputText skip(tokenizer(), true, {}, false);
  std::string a = skip.Add(ids).text + skip.Finish();
  EXPECT_EQ(a, "Hi");
  OutputText keep(tokenizer(), false, {}, false);
  std::string b = keep.Add(ids).text + keep.Finish();
  EXPECT_EQ(b, "Hi<|eot_id|>");
}

}  // namespace
}  // namespace tandem
