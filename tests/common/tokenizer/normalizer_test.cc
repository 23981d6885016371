#include "common/tokenizer/normalizer.h"

#include "gtest/gtest.h"

namespace tandem {
namespace {

std::string Normalize(const nlohmann::json& config, const std::string& text) {
  auto n = Normalizer::FromJson(config, "normalizer");
  EXPECT_TRUE(n.ok()) << n.status();
  return n.ok() ? n->Apply(text) : "";
}

TEST(NormalizerTest, UnicodeForms) {
  // e + combining acute <-> é; the Ohm sign is canonically Omega; the fi ligature only
  // changes under compatibility forms.
  EXPECT_EQ(Normalize({{"type", "NFC"}}, "cafe\xCC\x81"), "caf\xC3\xA9");
  EXPECT_EQ(Normalize({{"type", "NFC"}}, "\xE2\x84\xA6"), "\xCE\xA9");
  EXPECT_EQ(Normalize({{"type", "NFC"}}, "\xEF\xAC\x81"), "\xEF\xAC\x81");
  EXPECT_EQ(Normalize({{"type", "NFKC"}}, "\xEF\xAC\x81"), "fi");
  EXPECT_EQ(Normalize({{"type", "NFD"}}, "caf\xC3\xA9"), "cafe\xCC\x81");
  EXPECT_EQ(Normalize({{"type", "NFKD"}}, "\xC2\xB2"), "2");
  EXPECT_EQ(Normalize({{"type", "NFC"}}, "plain ascii"), "plain ascii");
}

TEST(NormalizerTest, PrependReplaceSequence) {
  const nlohmann::json llama2 = {
      {"type", "Sequence"},
      {"normalizers",
       {{{"type", "Prepend"}, {"prepend", "\u2581"}},
        {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}}}};
  EXPECT_EQ(Normalize(llama2, "Hi there"), "\u2581Hi\u2581there");
  EXPECT_EQ(Normalize(llama2, ""), "");  // Prepend leaves empty text alone
  EXPECT_EQ(Normalize({{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", " "}},
                      "a   b  c d"),
            "a b c d");
}

TEST(NormalizerTest, LowercaseAndStrip) {
  EXPECT_EQ(Normalize({{"type", "Lowercase"}}, "HeLLo \xC3\x89T\xC3\x89"),
            "hello \xC3\xA9t\xC3\xA9");
  EXPECT_EQ(Normalize({{"type", "Strip"}, {"strip_left", true}, {"strip_right", false}}, "  x  "),
            "x  ");
  EXPECT_EQ(Normalize(nullptr, " As Is "), " As Is ");
}

TEST(NormalizerTest, UnsupportedTypeIsAnError) {
  auto n = Normalizer::FromJson({{"type", "BertNormalizer"}}, "f.json: normalizer");
  ASSERT_FALSE(n.ok());
  EXPECT_NE(std::string(n.status().message()).find("f.json: normalizer.type"), std::string::npos);
}

}  // namespace
}  // namespace tandem
