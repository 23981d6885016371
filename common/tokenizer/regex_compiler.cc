// Parses a regular expression into a syntax tree and compiles it into the backtracking program
// run by regex.cc.
#include <unicode/uchar.h>
#include <unicode/uscript.h>

#include <memory>

#include "common/tokenizer/regex.h"
#include "common/tokenizer/unicode/str_util.h"
#include "common/tokenizer/unicode/unicode_util.h"

namespace tandem {
namespace {

struct Node {
  enum class Kind { kEmpty, kChar, kClass, kAny, kConcat, kAlt, kRepeat, kLook, kAssert };
  Kind kind = Kind::kEmpty;
  char32_t ch = 0;
  bool fold = false;     // kChar
  int class_index = 0;   // kClass
  int min = 0, max = 0;  // kRepeat; max < 0 means unbounded
  bool greedy = true;
  bool negate = false;    // kLook
  Regex::Op assert_op{};  // kAssert
  std::vector<std::unique_ptr<Node>> children;
};
using NodePtr = std::unique_ptr<Node>;

NodePtr MakeNode(Node::Kind kind) {
  auto n = std::make_unique<Node>();
  n->kind = kind;
  return n;
}

class Parser {
 public:
  Parser(std::string_view pattern, std::vector<Regex::CharClass>* classes)
      : text_(unicode::Utf8ToCodePoints(pattern)), pattern_(pattern), classes_(classes) {}

  absl::StatusOr<NodePtr> Parse() {
    auto node = ParseAlternation(false);
    if (!node.ok()) return node;
    if (pos_ != text_.size()) return Error("unbalanced ')'");
    return node;
  }

