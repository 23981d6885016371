#include "tools/make_model/tokenizer_info.h"

#include <algorithm>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/util/mapped_file.h"
#include "common/util/status_macros.h"
#include "nlohmann/json.hpp"

namespace tandem {
namespace {

using json = nlohmann::json;

absl::StatusOr<json> ReadJsonObject(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a valid JSON object"));
  }
  return j;
}

// The content of a special-token field: "<s>", {"content": "<s>", ...} or null/absent.
absl::StatusOr<std::optional<std::string>> SpecialTokenContent(const json& config,
                                                               const char* field,
                                                               const std::string& path) {
  auto it = config.find(field);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": field '", field, "' is neither a token string nor null: ", it->dump()));
}

}  // namespace

absl::StatusOr<TokenizerInfo> ReadTokenizerInfo(const std::string& tokenizer_json_path,
                                                const std::string& tokenizer_config_path) {
  ASSIGN_OR_RETURN(json tok, ReadJsonObject(tokenizer_json_path));
  ASSIGN_OR_RETURN(json cfg, ReadJsonObject(tokenizer_config_path));
  TokenizerInfo info;
  int max_id = -1;
  auto model = tok.find("model");
  if (model == tok.end() || !model->is_object() || !model->contains("vocab")) {
    return absl::InvalidArgumentError(
        absl::StrCat(tokenizer_json_path, ": field 'model.vocab' is missing"));
  }
  const json& vocab = (*model)["vocab"];
  if (vocab.is_object()) {  // BPE / WordPiece: token -> id
    for (const auto& [token, id] : vocab.items()) {
      if (!id.is_number_integer()) {
        return absl::InvalidArgumentError(absl::StrCat(tokenizer_json_path, ": model.vocab entry '",
                                                       token, "' has no integer id"));
      }
      max_id = std::max(max_id, id.get<int>());
    }
  } else if (vocab.is_array()) {  // Unigram: [[piece, score], ...], ids are positions
    max_id = static_cast<int>(vocab.size()) - 1;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(tokenizer_json_path, ": field 'model.vocab' is neither a map nor a list"));
  }
  auto added = tok.find("added_tokens");
  if (added != tok.end() && added->is_array()) {
    for (const json& t : *added) {
      if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() ||
          !t.contains("content") || !t["content"].is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat(tokenizer_json_path,
                         ": an added_tokens entry lacks an integer id or a content: ", t.dump()));
      }
      int id = t["id"].get<int>();
      info.added_tokens[t["content"].get<std::string>()] = id;
      max_id = std::max(max_id, id);
    }
  }
  if (max_id < 0) {
    return absl::InvalidArgumentError(absl::StrCat(tokenizer_json_path, ": vocabulary is empty"));
  }
  info.vocab_size = max_id + 1;

  auto lookup = [&](const char* field, int* out) -> absl::Status {
    ASSIGN_OR_RETURN(std::optional<std::string> content,
                     SpecialTokenContent(cfg, field, tokenizer_config_path));
    if (!content) return absl::OkStatus();
    auto it = info.added_tokens.find(*content);
    if (it != info.added_tokens.end()) {
      *out = it->second;
      return absl::OkStatus();
    }
    if (vocab.is_object() && vocab.contains(*content)) {
      *out = vocab[*content].get<int>();
      return absl::OkStatus();
    }
    return absl::NotFoundError(absl::StrCat(tokenizer_config_path, ": ", field, " '", *content,
                                            "' is not a token of ", tokenizer_json_path));
  };
  RETURN_IF_ERROR(lookup("bos_token", &info.bos_token_id));
  RETURN_IF_ERROR(lookup("eos_token", &info.eos_token_id));
  return info;
}

}  // namespace tandem
