#include "common/engine/speculative.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/util/cli_flags.h"

namespace tandem {

absl::StatusOr<SpeculativeMethod> ParseSpeculativeMethod(std::string_view name) {
  if (name == "none") return SpeculativeMethod::kNone;
  if (name == "ngram") return SpeculativeMethod::kNgram;
  if (name == "draft") return SpeculativeMethod::kDraft;
  if (name == "sim") return SpeculativeMethod::kSim;
  return absl::InvalidArgumentError(absl::StrCat("unknown speculative method '", std::string(name),
                                                 "' (have: none, ngram, draft, sim)"));
}

std::string_view SpeculativeMethodName(SpeculativeMethod method) {
  switch (method) {
    case SpeculativeMethod::kNone:
      return "none";
    case SpeculativeMethod::kNgram:
      return "ngram";
    case SpeculativeMethod::kDraft:
      return "draft";
    case SpeculativeMethod::kSim:
      return "sim";
  }
  return "unknown";
}

absl::Status SpeculativeOptions::Validate() const {
  if (!draft_model_dir.empty() && method != SpeculativeMethod::kDraft) {
    return absl::InvalidArgumentError(
        absl::StrCat("--draft-model is for --speculative draft, not --speculative ",
                     std::string(SpeculativeMethodName(method))));
  }
  if (!enabled()) return absl::OkStatus();
  if (method == SpeculativeMethod::kDraft && draft_model_dir.empty()) {
    return absl::InvalidArgumentError("--speculative draft needs --draft-model DIR");
  }
  if (num_speculative_tokens < 1 || num_speculative_tokens > kMaxSpeculativeTokens) {
    return absl::InvalidArgumentError(absl::StrCat("--num-speculative-tokens must be in [1, ",
                                                   kMaxSpeculativeTokens, "], got ",
                                                   num_speculative_tokens));
  }
  if (ngram_min < 1 || ngram_max < ngram_min) {
    return absl::InvalidArgumentError(absl::StrCat(
        "n-gram sizes must satisfy 1 <= min <= max, got min ", ngram_min, " max ", ngram_max));
  }
  if (method == SpeculativeMethod::kSim &&
      !(sim_acceptance_rate >= 0.0 && sim_acceptance_rate <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sim-acceptance-rate must be in [0, 1], got ", sim_acceptance_rate));
  }
  return absl::OkStatus();
}

void AddSpeculativeFlags(FlagSet& flags, SpeculativeOptions* o) {
  flags.Section("Speculative decoding");
  flags.Custom("speculative",
               {"none|ngram|draft|sim",
                "draft tokens verified in one step of the model, greedy or sampled (default "
                "none); ngram: copied from the latest earlier occurrence of the context's "
                "suffix; draft: a smaller model's greedy tokens (--draft-model); sim (sim "
                "backend only): right with probability --sim-acceptance-rate"},
               [o](std::string_view value) -> std::string {
                 absl::StatusOr<SpeculativeMethod> method = ParseSpeculativeMethod(value);
                 if (!method.ok()) return "expects none, ngram, draft or sim";
                 o->method = *method;
                 return "";
               });
  flags.Custom("draft-model",
               {"DIR",
                "a Hugging Face model directory with the target's tokenizer, run on the same "
                "backend with its own KV cache; implies --speculative draft"},
               [o](std::string_view value) -> std::string {
                 if (value.empty()) return "expects a model directory";
                 o->draft_model_dir = std::string(value);
                 if (o->method == SpeculativeMethod::kNone) o->method = SpeculativeMethod::kDraft;
                 return "";
               });
  flags.Number("num-speculative-tokens", &o->num_speculative_tokens,
               {"K", absl::StrCat("drafts per step, at most (default ", o->num_speculative_tokens,
                                  ", up to ", kMaxSpeculativeTokens, ")")});
  flags.Number("ngram-min", &o->ngram_min,
               {"N", absl::StrCat("--speculative ngram: the shortest suffix matched (default ",
                                  o->ngram_min, ")")});
  flags.Number("ngram-max", &o->ngram_max,
               {"N", absl::StrCat("--speculative ngram: the longest suffix matched (default ",
                                  o->ngram_max, ")")});
  flags.Number("sim-acceptance-rate", &o->sim_acceptance_rate,
               {"P", absl::StrCat("--speculative sim: the chance that each draft is right "
                                  "(default ",
                                  o->sim_acceptance_rate, ")")});
}

std::vector<TokenId> ProposeByNgram(std::span<const TokenId> context, int32_t ngram_min,
                                    int32_t ngram_max, int32_t max_drafts) {
  const int64_t size = static_cast<int64_t>(context.size());
  if (max_drafts <= 0) return {};
  // The longest suffix first: it predicts best. For each size, the latest earlier occurrence
  // (the text nearest the end is the likeliest to repeat).
  for (int64_t n = std::min<int64_t>(ngram_max, size - 1); n >= ngram_min; --n) {
    const std::span<const TokenId> suffix = context.subspan(size - n);
    for (int64_t start = size - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), context.begin() + start)) continue;
      // Copy what followed, on past the end of the context into the drafts themselves (an
      // overlapping copy): a match `size - follows` tokens back says the text repeats with that
      // period, so a loop of one token yields max_drafts drafts, not one.
      const int64_t follows = start + n;  // < size: the occurrence ends before the suffix does
      std::vector<TokenId> drafts;
      drafts.reserve(max_drafts);
      for (int64_t i = follows; static_cast<int64_t>(drafts.size()) < max_drafts; ++i) {
        drafts.push_back(i < size ? context[i] : drafts[i - size]);
      }
      return drafts;
    }
  }
  return {};
}

int32_t AcceptedDrafts(std::span<const TokenId> drafts, std::span<const TokenId> target) {
  int32_t accepted = 0;
  while (static_cast<size_t>(accepted) < drafts.size() && drafts[accepted] == target[accepted]) {
    ++accepted;
  }
  return accepted;
}

}  // namespace tandem
