#include "common/tokenizer/unicode/unicode_util.h"

#include "gtest/gtest.h"

namespace tandem::unicode {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(UnicodeUtilTest, DecodeAndEncode) {
  const std::string s = "a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80";
  EXPECT_EQ(Utf8ToCodePoints(s), U"a\u00e9\u4e2d\U0001F600");
  EXPECT_EQ(CodePointsToUtf8(U"a\u00e9\u4e2d\U0001F600"), s);
  std::string out;
  AppendUtf8(0xD800, &out);  // a surrogate is not encodable
  EXPECT_EQ(out, kFffd);
}

TEST(UnicodeUtilTest, LossyReplacesMaximalSubparts) {
  EXPECT_EQ(Utf8Lossy("ok"), "ok");
  EXPECT_EQ(Utf8Lossy("\xE4\xB8"), kFffd);  // truncated: one replacement
  EXPECT_EQ(Utf8Lossy("\xE4\xB8"
                      "a"),
            kFffd + "a");
  EXPECT_EQ(Utf8Lossy("\x80\x80"), kFffd + kFffd);              // stray continuation bytes
  EXPECT_EQ(Utf8Lossy("\xED\xA0\x80"), kFffd + kFffd + kFffd);  // encoded surrogate
  EXPECT_EQ(Utf8Lossy("\xC0\xAF"), kFffd + kFffd);              // overlong
  EXPECT_EQ(Utf8Lossy("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);  // > U+10FFFF
  EXPECT_TRUE(IsValidUtf8("\xF0\x9F\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("\xF0\x9F\x98"));
}

TEST(UnicodeUtilTest, CompletePrefixHoldsOnlyTruncatedTails) {
  EXPECT_EQ(CompleteUtf8PrefixLength("ab"), 2u);
  EXPECT_EQ(CompleteUtf8PrefixLength("a\xF0\x9F\x98"), 1u);
  EXPECT_EQ(CompleteUtf8PrefixLength("a\xF0\x9F\x98\x80"), 5u);
  EXPECT_EQ(CompleteUtf8PrefixLength("a\xE4"
                                     "b"),
            3u);  // invalid, not truncated
  EXPECT_EQ(CompleteUtf8PrefixLength("\x80"), 1u);
  EXPECT_EQ(CompleteUtf8PrefixLength("\xED\xA0"), 2u);  // can never be valid
}

TEST(UnicodeUtilTest, CharacterClasses) {
  EXPECT_TRUE(IsWhitespace(U' '));
  EXPECT_TRUE(IsWhitespace(0x85));  // NEL: White_Space (Rust/Oniguruma), unlike JavaScript
  EXPECT_TRUE(IsWhitespace(0x3000));
  EXPECT_FALSE(IsWhitespace(0xFEFF));  // BOM: not White_Space
  EXPECT_TRUE(IsLetter(0x4E2D));
  EXPECT_TRUE(IsNumber(0x2162));  // Roman numeral three
  EXPECT_FALSE(IsDecimalDigit(0x2162));
  EXPECT_TRUE(IsWordChar(U'_'));
  EXPECT_TRUE(IsWordChar(0x301));  // combining mark
  EXPECT_EQ(SimpleCaseFold(U'S'), U's');
  EXPECT_EQ(SimpleCaseFold(0x17F), U's');  // long s folds to s
}

TEST(UnicodeUtilTest, Normalize) {
  auto nfc = Normalize("e\xCC\x81", NormalizationForm::kNFC);
  ASSERT_TRUE(nfc.ok());
  EXPECT_EQ(*nfc, "\xC3\xA9");
}

}  // namespace
}  // namespace tandem::unicode
