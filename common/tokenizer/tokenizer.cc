#include "common/tokenizer/tokenizer.h"

#include <algorithm>

#include "common/tokenizer/unicode/unicode_util.h"

namespace tandem {

bool Tokenizer::EncodeText(std::string_view text, size_t max_ids, std::vector<TokenId>* ids) const {
  auto add_id = [&](TokenId id) {
    ids->push_back(id);
    return ids->size() <= max_ids;
  };
  return added_.ForEachPiece(text, /*normalized=*/false, [&](const AddedVocabulary::Piece& piece) {
    if (piece.id) return add_id(*piece.id);
    const std::string normalized = normalizer_.Apply(piece.text);
    return added_.ForEachPiece(
        normalized, /*normalized=*/true, [&](const AddedVocabulary::Piece& sub) {
          if (sub.id) return add_id(*sub.id);
          const bool at_origin = piece.offset == 0 && sub.offset == 0;
          return pre_tokenizer_.ForEachWord(sub.text, at_origin, [&](std::string_view word, bool) {
            return model_->EncodeWordBounded(word, max_ids, ids);
          });
        });
  });
}

std::optional<std::vector<TokenId>> Tokenizer::EncodeBounded(std::string_view text,
                                                             bool add_special_tokens,
                                                             size_t max_tokens) const {
  std::string repaired;
  if (!unicode::IsValidUtf8(text)) {
    repaired = unicode::Utf8Lossy(text);
    text = repaired;
  }
  const size_t special =
      add_special_tokens ? post_processor_.prefix().size() + post_processor_.suffix().size() : 0;
  if (special > max_tokens) return std::nullopt;
  std::vector<TokenId> ids;
  // The reserve guess is capped: a huge text may stop long before its end.
  ids.reserve(std::min(text.size() / 3, max_tokens - special) + 4);
  if (!EncodeText(text, max_tokens - special, &ids)) return std::nullopt;
  return post_processor_.Apply(std::move(ids), add_special_tokens);
}

std::vector<TokenId> Tokenizer::Encode(std::string_view text, bool add_special_tokens) const {
  return *EncodeBounded(text, add_special_tokens, SIZE_MAX);
}

std::vector<std::string> Tokenizer::IdsToTokens(std::span<const TokenId> ids,
                                                bool skip_special) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (TokenId id : ids) {
    if (const AddedToken* added = added_.FindById(id)) {
      if (!(skip_special && added->special)) tokens.push_back(added->content);
    } else if (auto t = model_->IdToToken(id)) {
      tokens.emplace_back(*t);
    }
  }
  return tokens;
}

std::string Tokenizer::Decode(std::span<const TokenId> ids, bool skip_special_tokens) const {
  return decoder_.Decode(IdsToTokens(ids, skip_special_tokens), /*raw=*/false);
}

std::string Tokenizer::DecodeBytes(std::span<const TokenId> ids, bool skip_special_tokens) const {
  return decoder_.Decode(IdsToTokens(ids, skip_special_tokens), /*raw=*/true);
}

std::optional<TokenId> Tokenizer::TokenToId(std::string_view token) const {
  if (const AddedToken* added = added_.FindByContent(token)) return added->id;
  return model_->TokenToId(token);
}

std::string_view Tokenizer::IdToToken(TokenId id) const {
  if (const AddedToken* added = added_.FindById(id)) return added->content;
  if (auto t = model_->IdToToken(id)) return *t;
  return {};
}

bool Tokenizer::IsSpecial(TokenId id) const {
  const AddedToken* added = added_.FindById(id);
  return added != nullptr && added->special;
}

}  // namespace tandem
