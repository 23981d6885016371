// Backtracking matcher for the programs built by regex_compiler.cc.
#include "common/tokenizer/regex.h"

#include <unicode/uchar.h>
#include <unicode/uscript.h>

#include <deque>

#include "common/tokenizer/unicode/unicode_util.h"

namespace tandem {
namespace {

bool ItemMatches(const Regex::ClassItem& item, char32_t c) {
  using K = Regex::ClassItem::Kind;
  bool m = false;
  switch (item.kind) {
    case K::kRange:
      m = c >= item.lo && c <= item.hi;
      break;
    case K::kCategoryMask:
      m = (unicode::GeneralCategoryMask(c) & item.value) != 0;
      break;
    case K::kScript: {
      UErrorCode err = U_ZERO_ERROR;
      m = static_cast<uint32_t>(uscript_getScript(static_cast<UChar32>(c), &err)) == item.value;
      break;
    }
    case K::kWhitespace:
      m = unicode::IsWhitespace(c);
      break;
    case K::kWord:
      m = unicode::IsWordChar(c);
      break;
    case K::kDigit:
      m = unicode::IsDecimalDigit(c);
      break;
  }
  return m != item.negated;
}

bool AnyItemMatches(const Regex::CharClass& cls, char32_t c) {
  for (const auto& item : cls.items) {
    if (ItemMatches(item, c)) return true;
  }
  return false;
}

struct Frame {
  int pc;
  size_t pos;
};

// Backtracking stacks reused across calls, one per look-ahead nesting depth (a deque keeps
// references to existing stacks valid when a deeper one is added).
std::vector<Frame>& StackForDepth(int depth) {
  thread_local std::deque<std::vector<Frame>> stacks;
  while (static_cast<int>(stacks.size()) <= depth) stacks.emplace_back();
  std::vector<Frame>& stack = stacks[static_cast<size_t>(depth)];
  stack.clear();
  return stack;
}

}  // namespace

bool Regex::CharClass::Matches(char32_t c) const {
  bool m = AnyItemMatches(*this, c);
  if (!m && fold) {
    const char32_t variants[] = {unicode::SimpleCaseFold(c),
                                 static_cast<char32_t>(u_toupper(static_cast<UChar32>(c))),
                                 static_cast<char32_t>(u_tolower(static_cast<UChar32>(c)))};
    for (char32_t v : variants) {
      if (v != c && AnyItemMatches(*this, v)) {
        m = true;
        break;
      }
    }
  }
  return m != negated;
}

bool Regex::MatchAt(std::u32string_view text, int start_pc, size_t start_pos, size_t* end,
                    int depth) const {
  std::vector<Frame>& stack = StackForDepth(depth);
  stack.push_back({start_pc, start_pos});
  const size_t n = text.size();
  while (!stack.empty()) {
    int pc = stack.back().pc;
    size_t pos = stack.back().pos;
    stack.pop_back();
    while (true) {
      const Inst& inst = program_[pc];
      bool ok = true;
      switch (inst.op) {
        case Op::kChar:
          if (pos < n && (inst.flag ? unicode::SimpleCaseFold(text[pos]) : text[pos]) == inst.ch) {
            ++pos;
            ++pc;
          } else {
            ok = false;
          }
          break;
        case Op::kClass:
          if (pos < n && classes_[inst.x].Matches(text[pos])) {
            ++pos;
            ++pc;
          } else {
            ok = false;
          }
          break;
        case Op::kAny:
          if (pos < n && text[pos] != '\n') {
            ++pos;
            ++pc;
          } else {
            ok = false;
          }
          break;
        case Op::kSplit:
          stack.push_back({inst.y, pos});
          pc = inst.x;
          break;
        case Op::kJmp:
          pc = inst.x;
          break;
        case Op::kMatch:
          *end = pos;
          return true;
        case Op::kLook: {
          size_t ignored;
          const bool matched = MatchAt(text, pc + 2, pos, &ignored, depth + 1);
          if (matched != inst.flag) {
            ++pc;  // continues at the kJmp that skips the sub-program
          } else {
            ok = false;
          }
          break;
        }
        case Op::kLineStart:
          ok = pos == 0 || text[pos - 1] == '\n';
          ++pc;
          break;
        case Op::kLineEnd:
          ok = pos == n || text[pos] == '\n';
          ++pc;
          break;
        case Op::kTextStart:
          ok = pos == 0;
          ++pc;
          break;
        case Op::kTextEnd:
          ok = pos == n;
          ++pc;
          break;
        case Op::kTextEndNl:
          ok = pos == n || (pos + 1 == n && text[pos] == '\n');
          ++pc;
          break;
      }
      if (!ok) break;
    }
  }
  return false;
}

bool Regex::Find(std::u32string_view text, size_t start, size_t* match_begin,
                 size_t* match_end) const {
  for (size_t p = start; p <= text.size(); ++p) {
    size_t end;
    if (MatchAt(text, 0, p, &end, 0)) {
      *match_begin = p;
      *match_end = end;
      return true;
    }
  }
  return false;
}

std::vector<std::pair<size_t, size_t>> Regex::FindAll(std::u32string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t b, e;
    if (!Find(text, pos, &b, &e)) break;
    if (e == b) {
      // Empty matches would only produce empty pieces, which Hugging Face drops.
      pos = b + 1;
      continue;
    }
    out.emplace_back(b, e);
    pos = e;
  }
  return out;
}

}  // namespace tandem