 private:
  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(
        Cat("regex /", pattern_, "/: ", what, " at code point ", pos_));
  }
  bool AtEnd() const { return pos_ >= text_.size(); }
  char32_t Peek() const { return text_[pos_]; }
  bool Consume(char32_t c) {
    if (!AtEnd() && Peek() == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  absl::StatusOr<NodePtr> ParseAlternation(bool fold) {
    auto alt = MakeNode(Node::Kind::kAlt);
    while (true) {
      auto branch = ParseConcat(&fold);
      if (!branch.ok()) return branch.status();
      alt->children.push_back(std::move(*branch));
      if (!Consume('|')) break;
    }
    if (alt->children.size() == 1) return std::move(alt->children[0]);
    return alt;
  }

  // `fold` is updated by inline flags such as (?i), which last until the end of the group.
  absl::StatusOr<NodePtr> ParseConcat(bool* fold) {
    auto concat = MakeNode(Node::Kind::kConcat);
    while (!AtEnd() && Peek() != '|' && Peek() != ')') {
      if (Peek() == '(' && pos_ + 2 < text_.size() && text_[pos_ + 1] == '?' &&
          (text_[pos_ + 2] == 'i' || text_[pos_ + 2] == '-')) {
        // Inline flag group: (?i) (?-i) (?i:...) (?-i:...).
        size_t p = pos_ + 2;
        bool value = true;
        if (text_[p] == '-') {
          value = false;
          ++p;
        }
        if (p < text_.size() && text_[p] == 'i' && p + 1 < text_.size() && text_[p + 1] == ')') {
          *fold = value;
          pos_ = p + 2;
          continue;
        }
      }
      auto atom = ParseQuantified(*fold);
      if (!atom.ok()) return atom.status();
      concat->children.push_back(std::move(*atom));
    }
    if (concat->children.size() == 1) return std::move(concat->children[0]);
    return concat;
  }

  absl::StatusOr<NodePtr> ParseQuantified(bool fold) {
    auto atom = ParseAtom(fold);
    if (!atom.ok()) return atom.status();
    NodePtr node = std::move(*atom);
    while (!AtEnd()) {
      int min, max;
      const size_t save = pos_;
      if (Consume('*')) {
        min = 0, max = -1;
      } else if (Consume('+')) {
        min = 1, max = -1;
      } else if (Consume('?')) {
        min = 0, max = 1;
      } else if (Peek() == '{') {
        if (!ParseBraces(&min, &max)) {
          pos_ = save;  // a literal '{'
          break;
        }
      } else {
        break;
      }
      if (node->kind == Node::Kind::kLook || node->kind == Node::Kind::kAssert) {
        return Error("quantifier after an assertion");
      }
      auto rep = MakeNode(Node::Kind::kRepeat);
      rep->min = min;
      rep->max = max;
      if (Consume('?')) {
        rep->greedy = false;
      } else if (!AtEnd() && Peek() == '+') {
        return Error("possessive quantifiers are not supported");
      }
      if (max >= 0 && max < min) return Error("repetition {n,m} with m < n");
      if (max > 1000 || min > 1000) return Error("repetition count above 1000");
      rep->children.push_back(std::move(node));
      node = std::move(rep);
    }
    return node;
  }

  bool ParseNumber(int* out) {
    const size_t start = pos_;
    int value = 0;
    while (!AtEnd() && Peek() >= '0' && Peek() <= '9' && value < 100000) {
      value = value * 10 + static_cast<int>(Peek() - '0');
      ++pos_;
    }
    *out = value;
    return pos_ > start;
  }

  bool ParseBraces(int* min, int* max) {
    ++pos_;  // '{'
    if (!ParseNumber(min)) return false;
    if (Consume('}')) {
      *max = *min;
      return true;
    }
    if (!Consume(',')) return false;
    if (Consume('}')) {
      *max = -1;
      return true;
    }
    if (!ParseNumber(max)) return false;
    return Consume('}');
  }

  absl::StatusOr<NodePtr> ParseAtom(bool fold) {
    const char32_t c = Peek();
    ++pos_;
    switch (c) {
      case '(':
        return ParseGroup(fold);
      case '[':
        return ParseClass(fold);
      case '.':
        return MakeNode(Node::Kind::kAny);
      case '^':
        return MakeAssert(Regex::Op::kLineStart);
      case '$':
        return MakeAssert(Regex::Op::kLineEnd);
      case '\\':
        return ParseEscape(fold);
      case '*':
      case '+':
      case '?':
        --pos_;
        return Error("nothing to repeat");
      default:
        return MakeChar(c, fold);
    }
  }

  NodePtr MakeAssert(Regex::Op op) {
    auto n = MakeNode(Node::Kind::kAssert);
    n->assert_op = op;
    return n;
  }

  NodePtr MakeChar(char32_t c, bool fold) {
    auto n = MakeNode(Node::Kind::kChar);
    n->fold = fold;
    n->ch = fold ? unicode::SimpleCaseFold(c) : c;
    return n;
  }

  NodePtr MakeClassNode(Regex::CharClass cls) {
    auto n = MakeNode(Node::Kind::kClass);
    n->class_index = static_cast<int>(classes_->size());
    classes_->push_back(std::move(cls));
    return n;
  }

  absl::StatusOr<NodePtr> ParseGroup(bool fold) {
    bool look = false, negate = false;
    if (Consume('?')) {
      if (Consume(':')) {
      } else if (Consume('=')) {
        look = true;
      } else if (Consume('!')) {
        look = true;
        negate = true;
      } else if (Consume('i') || (Consume('-') && Consume('i'))) {
        fold = text_[pos_ - 2] != '-';
        if (!Consume(':')) return Error("unsupported inline flag group");
      } else if (Consume('<')) {
        if (!AtEnd() && (Peek() == '=' || Peek() == '!')) {
          return Error("look-behind is not supported");
        }
        while (!AtEnd() && Peek() != '>') ++pos_;
        if (!Consume('>')) return Error("unterminated group name");
      } else {
        return Error("unsupported group construct");
      }
    }
    auto inner = ParseAlternation(fold);
    if (!inner.ok()) return inner.status();
    if (!Consume(')')) return Error("missing ')'");
    if (!look) return inner;
    auto n = MakeNode(Node::Kind::kLook);
    n->negate = negate;
    n->children.push_back(std::move(*inner));
    return n;
  }

  absl::StatusOr<uint32_t> ParseHex(size_t min_digits, size_t max_digits) {
    uint32_t value = 0;
    size_t digits = 0;
    while (digits < max_digits && !AtEnd()) {
      const char32_t h = Peek();
      int d = -1;
      if (h >= '0' && h <= '9') d = static_cast<int>(h - '0');
      if (h >= 'a' && h <= 'f') d = static_cast<int>(h - 'a' + 10);
      if (h >= 'A' && h <= 'F') d = static_cast<int>(h - 'A' + 10);
      if (d < 0) break;
      value = value * 16 + static_cast<uint32_t>(d);
      ++digits;
      ++pos_;
    }
    if (digits < min_digits || value > 0x10FFFF) return Error("bad hexadecimal escape");
    return value;
  }

  // Parses the escape after a backslash. Either a single character (*ch) or a class item.
  absl::Status ParseEscapeInto(bool* is_char, char32_t* ch, Regex::ClassItem* item) {
    if (AtEnd()) return Error("trailing backslash");
    const char32_t c = Peek();
    ++pos_;
    *is_char = false;
    using K = Regex::ClassItem::Kind;
    switch (c) {
      case 's':
        item->kind = K::kWhitespace;
        return absl::OkStatus();
      case 'S':
        item->kind = K::kWhitespace, item->negated = true;
        return absl::OkStatus();
      case 'd':
        item->kind = K::kDigit;
        return absl::OkStatus();
      case 'D':
        item->kind = K::kDigit, item->negated = true;
        return absl::OkStatus();
      case 'w':
        item->kind = K::kWord;
        return absl::OkStatus();
      case 'W':
        item->kind = K::kWord, item->negated = true;
        return absl::OkStatus();
      case 'p':
      case 'P':
        return ParseProperty(c == 'P', item);
      default:
        break;
    }
    *is_char = true;
    switch (c) {
      case 't':
        *ch = '\t';
        break;
      case 'n':
        *ch = '\n';
        break;
      case 'r':
        *ch = '\r';
        break;
      case 'f':
        *ch = '\f';
        break;
      case 'v':
        *ch = '\v';
        break;
      case 'a':
        *ch = 0x07;
        break;
      case 'e':
        *ch = 0x1B;
        break;
      case '0':
        *ch = 0;
        break;
      case 'x': {
        absl::StatusOr<uint32_t> v;
        if (Consume('{')) {
          v = ParseHex(1, 8);
          if (v.ok() && !Consume('}')) return Error("unterminated \\x{");
        } else {
          v = ParseHex(1, 2);
        }
        if (!v.ok()) return v.status();
        *ch = *v;
        break;
      }
      case 'u': {
        auto v = ParseHex(4, 4);
        if (!v.ok()) return v.status();
        *ch = *v;
        break;
      }
      default:
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '1' && c <= '9')) {
          --pos_;
          return Error(Cat("unsupported escape \\", std::string(1, static_cast<char>(c))));
        }
        *ch = c;  // escaped punctuation or any other literal
    }
    return absl::OkStatus();
  }

