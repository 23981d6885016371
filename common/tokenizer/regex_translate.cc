// Oniguruma -> PCRE2 pattern translation (see regex.h for the list of rewrites).
#include <unicode/uchar.h>

#include <cstdio>
#include <string>
#include <string_view>

#include "common/tokenizer/regex.h"
#include "common/tokenizer/unicode/str_util.h"
#include "common/tokenizer/unicode/unicode_util.h"

namespace tandem {
namespace {

constexpr char32_t kMaxCodePoint = 0x10FFFF;

// Oniguruma's \w: letters, marks, decimal digits, connector punctuation (unicode::IsWordChar).
constexpr std::string_view kWordItems = R"(\p{L}\p{M}\p{Nd}\p{Pc})";
constexpr std::string_view kHexItems = "0-9a-fA-F";

void AppendCodePoint(char32_t c, std::string* out) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "\\x{%X}", static_cast<unsigned>(c));
  out->append(buf);
}

// Class items ("\x{9}-\x{D}\x{20}...") for the code points where pred(c) == want. Surrogates
// are left out: PCRE2 rejects them in UTF mode and valid UTF-8 never contains them.
template <typename Pred>
std::string ClassItems(Pred pred, bool want) {
  std::string out;
  char32_t c = 0;
  while (c <= kMaxCodePoint) {
    if (c >= 0xD800 && c <= 0xDFFF) {
      c = 0xE000;
      continue;
    }
    if (pred(c) != want) {
      ++c;
      continue;
    }
    const char32_t lo = c;
    while (c + 1 <= kMaxCodePoint && !(c + 1 >= 0xD800 && c + 1 <= 0xDFFF) && pred(c + 1) == want) {
      ++c;
    }
    AppendCodePoint(lo, &out);
    if (c > lo) {
      out.push_back('-');
      AppendCodePoint(c, &out);
    }
    ++c;
  }
  return out;
}

// Computed once: the item lists are derived from the same predicates the rest of the tokenizer
// uses, so \s here and unicode::IsWhitespace cannot drift apart.
const std::string& WhitespaceItems() {
  static const std::string* items = new std::string(ClassItems(unicode::IsWhitespace, true));
  return *items;
}
const std::string& NonWhitespaceItems() {
  static const std::string* items = new std::string(ClassItems(unicode::IsWhitespace, false));
  return *items;
}
const std::string& NonWordItems() {
  static const std::string* items = new std::string(ClassItems(unicode::IsWordChar, false));
  return *items;
}
const std::string& NonHexItems() {
  static const std::string* items = new std::string(ClassItems(
      [](char32_t c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
      },
      false));
  return *items;
}

