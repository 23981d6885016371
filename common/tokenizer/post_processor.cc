#include "common/tokenizer/post_processor.h"

#include "common/tokenizer/json_util.h"
#include "common/util/status_macros.h"

namespace tandem {
namespace {

// Reads the id of a ["token", id] pair (BertProcessing / RobertaProcessing).
absl::StatusOr<TokenId> PairId(const nlohmann::json& config, std::string_view key,
                               std::string_view where) {
  auto it = config.find(key);
  if (it == config.end() || !it->is_array() || it->size() != 2 || !(*it)[1].is_number_integer()) {
    return json_util::FieldError(json_util::Field(where, key), "expected [token, id]");
  }
  return (*it)[1].get<TokenId>();
}

}  // namespace

absl::StatusOr<PostProcessor> PostProcessor::FromJson(const nlohmann::json& config,
                                                      std::string_view where) {
  PostProcessor p;
  if (!config.is_null()) RETURN_IF_ERROR(Parse(config, where, &p));
  return p;
}

absl::Status PostProcessor::Parse(const nlohmann::json& config, std::string_view where,
                                  PostProcessor* out) {
  ASSIGN_OR_RETURN(const std::string type, json_util::GetType(config, where));
  if (type == "Sequence") {
    auto it = config.find("processors");
    if (it == config.end() || !it->is_array()) {
      return json_util::FieldError(json_util::Field(where, "processors"), "expected an array");
    }
    for (size_t i = 0; i < it->size(); ++i) {
      RETURN_IF_ERROR(Parse((*it)[i], Cat(where, ".processors[", i, "]"), out));
    }
    return absl::OkStatus();
  }
  if (type == "ByteLevel") return absl::OkStatus();  // only adjusts offsets
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    ASSIGN_OR_RETURN(const TokenId cls, PairId(config, "cls", where));
    ASSIGN_OR_RETURN(const TokenId sep, PairId(config, "sep", where));
    // A later processor wraps what earlier ones produced.
    out->prefix_.insert(out->prefix_.begin(), cls);
    out->suffix_.push_back(sep);
    return absl::OkStatus();
  }
  if (type != "TemplateProcessing") {
    return json_util::FieldError(json_util::Field(where, "type"),
                                 Cat("post-processor type '", type, "' is not supported"));
  }
  auto single = config.find("single");
  if (single == config.end() || !single->is_array()) {
    return json_util::FieldError(json_util::Field(where, "single"), "expected an array");
  }
  const nlohmann::json* specials = nullptr;
  if (auto it = config.find("special_tokens"); it != config.end() && it->is_object()) {
    specials = &*it;
  }
  std::vector<TokenId> before, after;
  bool seen_sequence = false;
  for (size_t i = 0; i < single->size(); ++i) {
    const auto& piece = (*single)[i];
    const std::string piece_where = Cat(where, ".single[", i, "]");
    if (piece.contains("Sequence")) {
      if (seen_sequence) return json_util::FieldError(piece_where, "sequence appears twice");
      seen_sequence = true;
      continue;
    }
    auto st = piece.find("SpecialToken");
    if (st == piece.end() || !st->is_object() || !st->contains("id") || !(*st)["id"].is_string()) {
      return json_util::FieldError(piece_where,
                                   "expected {\"SpecialToken\": {\"id\": ...}} or "
                                   "{\"Sequence\": ...}");
    }
    const std::string name = (*st)["id"].get<std::string>();
    if (specials == nullptr || !specials->contains(name) || !(*specials)[name].contains("ids") ||
        !(*specials)[name]["ids"].is_array()) {
      return json_util::FieldError(json_util::Field(where, "special_tokens"),
                                   Cat("no ids for special token '", name, "'"));
    }
    for (const auto& id : (*specials)[name]["ids"]) {
      if (!id.is_number_integer()) {
        return json_util::FieldError(json_util::Field(where, "special_tokens"),
                                     Cat("non-integer id for '", name, "'"));
      }
      (seen_sequence ? after : before).push_back(id.get<TokenId>());
    }
  }
  out->prefix_.insert(out->prefix_.begin(), before.begin(), before.end());
  out->suffix_.insert(out->suffix_.end(), after.begin(), after.end());
  return absl::OkStatus();
}

std::vector<TokenId> PostProcessor::Apply(std::vector<TokenId> ids, bool add_special_tokens) const {
  if (!add_special_tokens || (prefix_.empty() && suffix_.empty())) return ids;
  std::vector<TokenId> out;
  out.reserve(prefix_.size() + ids.size() + suffix_.size());
  out.insert(out.end(), prefix_.begin(), prefix_.end());
  out.insert(out.end(), ids.begin(), ids.end());
  out.insert(out.end(), suffix_.begin(), suffix_.end());
  return out;
}

}  // namespace tandem
