// The text side of the model the router serves: its tokenizer, chat template and the limits from
// config.json (vocabulary, context length), loaded once from a Hugging Face model directory.
// Weights are not read: the router never runs the model.
#ifndef TANDEM_ROUTER_SERVED_MODEL_H_
#define TANDEM_ROUTER_SERVED_MODEL_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/model/model_config.h"
#include "common/tokenizer/chat_template.h"
#include "common/tokenizer/tokenizer.h"
#include "common/tokenizer/tokenizer_config.h"

namespace tandem {

struct ServedModel {
  std::string name;  // what GenerateRequest.model must say (or leave empty)
  std::string dir;
  std::unique_ptr<Tokenizer> tokenizer;
  ModelConfig config;
  std::optional<TokenizerConfig> tokenizer_config;  // tokenizer_config.json, when present
  std::optional<ChatTemplate> chat_template;        // when the model has one

  int vocab_size() const { return config.vocab_size; }
  int max_context_tokens() const { return config.max_position_embeddings; }
};

// Reads DIR/tokenizer.json, DIR/config.json and (optional) DIR/tokenizer_config.json.
// `served_name` empty: the directory's base name.
absl::StatusOr<std::shared_ptr<const ServedModel>> LoadServedModel(const std::string& dir,
                                                                   const std::string& served_name);

}  // namespace tandem

#endif  // TANDEM_ROUTER_SERVED_MODEL_H_