  absl::Status ParseProperty(bool negated, Regex::ClassItem* item) {
    std::string name;
    if (Consume('{')) {
      if (Consume('^')) negated = !negated;
      while (!AtEnd() && Peek() != '}') unicode::AppendUtf8(text_[pos_++], &name);
      if (!Consume('}')) return Error("unterminated \\p{");
    } else if (!AtEnd()) {
      unicode::AppendUtf8(text_[pos_++], &name);
    }
    item->negated = negated;
    const int32_t mask = u_getPropertyValueEnum(UCHAR_GENERAL_CATEGORY_MASK, name.c_str());
    if (mask != UCHAR_INVALID_CODE) {
      item->kind = Regex::ClassItem::Kind::kCategoryMask;
      item->value = static_cast<uint32_t>(mask);
      return absl::OkStatus();
    }
    const int32_t script = u_getPropertyValueEnum(UCHAR_SCRIPT, name.c_str());
    if (script != UCHAR_INVALID_CODE) {
      item->kind = Regex::ClassItem::Kind::kScript;
      item->value = static_cast<uint32_t>(script);
      return absl::OkStatus();
    }
    return Error(Cat("unknown Unicode property \\p{", name, "}"));
  }

  absl::StatusOr<NodePtr> ParseEscape(bool fold) {
    if (!AtEnd()) {
      const char32_t c = Peek();
      if (c == 'A' || c == 'z' || c == 'Z') {
        ++pos_;
        return MakeAssert(c == 'A' ? Regex::Op::kTextStart
                                   : (c == 'z' ? Regex::Op::kTextEnd : Regex::Op::kTextEndNl));
      }
      if (c == 'b' || c == 'B' || c == 'G' || c == 'k' || (c >= '1' && c <= '9')) {
        return Error("word boundaries and back-references are not supported");
      }
    }
    bool is_char;
    char32_t ch = 0;
    Regex::ClassItem item;
    if (auto s = ParseEscapeInto(&is_char, &ch, &item); !s.ok()) return s;
    if (is_char) return MakeChar(ch, fold);
    Regex::CharClass cls;
    cls.items.push_back(item);
    cls.fold = fold;
    return MakeClassNode(std::move(cls));
  }

