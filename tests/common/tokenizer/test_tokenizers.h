// Small synthetic tokenizer.json files for tests, with vocabularies small enough that every
// expected id can be derived by hand.
#ifndef TANDEM_TESTS_COMMON_TOKENIZER_TEST_TOKENIZERS_H_
#define TANDEM_TESTS_COMMON_TOKENIZER_TEST_TOKENIZERS_H_

#include <string>

#include "common/tokenizer/byte_level.h"
#include "common/tokenizer/unicode/unicode_util.h"
#include "nlohmann/json.hpp"

namespace tandem::testing {

// Llama 3's pre-tokenizer pattern (Qwen2/3 use \p{N} instead of \p{N}{1,3}).
inline constexpr char kLlama3Pattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr char kQwenPattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The byte-level spelling of UTF-8 text ("Ġworld" for " world").
inline std::string Bl(const std::string& text) { return byte_level::Encode(text); }

// Byte-level BPE in the style of Llama 3: ids 0-255 are the 256 byte characters (id == byte
// value), then merges build:
//   256 he, 257 ll, 258 hell, 259 hello, 260 Ġw, 261 or, 262 Ġwor, 263 Ġworl, 264 Ġworld,
//   265 ĠĠ, 266 12, 267 123, 268 's, 269 abc (vocab only, no merge leads to it)
// Added tokens: 300 <|bos|> (special), 301 <|eot|> (special), 302 <think> (not special),
// 303 [lst] (special, lstrip), 304 [rst] (special, rstrip), 305 WORD (single_word),
// 306 ~n~ (normalized). The post-processor adds <|bos|>.
inline nlohmann::json ByteLevelTokenizerJson() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[Bl(std::string(1, static_cast<char>(b)))] = b;
  const std::pair<const char*, const char*> merges[] = {
      {"h", "e"}, {"l", "l"},   {"he", "ll"},  {"hell", "o"},  {" ", "w"},
      {"o", "r"}, {" w", "or"}, {" wor", "l"}, {" worl", "d"}, {" ", " "},
      {"1", "2"}, {"12", "3"},  {"'", "s"}};
  nlohmann::json merge_list = nlohmann::json::array();
  int id = 256;
  for (const auto& [a, b] : merges) {
    merge_list.push_back(Bl(a) + " " + Bl(b));
    vocab[Bl(std::string(a) + b)] = id++;
  }
  vocab["abc"] = id++;
  auto added = [](int id, const char* content, bool special, bool lstrip = false,
                  bool rstrip = false, bool single_word = false, bool normalized = false) {
    return nlohmann::json{{"id", id},
                          {"content", content},
                          {"special", special},
                          {"lstrip", lstrip},
                          {"rstrip", rstrip},
                          {"single_word", single_word},
                          {"normalized", normalized}};
  };
  return {
      {"version", "1.0"},
      {"added_tokens",
       {added(300, "<|bos|>", true), added(301, "<|eot|>", true), added(302, "<think>", false),
        added(303, "[lst]", true, /*lstrip=*/true),
        added(304, "[rst]", true, false, /*rstrip=*/true),
        added(305, "WORD", false, false, false, /*single_word=*/true),
        added(306, "~n~", false, false, false, false, /*normalized=*/true)}},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern", {{"Regex", kLlama3Pattern}}},
           {"behavior", "Isolated"},
           {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single",
         {{{"SpecialToken", {{"id", "<|bos|>"}, {"type_id", 0}}}},
          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"pair", nlohmann::json::array()},
        {"special_tokens",
         {{"<|bos|>", {{"id", "<|bos|>"}, {"ids", {300}}, {"tokens", {"<|bos|>"}}}}}}}},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"byte_fallback", false},
        {"ignore_merges", false},
        {"vocab", vocab},
        {"merges", merge_list}}},
  };
}

// SentencePiece-style BPE in the style of Llama 2 (normalizer Prepend + Replace, byte
// fallback, decoder Replace/ByteFallback/Fuse/Strip). Ids:
//   0 <unk>, 1 <s>, 2 </s>, 3 + b for <0xBB> (3..258),
//   259 ▁, 260 H, 261 e, 262 l, 263 o, 264 w, 265 r, 266 d,
//   267 ll, 268 ▁H, 269 ▁He, 270 ▁Hell, 271 ▁Hello, 272 ▁w, 273 or, 274 ▁wor, 275 ▁worl,
//   276 ▁world, 277 ▁▁
inline nlohmann::json SpmTokenizerJson() {
  const std::string m = "\u2581";
  nlohmann::json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    vocab[name] = 3 + b;
  }
  int id = 259;
  for (const std::string& t :
       {m, std::string("H"), std::string("e"), std::string("l"), std::string("o"), std::string("w"),
        std::string("r"), std::string("d")}) {
    vocab[t] = id++;
  }
  const std::pair<std::string, std::string> merges[] = {
      {"l", "l"},        {m, "H"},          {m + "H", "e"}, {m + "He", "ll"},
      {m + "Hell", "o"}, {m, "w"},          {"o", "r"},     {m + "w", "or"},
      {m + "wor", "l"},  {m + "worl", "d"}, {m, m}};
  nlohmann::json merge_list = nlohmann::json::array();
  for (const auto& [a, b] : merges) {
    merge_list.push_back({a, b});  // the newer [left, right] form
    vocab[a + b] = id++;
  }
  auto special = [](int id, const char* content) {
    return nlohmann::json{{"id", id},           {"content", content}, {"special", true},
                          {"lstrip", false},    {"rstrip", false},    {"single_word", false},
                          {"normalized", false}};
  };
  return {
      {"version", "1.0"},
      {"added_tokens", {special(0, "<unk>"), special(1, "<s>"), special(2, "</s>")}},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "Prepend"}, {"prepend", m}},
          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", m}}}}}},
      {"pre_tokenizer", nullptr},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single",
         {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}}},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders",
         {{{"type", "Replace"}, {"pattern", {{"String", m}}}, {"content", " "}},
          {{"type", "ByteFallback"}},
          {{"type", "Fuse"}},
          {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", "<unk>"},
        {"fuse_unk", true},
        {"byte_fallback", true},
        {"vocab", vocab},
        {"merges", merge_list}}},
  };
}

// The SentencePiece vocabulary with Mistral's layout instead: no normalizer, a Metaspace
// pre-tokenizer (prepend_scheme "first") and a Metaspace decoder.
inline nlohmann::json MetaspaceTokenizerJson() {
  nlohmann::json j = SpmTokenizerJson();
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {{"type", "Metaspace"},
                        {"replacement", "\u2581"},
                        {"prepend_scheme", "first"},
                        {"split", false}};
  j["decoder"] = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "first"}};
  return j;
}

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_COMMON_TOKENIZER_TEST_TOKENIZERS_H_
