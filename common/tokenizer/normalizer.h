// The tokenizer.json "normalizer": NFC/NFD/NFKC/NFKD, Prepend, Replace, Lowercase, Strip and
// Sequence of them.
#ifndef TANDEM_COMMON_TOKENIZER_NORMALIZER_H_
#define TANDEM_COMMON_TOKENIZER_NORMALIZER_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tokenizer/pattern.h"
#include "common/tokenizer/unicode/unicode_util.h"
#include "nlohmann/json.hpp"

namespace tandem {

class Normalizer {
 public:
  // `config` may be null (no normalization). `where` names the field in errors.
  static absl::StatusOr<Normalizer> FromJson(const nlohmann::json& config, std::string_view where);

  std::string Apply(std::string_view text) const;
  bool empty() const { return steps_.empty(); }

 private:
  struct Step {
    enum class Kind { kUnicode, kPrepend, kReplace, kLowercase, kStrip };
    Kind kind;
    unicode::NormalizationForm form{};
    std::string text;                  // Prepend: prefix; Replace: content
    std::vector<TextPattern> pattern;  // Replace (zero or one)
    bool strip_left = false, strip_right = false;
  };
  static absl::Status Parse(const nlohmann::json& config, std::string_view where,
                            std::vector<Step>* steps);

  std::vector<Step> steps_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_TOKENIZER_NORMALIZER_H_
