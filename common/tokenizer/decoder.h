// The tokenizer.json "decoder": turns token strings back into text. Supported: ByteLevel,
// Replace, ByteFallback, Fuse, Strip, Metaspace and Sequence of them; without a decoder the
// tokens are joined with spaces (as Hugging Face does).
#ifndef TANDEM_COMMON_TOKENIZER_DECODER_H_
#define TANDEM_COMMON_TOKENIZER_DECODER_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tokenizer/pattern.h"
#include "nlohmann/json.hpp"

namespace tandem {

class Decoder {
 public:
  static absl::StatusOr<Decoder> FromJson(const nlohmann::json& config, std::string_view where);

  // Runs the chain over `tokens` (the first one being the first of the sequence). With `raw`
  // set, bytes are passed through without UTF-8 repair (for incremental decoding); otherwise
  // the result is valid UTF-8, with invalid bytes replaced the way Hugging Face does.
  std::string Decode(std::vector<std::string> tokens, bool raw) const;

 private:
  struct Step {
    enum class Kind { kByteLevel, kReplace, kByteFallback, kFuse, kStrip, kMetaspace };
    Kind kind;
    std::vector<TextPattern> pattern;  // kReplace (one)
    std::string content;               // kReplace: replacement; kStrip / kMetaspace: character
    int64_t start = 0, stop = 0;       // kStrip
    bool strip_first = true;           // kMetaspace: prepend scheme is not "never"
  };
  static absl::Status Parse(const nlohmann::json& config, std::string_view where,
                            std::vector<Step>* steps);
  static void ApplyStep(const Step& step, bool raw, std::vector<std::string>* tokens);

  std::vector<Step> steps_;
  bool present_ = false;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_TOKENIZER_DECODER_H_