bool IsHexDigit(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

class Translator {
 public:
  explicit Translator(std::string_view pattern) : p_(pattern) {}

  absl::StatusOr<std::string> Run() {
    while (pos_ < p_.size()) {
      const char c = p_[pos_];
      absl::Status s;
      if (c == '\\') {
        ++pos_;
        s = Escape(/*in_class=*/false);
      } else if (c == '[') {
        ++pos_;
        s = Class();
      } else if (c == '(') {
        ++pos_;
        out_.push_back('(');
        s = GroupStart();
      } else if (c == '{' && pos_ + 1 < p_.size() && p_[pos_ + 1] == ',') {
        LeadingCommaInterval();
      } else {
        out_.push_back(c);
        ++pos_;
      }
      if (!s.ok()) return s;
    }
    return std::move(out_);
  }

 private:
  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(Cat("regex /", p_, "/: ", what, " at byte ", pos_));
  }

  // Copies the rest of a UTF-8 sequence whose lead byte was just copied.
  void CopyContinuationBytes() {
    while (pos_ < p_.size() && (static_cast<unsigned char>(p_[pos_]) & 0xC0) == 0x80) {
      out_.push_back(p_[pos_++]);
    }
  }

  // Oniguruma reads "{,n}" as {0,n}; PCRE2 10.42 as literal text.
  void LeadingCommaInterval() {
    size_t i = pos_ + 2;
    while (i < p_.size() && IsDigit(p_[i])) ++i;
    if (i > pos_ + 2 && i < p_.size() && p_[i] == '}') {
      out_.append("{0,");
      out_.append(p_.substr(pos_ + 2, i - pos_ - 2));
      out_.push_back('}');
      pos_ = i + 1;
    } else {
      out_.push_back(p_[pos_++]);
    }
  }

  // After '(' (already copied): inline flag groups and comments; everything else is copied by
  // the main loop.
  absl::Status GroupStart() {
    if (pos_ >= p_.size() || p_[pos_] != '?') return absl::OkStatus();
    if (pos_ + 1 < p_.size() && p_[pos_ + 1] == '#') {  // (?#comment): copied verbatim
      const size_t close = p_.find(')', pos_);
      if (close == std::string_view::npos) return Error("unterminated comment");
      out_.append(p_.substr(pos_, close + 1 - pos_));
      pos_ = close + 1;
      return absl::OkStatus();
    }
    size_t i = pos_ + 1;
    std::string flags;
    while (i < p_.size() && p_[i] != ')' && p_[i] != ':') {
      switch (p_[i]) {
        case 'i':
        case 'x':
        case '-':
          flags.push_back(p_[i]);
          break;
        case 'm':  // Oniguruma's (?m) is dot-all
          flags.push_back('s');
          break;
        default:
          if (flags.empty() && i == pos_ + 1) return absl::OkStatus();  // (?: (?= (?<name> ...
          pos_ = i;
          return Error(Cat("unsupported inline flag '", std::string(1, p_[i]), "'"));
      }
      ++i;
    }
    if (i >= p_.size()) return Error("missing ')'");
    if (flags.empty()) return absl::OkStatus();  // "(?:" or "(?)"
    out_.push_back('?');
    out_.append(flags);
    pos_ = i;  // the ')' or ':' is copied by the main loop
    return absl::OkStatus();
  }

  // \p{Name}, \P{Name}, \p{^Name}, \pL; `negated` for \P. Long general-category names become
  // the short ones PCRE2 knows; other names (scripts, Any) go to PCRE2 as they are.
  absl::Status Property(bool negated) {
    std::string name;
    if (pos_ < p_.size() && p_[pos_] == '{') {
      const size_t close = p_.find('}', pos_);
      if (close == std::string_view::npos) return Error("unterminated \\p{");
      name.assign(p_.substr(pos_ + 1, close - pos_ - 1));
      pos_ = close + 1;
    } else if (pos_ < p_.size()) {
      name.assign(1, p_[pos_++]);
    } else {
      return Error("trailing \\p");
    }
    if (!name.empty() && name[0] == '^') {
      negated = !negated;
      name.erase(0, 1);
    }
    const int32_t mask = u_getPropertyValueEnum(UCHAR_GENERAL_CATEGORY_MASK, name.c_str());
    if (mask != UCHAR_INVALID_CODE) {
      if (const char* short_name =
              u_getPropertyValueName(UCHAR_GENERAL_CATEGORY_MASK, mask, U_SHORT_PROPERTY_NAME)) {
        name = short_name;
      }
    }
    out_.append(negated ? "\\P{" : "\\p{");
    out_.append(name);
    out_.push_back('}');
    return absl::OkStatus();
  }

  // After a backslash.
  absl::Status Escape(bool in_class) {
    if (pos_ >= p_.size()) return Error("trailing backslash");
    const char c = p_[pos_++];
    auto set = [&](std::string_view items, bool negate) {
      if (in_class && !negate) {
        out_.append(items);
      } else {
        out_.append(negate ? "[^" : "[");
        out_.append(items);
        out_.push_back(']');
      }
    };
    switch (c) {
      case 's':
        set(WhitespaceItems(), false);
        return absl::OkStatus();
      case 'S':
        if (in_class) {
          out_.append(NonWhitespaceItems());
        } else {
          set(WhitespaceItems(), true);
        }
        return absl::OkStatus();
      case 'w':
        set(kWordItems, false);
        return absl::OkStatus();
      case 'W':
        if (in_class) {
          out_.append(NonWordItems());
        } else {
          set(kWordItems, true);
        }
        return absl::OkStatus();
      case 'h':
        set(kHexItems, false);
        return absl::OkStatus();
      case 'H':
        if (in_class) {
          out_.append(NonHexItems());
        } else {
          set(kHexItems, true);
        }
        return absl::OkStatus();
      case 'v':
        out_.append("\\x{B}");
        return absl::OkStatus();
      case 'u': {
        if (pos_ + 4 > p_.size() || !IsHexDigit(p_[pos_]) || !IsHexDigit(p_[pos_ + 1]) ||
            !IsHexDigit(p_[pos_ + 2]) || !IsHexDigit(p_[pos_ + 3])) {
          return Error("\\u needs four hexadecimal digits");
        }
        out_.append("\\x{");
        out_.append(p_.substr(pos_, 4));
        out_.push_back('}');
        pos_ += 4;
        return absl::OkStatus();
      }
      case 'b':
      case 'B':
        if (in_class) break;  // backspace
        {
          const std::string w = Cat("[", kWordItems, "]");
          out_.append(c == 'b' ? Cat("(?:(?<=", w, ")(?!", w, ")|(?<!", w, ")(?=", w, "))")
                               : Cat("(?:(?<=", w, ")(?=", w, ")|(?<!", w, ")(?!", w, "))"));
        }
        return absl::OkStatus();
      case 'p':
      case 'P':
        return Property(c == 'P');
      case 'Q': {  // \Q...\E: literal text, copied verbatim
        const size_t end = p_.find("\\E", pos_);
        const size_t stop = end == std::string_view::npos ? p_.size() : end + 2;
        out_.append("\\Q");
        out_.append(p_.substr(pos_, stop - pos_));
        pos_ = stop;
        return absl::OkStatus();
      }
      default:
        break;
    }
    out_.push_back('\\');
    out_.push_back(c);
    CopyContinuationBytes();
    return absl::OkStatus();
  }

  // After '['.
  absl::Status Class() {
    out_.push_back('[');
    if (pos_ < p_.size() && p_[pos_] == '^') out_.push_back(p_[pos_++]);
    bool first = true;
    while (true) {
      if (pos_ >= p_.size()) return Error("unterminated character class");
      const char c = p_[pos_];
      if (c == ']' && !first) {
        out_.push_back(']');
        ++pos_;
        return absl::OkStatus();
      }
      first = false;
      if (c == '[') {
        if (pos_ + 1 < p_.size() && p_[pos_ + 1] == ':') {
          if (absl::Status s = PosixClass(); !s.ok()) return s;
          continue;
        }
        return Error("nested character classes are not supported");
      }
      if (c == '&' && pos_ + 1 < p_.size() && p_[pos_ + 1] == '&') {
        return Error("class intersection is not supported");
      }
      ++pos_;
      if (c == '\\') {
        if (absl::Status s = Escape(/*in_class=*/true); !s.ok()) return s;
      } else {
        out_.push_back(c);
        CopyContinuationBytes();
      }
    }
  }

  // [:name:] inside a class; space and word take Oniguruma's meaning, the rest PCRE2's UCP one.
  absl::Status PosixClass() {
    const size_t close = p_.find(":]", pos_ + 2);
    if (close == std::string_view::npos) return Error("unterminated POSIX class");
    const std::string_view name = p_.substr(pos_ + 2, close - pos_ - 2);
    if (name == "space") {
      out_.append(WhitespaceItems());
    } else if (name == "^space") {
      out_.append(NonWhitespaceItems());
    } else if (name == "word") {
      out_.append(kWordItems);
    } else if (name == "^word") {
      out_.append(NonWordItems());
    } else {
      out_.append(p_.substr(pos_, close + 2 - pos_));
    }
    pos_ = close + 2;
    return absl::OkStatus();
  }

  std::string_view p_;
  size_t pos_ = 0;
  std::string out_;
};

}  // namespace

absl::StatusOr<std::string> TranslateOnigurumaPattern(std::string_view pattern) {
  return Translator(pattern).Run();
}

}  // namespace tandem
