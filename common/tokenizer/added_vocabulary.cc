#include "common/tokenizer/added_vocabulary.h"

#include <algorithm>

#include "common/tokenizer/unicode/unicode_util.h"

namespace tandem {
namespace {

// The last code point before byte offset `end` (text is valid UTF-8).
char32_t LastCharBefore(std::string_view text, size_t end) {
  size_t start = end;
  while (start > 0) {
    --start;
    if ((static_cast<unsigned char>(text[start]) & 0xC0) != 0x80) break;
  }
  size_t i = start;
  return unicode::DecodeUtf8(text, &i);
}

}  // namespace

void AddedVocabulary::Matcher::Add(std::string_view text, int32_t token) {
  starts_with[static_cast<unsigned char>(text[0])] = true;
  int32_t node = 0;
  for (unsigned char byte : text) {
    const uint64_t key = (static_cast<uint64_t>(node) << 8) | byte;
    auto [it, inserted] = children.try_emplace(key, static_cast<int32_t>(token_at.size()));
    if (inserted) token_at.push_back(-1);
    node = it->second;
  }
  // Two tokens with the same text: the first one listed wins.
  if (token_at[node] < 0) token_at[node] = token;
  empty = false;
}

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens,
                                 const std::function<std::string(std::string_view)>& normalize)
    : tokens_(std::move(tokens)) {
  for (int i = 0; i < static_cast<int>(tokens_.size()); ++i) {
    const AddedToken& t = tokens_[i];
    by_id_[t.id] = i;
    by_content_[t.content] = i;
    std::string pattern = t.normalized && normalize ? normalize(t.content) : t.content;
    if (pattern.empty()) continue;
    (t.normalized ? normalized_ : raw_).Add(pattern, i);
  }
}

const AddedToken* AddedVocabulary::FindById(TokenId id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedVocabulary::FindByContent(std::string_view content) const {
  auto it = by_content_.find(content);
  return it == by_content_.end() ? nullptr : &tokens_[it->second];
}

std::pair<int32_t, size_t> AddedVocabulary::LongestAt(const Matcher& m, std::string_view text,
                                                      size_t pos) {
  std::pair<int32_t, size_t> best{-1, 0};
  if (!m.starts_with[static_cast<unsigned char>(text[pos])]) return best;
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    auto it =
        m.children.find((static_cast<uint64_t>(node) << 8) | static_cast<unsigned char>(text[i]));
    if (it == m.children.end()) break;
    node = it->second;
    if (m.token_at[node] >= 0) best = {m.token_at[node], i + 1 - pos};
  }
  return best;
}

std::vector<AddedVocabulary::Piece> AddedVocabulary::Split(std::string_view text,
                                                           bool normalized) const {
  std::vector<Piece> out;
  ForEachPiece(text, normalized, [&out](const Piece& p) {
    out.push_back(p);
    return true;
  });
  return out;
}

bool AddedVocabulary::ForEachPiece(std::string_view text, bool normalized,
                                   absl::FunctionRef<bool(const Piece&)> on_piece) const {
  const Matcher& m = normalized ? normalized_ : raw_;
  if (m.empty) return text.empty() || on_piece({text, 0, std::nullopt});
  size_t emitted = 0;  // end of the previous token (including stripped whitespace)
  size_t pos = 0;
  while (pos < text.size()) {
    if (!m.starts_with[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    const auto [token, length] = LongestAt(m, text, pos);
    if (token < 0) {
      ++pos;
      continue;
    }
    const AddedToken& tok = tokens_[token];
    size_t start = pos;
    size_t stop = pos + length;
    pos = stop;
    if (tok.single_word) {
      // Hugging Face checks for a \w character on either side.
      const bool word_before = start > 0 && unicode::IsWordChar(LastCharBefore(text, start));
      size_t after = stop;
      const bool word_after =
          stop < text.size() && unicode::IsWordChar(unicode::DecodeUtf8(text, &after));
      if (word_before || word_after) continue;  // not a whole word: leave it to the model
    }
    if (tok.lstrip) {
      while (start > emitted) {
        size_t back = start;
        do {
          --back;
        } while (back > 0 && (static_cast<unsigned char>(text[back]) & 0xC0) == 0x80);
        size_t i = back;
        if (!unicode::IsWhitespace(unicode::DecodeUtf8(text, &i))) break;
        start = back;
      }
    }
    if (tok.rstrip) {
      while (stop < text.size()) {
        size_t i = stop;
        if (!unicode::IsWhitespace(unicode::DecodeUtf8(text, &i))) break;
        stop = i;
      }
      pos = stop;
    }
    if (emitted < start &&
        !on_piece({text.substr(emitted, start - emitted), emitted, std::nullopt})) {
      return false;
    }
    if (!on_piece({text.substr(start, stop - start), start, tok.id})) return false;
    emitted = stop;
  }
  return emitted >= text.size() || on_piece({text.substr(emitted), emitted, std::nullopt});
}

}  // namespace tandem
