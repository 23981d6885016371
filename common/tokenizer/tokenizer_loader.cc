// Reads tokenizer.json. The file is parsed with simdjson (the vocabulary and merges of a
// Llama 3 file are ~9 MB); the small component objects are handed to nlohmann::json.
#include <simdjson.h>

#include "common/tokenizer/json_util.h"
#include "common/tokenizer/tokenizer.h"
#include "common/tokenizer/unicode/str_util.h"
#include "common/util/mapped_file.h"
#include "common/util/status_macros.h"

namespace tandem {

class TokenizerLoader {
 public:
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Load(std::string_view json,
                                                         const std::string& path);
};

namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

absl::Status Error(const std::string& path, std::string_view field, std::string_view what) {
  return absl::InvalidArgumentError(Cat(path, ": ", field, ": ", what));
}

// A top-level member as nlohmann::json (null when absent).
absl::StatusOr<nlohmann::json> Small(const element& doc, std::string_view key) {
  element e;
  if (doc[key].get(e) != simdjson::SUCCESS) return nlohmann::json();
  nlohmann::json j =
      nlohmann::json::parse(simdjson::minify(e), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InternalError(Cat("cannot re-read '", key, "'"));
  return j;
}

absl::StatusOr<std::vector<AddedToken>> ParseAddedTokens(const nlohmann::json& list,
                                                         const std::string& path) {
  std::vector<AddedToken> out;
  if (list.is_null()) return out;
  if (!list.is_array()) return Error(path, "added_tokens", "expected an array");
  for (size_t i = 0; i < list.size(); ++i) {
    const auto& t = list[i];
    const std::string where = Cat(path, ": added_tokens[", i, "]");
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() ||
        !t.contains("content") || !t["content"].is_string()) {
      return json_util::FieldError(where,
                                   "expected an object with integer 'id' and string "
                                   "'content'");
    }
    AddedToken tok;
    tok.id = t["id"].get<TokenId>();
    tok.content = t["content"].get<std::string>();
    ASSIGN_OR_RETURN(tok.special, json_util::GetBool(t, "special", false, where));
    ASSIGN_OR_RETURN(tok.single_word, json_util::GetBool(t, "single_word", false, where));
    ASSIGN_OR_RETURN(tok.lstrip, json_util::GetBool(t, "lstrip", false, where));
    ASSIGN_OR_RETURN(tok.rstrip, json_util::GetBool(t, "rstrip", false, where));
    ASSIGN_OR_RETURN(tok.normalized, json_util::GetBool(t, "normalized", !tok.special, where));
    if (tok.id < 0) return json_util::FieldError(where, "negative id");
    out.push_back(std::move(tok));
  }
  return out;
}

// Optional string member of the model object ("unk_token", ...); null counts as absent.
absl::StatusOr<std::optional<std::string>> ModelString(const element& model, std::string_view key,
                                                       const std::string& path) {
  element e;
  if (model[key].get(e) != simdjson::SUCCESS || e.is_null()) return std::nullopt;
  std::string_view s;
  if (e.get(s) != simdjson::SUCCESS) {
    return Error(path, Cat("model.", key), "expected a string");
  }
  return std::string(s);
}

absl::StatusOr<bool> ModelBool(const element& model, std::string_view key,
                               const std::string& path) {
  element e;
  if (model[key].get(e) != simdjson::SUCCESS || e.is_null()) return false;
  bool b;
  if (e.get(b) != simdjson::SUCCESS) return Error(path, Cat("model.", key), "expected a boolean");
  return b;
}

absl::StatusOr<std::unique_ptr<BpeModel>> ParseModel(const element& doc, const std::string& path) {
  element model;
  if (doc["model"].get(model) != simdjson::SUCCESS || !model.is_object()) {
    return Error(path, "model", "missing or not an object");
  }
  std::string_view type = "BPE";
  if (element t; model["type"].get(t) == simdjson::SUCCESS && t.get(type) != simdjson::SUCCESS) {
    return Error(path, "model.type", "expected a string");
  }
  if (type != "BPE") {
    return Error(path, "model.type", Cat("model type '", type, "' is not supported (only BPE)"));
  }
  if (element d; model["dropout"].get(d) == simdjson::SUCCESS && !d.is_null()) {
    double p = 0;
    if (d.get(p) != simdjson::SUCCESS || p != 0.0) {
      return Error(path, "model.dropout", "BPE dropout is not supported");
    }
  }
  BpeOptions options;
  ASSIGN_OR_RETURN(options.unk_token, ModelString(model, "unk_token", path));
  ASSIGN_OR_RETURN(options.byte_fallback, ModelBool(model, "byte_fallback", path));
  ASSIGN_OR_RETURN(options.fuse_unk, ModelBool(model, "fuse_unk", path));
  ASSIGN_OR_RETURN(options.ignore_merges, ModelBool(model, "ignore_merges", path));
  ASSIGN_OR_RETURN(auto prefix, ModelString(model, "continuing_subword_prefix", path));
  ASSIGN_OR_RETURN(auto suffix, ModelString(model, "end_of_word_suffix", path));
  options.continuing_subword_prefix = prefix.value_or("");
  options.end_of_word_suffix = suffix.value_or("");

  simdjson::dom::object vocab_obj;
  if (model["vocab"].get(vocab_obj) != simdjson::SUCCESS) {
    return Error(path, "model.vocab", "missing or not an object");
  }
  std::vector<std::pair<std::string_view, TokenId>> vocab;
  vocab.reserve(vocab_obj.size());
  for (auto field : vocab_obj) {
    int64_t id;
    if (field.value.get(id) != simdjson::SUCCESS || id < 0 || id > INT32_MAX) {
      return Error(path, Cat("model.vocab[\"", field.key, "\"]"),
                   "expected a non-negative integer id");
    }
    vocab.emplace_back(field.key, static_cast<TokenId>(id));
  }

  std::vector<std::pair<std::string_view, std::string_view>> merges;
  simdjson::dom::array merges_arr;
  if (element m; model["merges"].get(m) == simdjson::SUCCESS && !m.is_null()) {
    if (m.get(merges_arr) != simdjson::SUCCESS)
      return Error(path, "model.merges", "expected an array");
    merges.reserve(merges_arr.size());
    size_t i = 0;
    for (element entry : merges_arr) {
      std::string_view s;
      simdjson::dom::array pair;
      if (entry.get(s) == simdjson::SUCCESS) {
        // Legacy "a b" form: exactly one space separates the two tokens.
        const size_t space = s.find(' ');
        if (space == std::string_view::npos || s.find(' ', space + 1) != std::string_view::npos) {
          return Error(path, Cat("model.merges[", i, "]"),
                       Cat("'", s, "' is not of the form \"left right\""));
        }
        merges.emplace_back(s.substr(0, space), s.substr(space + 1));
      } else if (entry.get(pair) == simdjson::SUCCESS && pair.size() == 2) {
        std::string_view a, b;
        if (pair.at(0).get(a) != simdjson::SUCCESS || pair.at(1).get(b) != simdjson::SUCCESS) {
          return Error(path, Cat("model.merges[", i, "]"), "expected two strings");
        }
        merges.emplace_back(a, b);
      } else {
        return Error(path, Cat("model.merges[", i, "]"),
                     "expected \"left right\" or [left, right]");
      }
      ++i;
    }
  }
  return BpeModel::Build(std::move(options), vocab, merges, Cat(path, ": model"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> TokenizerLoader::Load(std::string_view json,
                                                                 const std::string& path) {
  simdjson::dom::parser parser;
  const simdjson::padded_string padded(json);
  element doc;
  if (auto err = parser.parse(padded).get(doc); err != simdjson::SUCCESS) {
    return absl::InvalidArgumentError(
        Cat(path, ": not valid JSON: ", simdjson::error_message(err)));
  }
  if (!doc.is_object()) return Error(path, "(root)", "expected a JSON object");
  auto tok = std::unique_ptr<Tokenizer>(new Tokenizer());
  ASSIGN_OR_RETURN(tok->model_, ParseModel(doc, path));

  ASSIGN_OR_RETURN(const nlohmann::json normalizer, Small(doc, "normalizer"));
  ASSIGN_OR_RETURN(tok->normalizer_, Normalizer::FromJson(normalizer, Cat(path, ": normalizer")));
  ASSIGN_OR_RETURN(const nlohmann::json added_json, Small(doc, "added_tokens"));
  ASSIGN_OR_RETURN(auto added, ParseAddedTokens(added_json, path));
  int vocab_size = tok->model_->id_limit();
  for (const AddedToken& t : added) vocab_size = std::max(vocab_size, t.id + 1);
  tok->vocab_size_ = vocab_size;
  const Normalizer& norm = tok->normalizer_;
  tok->added_ =
      AddedVocabulary(std::move(added), [&norm](std::string_view s) { return norm.Apply(s); });
  ASSIGN_OR_RETURN(const nlohmann::json pre, Small(doc, "pre_tokenizer"));
  ASSIGN_OR_RETURN(tok->pre_tokenizer_, PreTokenizer::FromJson(pre, Cat(path, ": pre_tokenizer")));
  ASSIGN_OR_RETURN(const nlohmann::json post, Small(doc, "post_processor"));
  ASSIGN_OR_RETURN(tok->post_processor_,
                   PostProcessor::FromJson(post, Cat(path, ": post_processor")));
  ASSIGN_OR_RETURN(const nlohmann::json dec, Small(doc, "decoder"));
  ASSIGN_OR_RETURN(tok->decoder_, Decoder::FromJson(dec, Cat(path, ": decoder")));
  return tok;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromJson(std::string_view json,
                                                               const std::string& path_for_errors) {
  return TokenizerLoader::Load(json, path_for_errors);
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromFile(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string contents, ReadFileToString(path));
  return TokenizerLoader::Load(contents, path);
}

}  // namespace tandem
