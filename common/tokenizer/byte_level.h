// GPT-2's reversible byte <-> printable-character mapping used by byte-level BPE: every byte
// becomes one visible Unicode character ("Ġ" for the space, "Ċ" for '\n').
#ifndef TANDEM_COMMON_TOKENIZER_BYTE_LEVEL_H_
#define TANDEM_COMMON_TOKENIZER_BYTE_LEVEL_H_

#include <optional>
#include <string>
#include <string_view>

namespace tandem::byte_level {

// The character standing for byte `b`.
char32_t ByteToChar(unsigned char b);

// The byte a character stands for, if it is one of the 256 mapped characters.
std::optional<unsigned char> CharToByte(char32_t c);

// Maps every byte of `bytes` to its character, as UTF-8.
std::string Encode(std::string_view bytes);

// Maps a byte-level string back to bytes. Returns nullopt if any character is unmapped.
std::optional<std::string> Decode(std::string_view text);

}  // namespace tandem::byte_level

#endif  // TANDEM_COMMON_TOKENIZER_BYTE_LEVEL_H_
