#include "common/tokenizer/tokenizer_config.h"

#include <filesystem>

#include "common/tokenizer/json_util.h"
#include "common/util/mapped_file.h"
#include "common/util/status_macros.h"
#include "nlohmann/json.hpp"

namespace tandem {
namespace {

// A token given as a string or as an AddedToken object.
absl::StatusOr<std::optional<std::string>> TokenField(const nlohmann::json& config,
                                                      std::string_view key,
                                                      const std::string& path) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  return json_util::FieldError(Cat(path, ": ", key), "expected a string or {\"content\": ...}");
}

absl::StatusOr<std::optional<bool>> OptBool(const nlohmann::json& config, std::string_view key,
                                            const std::string& path) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) return json_util::FieldError(Cat(path, ": ", key), "expected a boolean");
  return it->get<bool>();
}

absl::Status ReadTemplates(const nlohmann::json& value, const std::string& where,
                           TokenizerConfig* config) {
  if (value.is_string()) {
    config->chat_template = value.get<std::string>();
    config->named_chat_templates["default"] = config->chat_template;
    return absl::OkStatus();
  }
  if (!value.is_array()) {
    return json_util::FieldError(where, "expected a string or a list of {name, template}");
  }
  for (size_t i = 0; i < value.size(); ++i) {
    const auto& entry = value[i];
    if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() ||
        !entry.contains("template") || !entry["template"].is_string()) {
      return json_util::FieldError(Cat(where, "[", i, "]"),
                                   "expected {\"name\": string, \"template\": string}");
    }
    config->named_chat_templates[entry["name"].get<std::string>()] =
        entry["template"].get<std::string>();
  }
  if (auto it = config->named_chat_templates.find("default");
      it != config->named_chat_templates.end()) {
    config->chat_template = it->second;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TokenizerConfig> ParseTokenizerConfig(std::string_view json,
                                                     const std::string& path) {
  const nlohmann::json doc = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return absl::InvalidArgumentError(Cat(path, ": not valid JSON"));
  if (!doc.is_object()) return absl::InvalidArgumentError(Cat(path, ": expected a JSON object"));
  TokenizerConfig config;
  ASSIGN_OR_RETURN(config.bos_token, TokenField(doc, "bos_token", path));
  ASSIGN_OR_RETURN(config.eos_token, TokenField(doc, "eos_token", path));
  ASSIGN_OR_RETURN(config.pad_token, TokenField(doc, "pad_token", path));
  ASSIGN_OR_RETURN(config.unk_token, TokenField(doc, "unk_token", path));
  ASSIGN_OR_RETURN(config.add_bos_token, OptBool(doc, "add_bos_token", path));
  ASSIGN_OR_RETURN(config.add_eos_token, OptBool(doc, "add_eos_token", path));
  ASSIGN_OR_RETURN(auto cleanup, OptBool(doc, "clean_up_tokenization_spaces", path));
  config.clean_up_tokenization_spaces = cleanup.value_or(false);
  ASSIGN_OR_RETURN(config.tokenizer_class, json_util::GetString(doc, "tokenizer_class", "",
                                                                Cat(path, ": tokenizer_class")));
  if (auto it = doc.find("chat_template"); it != doc.end() && !it->is_null()) {
    RETURN_IF_ERROR(ReadTemplates(*it, Cat(path, ": chat_template"), &config));
  }
  return config;
}

absl::StatusOr<TokenizerConfig> LoadTokenizerConfig(const std::string& model_dir) {
  const std::filesystem::path dir(model_dir);
  const std::string path = (dir / "tokenizer_config.json").string();
  ASSIGN_OR_RETURN(const std::string json, ReadFileToString(path));
  ASSIGN_OR_RETURN(TokenizerConfig config, ParseTokenizerConfig(json, path));
  if (config.named_chat_templates.empty()) {
    // Newer transformers save the template beside the config.
    const std::string jinja_path = (dir / "chat_template.jinja").string();
    const std::string json_path = (dir / "chat_template.json").string();
    if (std::filesystem::exists(jinja_path)) {
      ASSIGN_OR_RETURN(config.chat_template, ReadFileToString(jinja_path));
      config.named_chat_templates["default"] = config.chat_template;
    } else if (std::filesystem::exists(json_path)) {
      ASSIGN_OR_RETURN(const std::string text, ReadFileToString(json_path));
      const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
      if (doc.is_discarded() || !doc.is_object() || !doc.contains("chat_template")) {
        return absl::InvalidArgumentError(Cat(json_path, ": expected {\"chat_template\": ...}"));
      }
      RETURN_IF_ERROR(
          ReadTemplates(doc["chat_template"], Cat(json_path, ": chat_template"), &config));
    }
  }
  return config;
}

}  // namespace tandem
