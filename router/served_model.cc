#include "router/served_model.h"

#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/util/status_macros.h"

namespace tandem {

absl::StatusOr<std::shared_ptr<const ServedModel>> LoadServedModel(const std::string& dir,
                                                                   const std::string& served_name) {
  auto model = std::make_shared<ServedModel>();
  model->dir = dir;
  model->name = served_name;
  if (model->name.empty()) {
    std::filesystem::path path(dir);
    if (!path.has_filename()) path = path.parent_path();  // "models/llama/"
    model->name = path.filename().string();
  }
  ASSIGN_OR_RETURN(model->tokenizer, Tokenizer::FromFile(dir + "/tokenizer.json"));
  ASSIGN_OR_RETURN(model->config, LoadModelConfig(dir));
  auto tokenizer_config = LoadTokenizerConfig(dir);
  if (tokenizer_config.ok()) {
    model->tokenizer_config = *std::move(tokenizer_config);
    if (!model->tokenizer_config->chat_template.empty()) {
      auto chat = ChatTemplate::Parse(model->tokenizer_config->chat_template);
      if (!chat.ok()) {
        return absl::Status(
            chat.status().code(),
            absl::StrCat(dir, "/tokenizer_config.json: chat_template: ", chat.status().message()));
      }
      model->chat_template = *std::move(chat);
    }
  } else if (!absl::IsNotFound(tokenizer_config.status())) {
    return tokenizer_config.status();
  }
  return std::shared_ptr<const ServedModel>(std::move(model));
}

}  // namespace tandem
