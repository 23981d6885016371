// Fuzzes the tokenizer (common/tokenizer/tokenizer.h) through its public API with the real
// Llama 3 tokenizer.json: Encode of arbitrary bytes (invalid UTF-8 included), EncodeBounded
// against it (the same ids when they fit the limit, none when they do not), Decode of what it
// made (the text back, for any valid UTF-8: Llama 3 has no normalizer), and Decode / DecodeBytes of
// the same bytes read as token ids (unknown, negative and huge ids included).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_common.h"

namespace tandem {
namespace {

const Tokenizer& GetTokenizer() {
  static const Tokenizer* tokenizer = [] {
    const std::string path = fuzz::SourceDir() + fuzz::kLlama3Models + "/tokenizer.json";
    auto t = Tokenizer::FromJson(fuzz::ReadFileOrDie(path), path);
    FUZZ_CHECK(t.ok());
    return t->release();
  }();
  return *tokenizer;
}

// Well-formed UTF-8 (no surrogates, no overlongs)?
bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int len = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (int k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += len;
  }
  return true;
}

}  // namespace
}  // namespace tandem

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const tandem::Tokenizer& tokenizer = tandem::GetTokenizer();
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  const std::vector<tandem::TokenId> plain = tokenizer.Encode(text, /*add_special_tokens=*/false);
  const std::vector<tandem::TokenId> with_special = tokenizer.Encode(text, true);
  FUZZ_CHECK(with_special.size() == plain.size() + tokenizer.prefix_special_ids().size() +
                                        tokenizer.suffix_special_ids().size());
  for (tandem::TokenId id : plain) FUZZ_CHECK(id >= 0 && id < tokenizer.vocab_size());
  // EncodeBounded: Encode's ids when they fit the limit, nothing as soon as they do not.
  const size_t n = with_special.size();
  const std::optional<std::vector<tandem::TokenId>> fits = tokenizer.EncodeBounded(text, true, n);
  FUZZ_CHECK(fits.has_value() && *fits == with_special);
  if (n > 0) FUZZ_CHECK(!tokenizer.EncodeBounded(text, true, n - 1).has_value());
  const std::optional<std::vector<tandem::TokenId>> plain_fits =
      tokenizer.EncodeBounded(text, false, plain.size() + 16);
  FUZZ_CHECK(plain_fits.has_value() && *plain_fits == plain);
  FUZZ_CHECK(text.empty() == plain.empty());
  // Llama 3's byte-level BPE has no normalizer: valid UTF-8 decodes back to itself, added
  // (special) tokens included.
  const std::string decoded = tokenizer.Decode(plain);
  if (tandem::IsValidUtf8(text)) FUZZ_CHECK(decoded == text);
  (void)tokenizer.Decode(plain, /*skip_special_tokens=*/true);
  (void)tokenizer.DecodeBytes(plain);

  // The same bytes as token ids.
  std::vector<tandem::TokenId> ids(size / sizeof(tandem::TokenId));
  if (!ids.empty()) std::memcpy(ids.data(), data, ids.size() * sizeof(tandem::TokenId));
  (void)tokenizer.Decode(ids);
  (void)tokenizer.Decode(ids, /*skip_special_tokens=*/true);
  (void)tokenizer.DecodeBytes(ids);
  (void)tokenizer.DecodeBytes(ids, /*skip_special_tokens=*/true);
  // And as 24-bit ids, which are mostly in the vocabulary.
  std::vector<tandem::TokenId> small(size / 3);
  for (size_t i = 0; i < small.size(); ++i) {
    const uint32_t v = data[3 * i] | (data[3 * i + 1] << 8) | (data[3 * i + 2] << 16);
    small[i] = static_cast<tandem::TokenId>(v % static_cast<uint32_t>(tokenizer.vocab_size() + 8));
  }
  const std::string bytes = tokenizer.DecodeBytes(small);
  const std::string text_back = tokenizer.Decode(small);
  FUZZ_CHECK(tandem::IsValidUtf8(text_back));
  (void)bytes;
  return 0;
}