  absl::StatusOr<NodePtr> ParseClass(bool fold) {
    Regex::CharClass cls;
    cls.fold = fold;
    cls.negated = Consume('^');
    bool first = true;
    while (true) {
      if (AtEnd()) return Error("unterminated character class");
      if (Peek() == ']' && !first) {
        ++pos_;
        break;
      }
      first = false;
      if (Peek() == '[') return Error("nested character classes are not supported");
      if (Peek() == '&' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '&') {
        return Error("class intersection is not supported");
      }
      char32_t lo;
      Regex::ClassItem item;
      bool is_char = true;
      if (Consume('\\')) {
        if (auto s = ParseEscapeInto(&is_char, &lo, &item); !s.ok()) return s;
      } else {
        lo = text_[pos_++];
      }
      if (!is_char) {
        cls.items.push_back(item);
        continue;
      }
      char32_t hi = lo;
      if (pos_ + 1 < text_.size() && Peek() == '-' && text_[pos_ + 1] != ']') {
        ++pos_;
        if (Consume('\\')) {
          Regex::ClassItem unused;
          if (auto s = ParseEscapeInto(&is_char, &hi, &unused); !s.ok()) return s;
          if (!is_char) return Error("class range ends in a class escape");
        } else {
          hi = text_[pos_++];
        }
        if (hi < lo) return Error("class range out of order");
      }
      Regex::ClassItem range;
      range.kind = Regex::ClassItem::Kind::kRange;
      range.lo = lo;
      range.hi = hi;
      cls.items.push_back(range);
    }
    return MakeClassNode(std::move(cls));
  }

  std::u32string text_;
  std::string_view pattern_;
  std::vector<Regex::CharClass>* classes_;
  size_t pos_ = 0;
};

bool CanMatchEmpty(const Node& n) {
  switch (n.kind) {
    case Node::Kind::kEmpty:
    case Node::Kind::kLook:
    case Node::Kind::kAssert:
      return true;
    case Node::Kind::kChar:
    case Node::Kind::kClass:
    case Node::Kind::kAny:
      return false;
    case Node::Kind::kConcat:
      for (const auto& c : n.children) {
        if (!CanMatchEmpty(*c)) return false;
      }
      return true;
    case Node::Kind::kAlt:
      for (const auto& c : n.children) {
        if (CanMatchEmpty(*c)) return true;
      }
      return n.children.empty();
    case Node::Kind::kRepeat:
      return n.min == 0 || CanMatchEmpty(*n.children[0]);
  }
  return true;
}

class CodeGen {
 public:
  explicit CodeGen(std::vector<Regex::Inst>* prog) : prog_(*prog) {}

