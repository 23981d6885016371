#include "common/tokenizer/unicode/unicode_util.h"

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include "common/tokenizer/unicode/str_util.h"

namespace tandem::unicode {
namespace {

// Valid range of the second byte of a sequence, by lead byte (Unicode Table 3-7).
bool SecondByteOk(unsigned char lead, unsigned char b) {
  if (lead == 0xE0) return b >= 0xA0 && b <= 0xBF;
  if (lead == 0xED) return b >= 0x80 && b <= 0x9F;
  if (lead == 0xF0) return b >= 0x90 && b <= 0xBF;
  if (lead == 0xF4) return b >= 0x80 && b <= 0x8F;
  return b >= 0x80 && b <= 0xBF;
}

// Examines the sequence at s[i]. Returns the number of bytes it spans: for a valid sequence its
// length (and *valid = true); otherwise its maximal invalid subpart. *truncated is set when the
// sequence was cut short by the end of `s` (all bytes present so far were acceptable).
size_t ScanSequence(std::string_view s, size_t i, bool* valid, bool* truncated) {
  const auto lead = static_cast<unsigned char>(s[i]);
  *valid = false;
  *truncated = false;
  const int need = Utf8SequenceLength(lead);
  if (lead < 0x80) {
    *valid = true;
    return 1;
  }
  if (need == 1) return 1;  // stray continuation byte or invalid lead
  size_t k = 1;
  for (; k < static_cast<size_t>(need); ++k) {
    if (i + k >= s.size()) {
      *truncated = true;
      return k;
    }
    const auto b = static_cast<unsigned char>(s[i + k]);
    const bool ok = k == 1 ? SecondByteOk(lead, b) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return k;
  }
  *valid = true;
  return k;
}

}  // namespace

int Utf8SequenceLength(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 1;
}

char32_t DecodeUtf8(std::string_view s, size_t* i) {
  bool valid, truncated;
  const size_t n = ScanSequence(s, *i, &valid, &truncated);
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + *i;
  *i += n;
  if (!valid) return kReplacementChar;
  switch (n) {
    case 1:
      return p[0];
    case 2:
      return ((p[0] & 0x1Fu) << 6) | (p[1] & 0x3Fu);
    case 3:
      return ((p[0] & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
    default:
      return ((p[0] & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) |
             (p[3] & 0x3Fu);
  }
}

void AppendUtf8(char32_t c, std::string* out) {
  if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) c = kReplacementChar;
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::u32string Utf8ToCodePoints(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) out.push_back(DecodeUtf8(s, &i));
  return out;
}

std::string CodePointsToUtf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) AppendUtf8(c, &out);
  return out;
}

bool IsWhitespace(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D);
  return u_isUWhiteSpace(static_cast<UChar32>(c));
}

uint32_t GeneralCategoryMask(char32_t c) { return U_GET_GC_MASK(static_cast<UChar32>(c)); }

bool IsLetter(char32_t c) {
  if (c < 0x80) return (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
  return (GeneralCategoryMask(c) & U_GC_L_MASK) != 0;
}

bool IsNumber(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return (GeneralCategoryMask(c) & U_GC_N_MASK) != 0;
}

bool IsDecimalDigit(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return (GeneralCategoryMask(c) & U_GC_ND_MASK) != 0;
}

bool IsWordChar(char32_t c) {
  if (c < 0x80) return IsLetter(c) || IsDecimalDigit(c) || c == '_';
  return (GeneralCategoryMask(c) & (U_GC_L_MASK | U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) != 0;
}

bool IsAlphanumeric(char32_t c) { return IsLetter(c) || IsNumber(c); }

char32_t SimpleCaseFold(char32_t c) {
  return static_cast<char32_t>(u_foldCase(static_cast<UChar32>(c), U_FOLD_CASE_DEFAULT));
}

absl::StatusOr<std::string> Normalize(std::string_view text, NormalizationForm form) {
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* norm = nullptr;
  switch (form) {
    case NormalizationForm::kNFC:
      norm = icu::Normalizer2::getNFCInstance(err);
      break;
    case NormalizationForm::kNFD:
      norm = icu::Normalizer2::getNFDInstance(err);
      break;
    case NormalizationForm::kNFKC:
      norm = icu::Normalizer2::getNFKCInstance(err);
      break;
    case NormalizationForm::kNFKD:
      norm = icu::Normalizer2::getNFKDInstance(err);
      break;
  }
  if (U_FAILURE(err) || norm == nullptr) {
    return absl::InternalError(Cat("ICU normalizer unavailable: ", u_errorName(err)));
  }
  const icu::UnicodeString src = icu::UnicodeString::fromUTF8(
      icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  // Fast path: most text is already normalized.
  if (norm->isNormalized(src, err) && U_SUCCESS(err)) return std::string(text);
  err = U_ZERO_ERROR;
  icu::UnicodeString dst = norm->normalize(src, err);
  if (U_FAILURE(err)) {
    return absl::InternalError(Cat("ICU normalization failed: ", u_errorName(err)));
  }
  std::string out;
  dst.toUTF8String(out);
  return out;
}

std::string Utf8Lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    bool valid, truncated;
    const size_t n = ScanSequence(bytes, i, &valid, &truncated);
    if (valid) {
      out.append(bytes.substr(i, n));
    } else {
      AppendUtf8(kReplacementChar, &out);
    }
    i += n;
  }
  return out;
}

bool IsValidUtf8(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    bool valid, truncated;
    i += ScanSequence(bytes, i, &valid, &truncated);
    if (!valid) return false;
  }
  return true;
}

size_t CompleteUtf8PrefixLength(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    bool valid, truncated;
    const size_t n = ScanSequence(bytes, i, &valid, &truncated);
    if (truncated) return i;
    i += n;
  }
  return i;
}

}  // namespace tandem::unicode
