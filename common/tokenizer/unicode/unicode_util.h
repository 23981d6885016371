// UTF-8 and Unicode helpers shared by the tokenizer: code point conversion, character
// properties with the semantics Hugging Face tokenizers (Rust + Oniguruma) use, Unicode
// normalization (ICU) and lossy/incremental UTF-8 decoding.
#ifndef TANDEM_COMMON_TOKENIZER_UNICODE_UNICODE_UTIL_H_
#define TANDEM_COMMON_TOKENIZER_UNICODE_UNICODE_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tandem::unicode {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// Decodes the code point starting at s[*i] and advances *i past it. An invalid or truncated
// sequence yields U+FFFD and advances by its maximal invalid subpart (at least one byte).
char32_t DecodeUtf8(std::string_view s, size_t* i);

// Appends the UTF-8 encoding of `c` (surrogates and out-of-range values become U+FFFD).
void AppendUtf8(char32_t c, std::string* out);

std::u32string Utf8ToCodePoints(std::string_view s);
std::string CodePointsToUtf8(std::u32string_view s);

// Number of bytes of the UTF-8 sequence introduced by `lead` (1 for ASCII and invalid leads).
int Utf8SequenceLength(unsigned char lead);

// Character classes with Oniguruma/Rust semantics.
bool IsWhitespace(char32_t c);    // Unicode White_Space property (Rust char::is_whitespace, \s)
bool IsLetter(char32_t c);        // General category L*   (\p{L})
bool IsNumber(char32_t c);        // General category N*   (\p{N})
bool IsDecimalDigit(char32_t c);  // General category Nd   (\d)
bool IsWordChar(char32_t c);      // L, M, Nd, Pc          (\w)
bool IsAlphanumeric(char32_t c);  // L or N (Rust char::is_alphanumeric)
// ICU general-category mask bit set of `c` (U_GC_*_MASK values).
uint32_t GeneralCategoryMask(char32_t c);
// Simple (one-to-one) case folding, as used by case-insensitive regex matching.
char32_t SimpleCaseFold(char32_t c);

enum class NormalizationForm { kNFC, kNFD, kNFKC, kNFKD };
// Normalizes valid UTF-8 text. Fails only if ICU is unusable.
absl::StatusOr<std::string> Normalize(std::string_view text, NormalizationForm form);

// Converts bytes to valid UTF-8, replacing each maximal invalid subpart with U+FFFD (the
// behaviour of Rust's String::from_utf8_lossy and Python's errors="replace").
std::string Utf8Lossy(std::string_view bytes);

// True when `bytes` is entirely valid UTF-8.
bool IsValidUtf8(std::string_view bytes);

// Length of the longest prefix of `bytes` that can be converted without knowing what follows:
// everything except a trailing sequence that is truncated but could still become valid.
size_t CompleteUtf8PrefixLength(std::string_view bytes);

}  // namespace tandem::unicode

#endif  // TANDEM_COMMON_TOKENIZER_UNICODE_UNICODE_UTIL_H_