  absl::Status Emit(const Node& n) {
    using Op = Regex::Op;
    switch (n.kind) {
      case Node::Kind::kEmpty:
        return absl::OkStatus();
      case Node::Kind::kChar:
        Add({Op::kChar, n.fold, n.ch, 0, 0});
        return absl::OkStatus();
      case Node::Kind::kClass:
        Add({Op::kClass, false, 0, n.class_index, 0});
        return absl::OkStatus();
      case Node::Kind::kAny:
        Add({Op::kAny, false, 0, 0, 0});
        return absl::OkStatus();
      case Node::Kind::kAssert:
        Add({n.assert_op, false, 0, 0, 0});
        return absl::OkStatus();
      case Node::Kind::kConcat:
        for (const auto& c : n.children) {
          if (auto s = Emit(*c); !s.ok()) return s;
        }
        return absl::OkStatus();
      case Node::Kind::kAlt: {
        std::vector<int> jumps;
        for (size_t i = 0; i < n.children.size(); ++i) {
          const bool last = i + 1 == n.children.size();
          int split = -1;
          if (!last) split = Add({Op::kSplit, false, 0, 0, 0});
          if (split >= 0) prog_[split].x = Pc();
          if (auto s = Emit(*n.children[i]); !s.ok()) return s;
          if (!last) {
            jumps.push_back(Add({Op::kJmp, false, 0, 0, 0}));
            prog_[split].y = Pc();
          }
        }
        for (int j : jumps) prog_[j].x = Pc();
        return absl::OkStatus();
      }
      case Node::Kind::kLook: {
        Add({Op::kLook, n.negate, 0, 0, 0});
        const int jump = Add({Op::kJmp, false, 0, 0, 0});
        if (auto s = Emit(*n.children[0]); !s.ok()) return s;
        Add({Op::kMatch, false, 0, 0, 0});
        prog_[jump].x = Pc();
        return absl::OkStatus();
      }
      case Node::Kind::kRepeat:
        return EmitRepeat(n);
    }
    return absl::OkStatus();
  }

 private:
  int Pc() const { return static_cast<int>(prog_.size()); }
  int Add(Regex::Inst inst) {
    prog_.push_back(inst);
    return Pc() - 1;
  }

  // Split that prefers the body when greedy, the exit when lazy. Returns its index; the
  // caller fills in the body (`body`) and exit (`exit`) targets through SetSplit.
  void SetSplit(int split, int body, int exit, bool greedy) {
    prog_[split].x = greedy ? body : exit;
    prog_[split].y = greedy ? exit : body;
  }

  absl::Status EmitRepeat(const Node& n) {
    using Op = Regex::Op;
    const Node& body = *n.children[0];
    for (int i = 0; i < n.min; ++i) {
      if (auto s = Emit(body); !s.ok()) return s;
    }
    if (n.max < 0) {
      if (CanMatchEmpty(body)) {
        return absl::InvalidArgumentError(
            "unbounded repetition of a sub-pattern that can match the empty string");
      }
      const int loop = Add({Op::kSplit, false, 0, 0, 0});
      if (auto s = Emit(body); !s.ok()) return s;
      Add({Op::kJmp, false, 0, loop, 0});
      SetSplit(loop, loop + 1, Pc(), n.greedy);
      return absl::OkStatus();
    }
    std::vector<int> splits;
    for (int i = n.min; i < n.max; ++i) {
      const int split = Add({Op::kSplit, false, 0, 0, 0});
      splits.push_back(split);
      if (auto s = Emit(body); !s.ok()) return s;
    }
    for (int split : splits) SetSplit(split, split + 1, Pc(), n.greedy);
    return absl::OkStatus();
  }

  std::vector<Regex::Inst>& prog_;
};

}  // namespace

absl::StatusOr<Regex> CompileRegex(std::string_view pattern) {
  Regex re;
  re.pattern_ = std::string(pattern);
  Parser parser(pattern, &re.classes_);
  auto root = parser.Parse();
  if (!root.ok()) return root.status();
  CodeGen gen(&re.program_);
  if (auto s = gen.Emit(**root); !s.ok()) {
    return absl::InvalidArgumentError(Cat("regex /", pattern, "/: ", ToStd(s.message())));
  }
  re.program_.push_back({Regex::Op::kMatch, false, 0, 0, 0});
  return re;
}

absl::StatusOr<Regex> Regex::Compile(std::string_view pattern) { return CompileRegex(pattern); }

}  // namespace tandem
