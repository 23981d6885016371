#include "common/tokenizer/jinja/lexer.h"

#include <cctype>
#include <cerrno>

#include "common/tokenizer/unicode/str_util.h"
#include "common/tokenizer/unicode/unicode_util.h"

namespace tandem::jinja {
namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// Python str.isspace() over a UTF-8 string (empty is false).
bool AllWhitespace(std::string_view s) {
  if (s.empty()) return false;
  size_t i = 0;
  while (i < s.size()) {
    if (!unicode::IsWhitespace(unicode::DecodeUtf8(s, &i))) return false;
  }
  return true;
}

std::string RStrip(std::string_view s) {
  const std::u32string cps = unicode::Utf8ToCodePoints(s);
  size_t e = cps.size();
  while (e > 0 && unicode::IsWhitespace(cps[e - 1])) --e;
  return unicode::CodePointsToUtf8(std::u32string_view(cps).substr(0, e));
}

std::string LStrip(std::string_view s) {
  const std::u32string cps = unicode::Utf8ToCodePoints(s);
  size_t b = 0;
  while (b < cps.size() && unicode::IsWhitespace(cps[b])) ++b;
  return unicode::CodePointsToUtf8(std::u32string_view(cps).substr(b));
}

constexpr std::string_view kOperators[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*",
                                           "/",  "%",  "~",  "<",  ">",  "=",  "(", ")", "[",
                                           "]",  "{",  "}",  ",",  ".",  ":",  "|"};

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {}

  absl::StatusOr<std::vector<TemplateToken>> Run() {
    bool lstrip_next = false;
    bool line_starting = true;
    while (true) {
      const size_t open = FindOpen(pos_);
      std::string text =
          src_.substr(pos_, open == std::string::npos ? std::string::npos : open - pos_);
      if (lstrip_next) text = LStrip(text);
      lstrip_next = false;
      if (open == std::string::npos) {
        EmitText(std::move(text));
        break;
      }
      const char kind = src_[open + 1];
      const char mod = open + 2 < src_.size() ? src_[open + 2] : '\0';
      if (mod == '-') {
        text = RStrip(text);
      } else if (mod != '+' && kind != '{') {  // lstrip_blocks
        const size_t line_start = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        if ((line_start > 0 || line_starting) &&
            AllWhitespace(std::string_view(text).substr(line_start))) {
          text.resize(line_start);
        }
      }
      EmitText(std::move(text));
      line_ = LineAt(open);
      pos_ = open + 2 + ((mod == '-' || mod == '+') ? 1 : 0);
      bool strip_after = false, keep_newline = false;
      if (kind == '#') {
        const size_t close = src_.find("#}", pos_);
        if (close == std::string::npos) return Error("unclosed comment");
        strip_after = close > pos_ && src_[close - 1] == '-';
        keep_newline = close > pos_ && src_[close - 1] == '+';
        pos_ = close + 2;
      } else {
        TemplateToken tok;
        tok.kind = kind == '{' ? TemplateToken::Kind::kOutput : TemplateToken::Kind::kStatement;
        tok.line = line_;
        if (auto s = LexExpression(kind, &tok.tokens, &strip_after, &keep_newline); !s.ok()) {
          return s;
        }
        const bool is_raw = tok.kind == TemplateToken::Kind::kStatement && tok.tokens.size() == 2 &&
                            tok.tokens[0].kind == ExprToken::Kind::kName &&
                            tok.tokens[0].text == "raw";
        if (is_raw) {
          if (auto s = LexRaw(&strip_after, &keep_newline); !s.ok()) return s;
        } else {
          out_.push_back(std::move(tok));
        }
      }
      if (strip_after) {
        lstrip_next = true;
      } else if (kind != '{' && !keep_newline && pos_ < src_.size() && src_[pos_] == '\n') {
        ++pos_;  // trim_blocks
      }
      line_starting = pos_ > 0 && src_[pos_ - 1] == '\n';
    }
    return std::move(out_);
  }

