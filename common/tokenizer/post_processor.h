// The tokenizer.json "post_processor" for single sequences: TemplateProcessing (e.g. Llama 3.x
// adds <|begin_of_text|>), BertProcessing / RobertaProcessing ([CLS] ... [SEP]), ByteLevel (no
// effect on ids) and Sequence of them.
#ifndef TANDEM_COMMON_TOKENIZER_POST_PROCESSOR_H_
#define TANDEM_COMMON_TOKENIZER_POST_PROCESSOR_H_

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/types/dtype.h"
#include "nlohmann/json.hpp"

namespace tandem {

class PostProcessor {
 public:
  static absl::StatusOr<PostProcessor> FromJson(const nlohmann::json& config,
                                                std::string_view where);

  // Adds the special tokens around `ids` when `add_special_tokens` is set.
  std::vector<TokenId> Apply(std::vector<TokenId> ids, bool add_special_tokens) const;

  // The ids added before and after the sequence.
  const std::vector<TokenId>& prefix() const { return prefix_; }
  const std::vector<TokenId>& suffix() const { return suffix_; }

 private:
  static absl::Status Parse(const nlohmann::json& config, std::string_view where,
                            PostProcessor* out);

  std::vector<TokenId> prefix_, suffix_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_TOKENIZER_POST_PROCESSOR_H_
