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

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens,
                                 const std::function<std::string(std::string_view)>& normalize)
    : tokens_(std::move(tokens)) {
  for (int i = 0; i < static_cast<int>(tokens_.size()); ++i) {
    const AddedToken& t = tokens_[i];
    by_id_[t.id] = i;
    by_content_[t.content] = i;
    std::string pattern = t.normalized && normalize ? normalize(t.content) : t.content;
    if (pattern.empty()) continue;
    Matcher& m = t.normalized ? normalized_ : raw_;
    m.by_first_byte[static_cast<unsigned char>(pattern[0])].push_back(
        static_cast<int>(m.patterns.size()));
    m.patterns.emplace_back(std::move(pattern), i);
    m.empty = false;
  }
  for (Matcher* m : {&raw_, &normalized_}) {
    for (auto& bucket : m->by_first_byte) {
      std::stable_sort(bucket.begin(), bucket.end(), [m](int a, int b) {
        return m->patterns[a].first.size() > m->patterns[b].first.size();
      });
    }
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

int AddedVocabulary::LongestAt(const Matcher& m, std::string_view text, size_t pos) const {
  for (int idx : m.by_first_byte[static_cast<unsigned char>(text[pos])]) {
    const std::string& p = m.patterns[idx].first;
    if (text.compare(pos, p.size(), p) == 0) return idx;
  }
  return -1;
}

std::vector<AddedVocabulary::Piece> AddedVocabulary::Split(std::string_view text,
                                                           bool normalized) const {
  std::vector<Piece> out;
  const Matcher& m = normalized ? normalized_ : raw_;
  if (m.empty) {
    if (!text.empty()) out.push_back({text, 0, std::nullopt});
    return out;
  }
  size_t emitted = 0;  // end of the previous token (including stripped whitespace)
  size_t pos = 0;
  while (pos < text.size()) {
    const int idx = LongestAt(m, text, pos);
    if (idx < 0) {
      ++pos;
      continue;
    }
    const AddedToken& tok = tokens_[m.patterns[idx].second];
    size_t start = pos;
    size_t stop = pos + m.patterns[idx].first.size();
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
    if (emitted < start)
      out.push_back({text.substr(emitted, start - emitted), emitted, std::nullopt});
    out.push_back({text.substr(start, stop - start), start, tok.id});
    emitted = stop;
  }
  if (emitted < text.size()) out.push_back({text.substr(emitted), emitted, std::nullopt});
  return out;
}

}  // namespace tandem
