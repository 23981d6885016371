#include "common/tokenizer/byte_level.h"

#include <array>

#include "common/tokenizer/unicode/unicode_util.h"

namespace tandem::byte_level {
namespace {

struct Tables {
  std::array<char32_t, 256> byte_to_char{};
  std::array<std::string, 256> byte_to_utf8;
  // Mapped characters all lie below U+0144.
  std::array<int, 0x144> char_to_byte{};

  Tables() {
    char_to_byte.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      const char32_t c =
          printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + extra++);
      byte_to_char[b] = c;
      char_to_byte[c] = b;
      unicode::AppendUtf8(c, &byte_to_utf8[b]);
    }
  }
};

const Tables& GetTables() {
  static const Tables* tables = new Tables();
  return *tables;
}

}  // namespace

char32_t ByteToChar(unsigned char b) { return GetTables().byte_to_char[b]; }

std::optional<unsigned char> CharToByte(char32_t c) {
  const auto& t = GetTables();
  if (c >= t.char_to_byte.size() || t.char_to_byte[c] < 0) return std::nullopt;
  return static_cast<unsigned char>(t.char_to_byte[c]);
}

std::string Encode(std::string_view bytes) {
  const auto& t = GetTables();
  // Every mapped character takes one or two bytes of UTF-8.
  std::string out(bytes.size() * 2, '\0');
  size_t n = 0;
  for (char b : bytes) {
    const std::string& utf8 = t.byte_to_utf8[static_cast<unsigned char>(b)];
    out[n] = utf8[0];
    if (utf8.size() == 2) out[n + 1] = utf8[1];
    n += utf8.size();
  }
  out.resize(n);
  return out;
}

std::optional<std::string> Decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const char32_t c = unicode::DecodeUtf8(text, &i);
    auto b = CharToByte(c);
    if (!b) return std::nullopt;
    out.push_back(static_cast<char>(*b));
  }
  return out;
}

}  // namespace tandem::byte_level