 private:
  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(Cat("template line ", line_, ": ", what));
  }

  int LineAt(size_t pos) const {
    int line = 1;
    for (size_t i = 0; i < pos && i < src_.size(); ++i) line += src_[i] == '\n';
    return line;
  }

  size_t FindOpen(size_t from) const {
    size_t p = from;
    while ((p = src_.find('{', p)) != std::string::npos) {
      if (p + 1 < src_.size() && (src_[p + 1] == '{' || src_[p + 1] == '%' || src_[p + 1] == '#')) {
        return p;
      }
      ++p;
    }
    return std::string::npos;
  }

  void EmitText(std::string text) {
    if (text.empty()) return;
    TemplateToken tok;
    tok.kind = TemplateToken::Kind::kText;
    tok.text = std::move(text);
    tok.line = line_;
    out_.push_back(std::move(tok));
  }

  bool StartsWith(std::string_view s) const {
    return std::string_view(src_).substr(pos_, s.size()) == s;
  }

  absl::Status LexExpression(char kind, std::vector<ExprToken>* out, bool* strip_after,
                             bool* keep_newline) {
    int depth = 0;
    while (true) {
      while (pos_ < src_.size() && IsSpace(src_[pos_])) {
        if (src_[pos_] == '\n') ++line_;
        ++pos_;
      }
      if (pos_ >= src_.size()) return Error(kind == '{' ? "unclosed '{{'" : "unclosed '{%'");
      if (kind == '%') {
        if (StartsWith("-%}") || StartsWith("+%}")) {
          *strip_after = src_[pos_] == '-';
          *keep_newline = src_[pos_] == '+';
          pos_ += 3;
          break;
        }
        if (StartsWith("%}")) {
          pos_ += 2;
          break;
        }
      } else if (depth == 0) {
        if (StartsWith("-}}")) {
          *strip_after = true;
          pos_ += 3;
          break;
        }
        if (StartsWith("}}")) {
          pos_ += 2;
          break;
        }
      }
      ExprToken tok;
      tok.line = line_;
      const char c = src_[pos_];
      if (c == '\'' || c == '"') {
        if (auto s = LexString(&tok); !s.ok()) return s;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        if (auto s = LexNumber(&tok); !s.ok()) return s;
      } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        tok.kind = ExprToken::Kind::kName;
        while (pos_ < src_.size() &&
               (std::isalnum(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_')) {
          tok.text.push_back(src_[pos_++]);
        }
      } else {
        bool found = false;
        for (std::string_view op : kOperators) {
          if (StartsWith(op)) {
            tok.kind = ExprToken::Kind::kOp;
            tok.text = std::string(op);
            pos_ += op.size();
            found = true;
            break;
          }
        }
        if (!found) return Error(Cat("unexpected character '", std::string(1, c), "'"));
        if (tok.text == "(" || tok.text == "[" || tok.text == "{") ++depth;
        if (tok.text == ")" || tok.text == "]" || tok.text == "}") --depth;
      }
      out->push_back(std::move(tok));
    }
    ExprToken end;
    end.kind = ExprToken::Kind::kEnd;
    end.line = line_;
    out->push_back(end);
    return absl::OkStatus();
  }

  absl::Status LexString(ExprToken* tok) {
    const char quote = src_[pos_++];
    tok->kind = ExprToken::Kind::kString;
    while (true) {
      if (pos_ >= src_.size()) return Error("unterminated string literal");
      const char c = src_[pos_++];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c != '\\' || pos_ >= src_.size()) {
        tok->text.push_back(c);
        continue;
      }
      const char e = src_[pos_++];
      auto hex = [&](int digits) -> absl::Status {
        uint32_t v = 0;
        for (int i = 0; i < digits; ++i) {
          if (pos_ >= src_.size() || !std::isxdigit(static_cast<unsigned char>(src_[pos_]))) {
            return Error("bad escape in string literal");
          }
          const char h = src_[pos_++];
          v = v * 16 +
              static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h))
                                        ? h - '0'
                                        : std::tolower(static_cast<unsigned char>(h)) - 'a' + 10);
        }
        unicode::AppendUtf8(v, &tok->text);
        return absl::OkStatus();
      };
      switch (e) {
        case 'n':
          tok->text.push_back('\n');
          break;
        case 't':
          tok->text.push_back('\t');
          break;
        case 'r':
          tok->text.push_back('\r');
          break;
        case 'b':
          tok->text.push_back('\b');
          break;
        case 'f':
          tok->text.push_back('\f');
          break;
        case 'v':
          tok->text.push_back('\v');
          break;
        case 'a':
          tok->text.push_back('\a');
          break;
        case '0':
          tok->text.push_back('\0');
          break;
        case '\\':
          tok->text.push_back('\\');
          break;
        case '\'':
          tok->text.push_back('\'');
          break;
        case '"':
          tok->text.push_back('"');
          break;
        case '\n':
          break;  // line continuation
        case 'x':
          if (auto s = hex(2); !s.ok()) return s;
          break;
        case 'u':
          if (auto s = hex(4); !s.ok()) return s;
          break;
        case 'U':
          if (auto s = hex(8); !s.ok()) return s;
          break;
        default:  // unknown escapes stay as written, as in Python
          tok->text.push_back('\\');
          tok->text.push_back(e);
      }
    }
    return absl::OkStatus();
  }

  absl::Status LexNumber(ExprToken* tok) {
    std::string digits;
    bool is_float = false;
    auto take_digits = [&] {
      while (pos_ < src_.size() &&
             (std::isdigit(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_')) {
        if (src_[pos_] != '_') digits.push_back(src_[pos_]);
        ++pos_;
      }
    };
    take_digits();
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' &&
        std::isdigit(static_cast<unsigned char>(src_[pos_ + 1]))) {
      is_float = true;
      digits.push_back(src_[pos_++]);
      take_digits();
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t p = pos_ + 1;
      if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
      if (p < src_.size() && std::isdigit(static_cast<unsigned char>(src_[p]))) {
        is_float = true;
        digits.append(src_, pos_, p - pos_);
        pos_ = p;
        take_digits();
      }
    }
    tok->text = digits;
    if (is_float) {
      tok->kind = ExprToken::Kind::kFloat;
      tok->float_value = std::strtod(digits.c_str(), nullptr);
    } else {
      tok->kind = ExprToken::Kind::kInt;
      errno = 0;
      tok->int_value = std::strtoll(digits.c_str(), nullptr, 10);
      if (errno == ERANGE)
        return Error(Cat("integer literal ", digits, " does not fit in 64 bits"));
    }
    return absl::OkStatus();
  }

  // After {% raw %}: everything up to {% endraw %} is text.
  absl::Status LexRaw(bool* strip_after, bool* keep_newline) {
    size_t p = pos_;
    while ((p = src_.find("{%", p)) != std::string::npos) {
      size_t q = p + 2;
      const bool minus = q < src_.size() && src_[q] == '-';
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) ++q;
      while (q < src_.size() && IsSpace(src_[q])) ++q;
      if (src_.compare(q, 6, "endraw") != 0) {
        p += 2;
        continue;
      }
      q += 6;
      while (q < src_.size() && IsSpace(src_[q])) ++q;
      *strip_after = q < src_.size() && src_[q] == '-';
      *keep_newline = q < src_.size() && src_[q] == '+';
      if (*strip_after || *keep_newline) ++q;
      if (src_.compare(q, 2, "%}") != 0) return Error("malformed {% endraw %}");
      std::string body = src_.substr(pos_, p - pos_);
      EmitText(minus ? RStrip(body) : std::move(body));
      pos_ = q + 2;
      return absl::OkStatus();
    }
    return Error("missing {% endraw %}");
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<TemplateToken> out_;
};

}  // namespace

absl::StatusOr<std::vector<TemplateToken>> Lex(std::string_view source) {
  // Newlines are normalized and one trailing newline dropped (keep_trailing_newline=False).
  std::string src;
  src.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      src.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      src.push_back(source[i]);
    }
  }
  if (!src.empty() && src.back() == '\n') src.pop_back();
  return Lexer(std::move(src)).Run();
}

}  // namespace tandem::jinja
