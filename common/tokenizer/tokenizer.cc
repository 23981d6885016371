#include "common/tokenizer/tokenizer.h"

#include "common/tokenizer/unicode/unicode_util.h"

namespace tandem {

std::vector<TokenId> Tokenizer::Encode(std::string_view text, bool add_special_tokens) const {
  std::string repaired;
  if (!unicode::IsValidUtf8(text)) {
    repaired = unicode::Utf8Lossy(text);
    text = repaired;
  }
  std::vector<TokenId> ids;
  ids.reserve(text.size() / 3 + 4);
  for (const auto& piece : added_.Split(text, /*normalized=*/false)) {
    if (piece.id) {
      ids.push_back(*piece.id);
      continue;
    }
    const std::string normalized = normalizer_.Apply(piece.text);
    for (const auto& sub : added_.Split(normalized, /*normalized=*/true)) {
      if (sub.id) {
        ids.push_back(*sub.id);
        continue;
      }
      const bool at_origin = piece.offset == 0 && sub.offset == 0;
      for (const PreToken& word : pre_tokenizer_.Apply(sub.text, at_origin)) {
        model_->EncodeWord(word.text, &ids);
      }
    }
  }
  return post_processor_.Apply(std::move(ids), add_special_tokens);
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
