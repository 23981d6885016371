#include "common/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace tandem {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// top-p without top-k sorts a growing prefix of the vocabulary, starting here.
constexpr size_t kTopPFirstSort = 64;

// Index of the largest value, ties to the lowest index; NaN never wins.
TokenId ArgMax(std::span<const float> x) {
  TokenId best = 0;
  float best_value = kNegInf;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] > best_value) {
      best_value = x[i];
      best = static_cast<TokenId>(i);
    }
  }
  return best;
}

// log(sum(exp(x))), accumulated in double.
double LogSumExp(std::span<const float> x) {
  float max_value = kNegInf;
  for (float v : x) max_value = std::max(max_value, v);
  if (!std::isfinite(max_value)) return max_value;
  double sum = 0.0;
  for (float v : x) sum += std::exp(static_cast<double>(v) - max_value);
  return max_value + std::log(sum);
}

// The n largest of `logits` as logprobs (logit - lse), largest first, ties to the lower id.
void TopLogprobs(std::span<const float> logits, int n, double lse, std::vector<TokenLogprob>* out) {
  out->clear();
  if (n <= 0) return;
  // Insertion into a short sorted list; holds raw logits until the end.
  for (size_t v = 0; v < logits.size(); ++v) {
    const float x = logits[v];
    if (std::isnan(x)) continue;
    if (static_cast<int>(out->size()) == n && !(x > out->back().logprob)) continue;
    auto pos =
        std::upper_bound(out->begin(), out->end(), x,
                         [](float value, const TokenLogprob& e) { return value > e.logprob; });
    if (static_cast<int>(out->size()) == n) out->pop_back();
    out->insert(pos, TokenLogprob{static_cast<TokenId>(v), x});
  }
  for (TokenLogprob& e : *out) e.logprob = static_cast<float>(e.logprob - lse);
}

}  // namespace

void Sampler::Sample(std::span<const float> logits, const SamplingParams& params,
                     std::span<const TokenId> prompt, std::span<const TokenId> output,
                     SamplingRng* rng, SampleResult* result) {
  TokenId token;
  if (params.greedy()) {
    if (HasPenalties(params)) {
      work_.assign(logits.begin(), logits.end());
      ApplyPenalties(work_, params, prompt, output, &penalty_scratch_);
      token = ArgMax(work_);
    } else {
      token = ArgMax(logits);
    }
  } else {
    const double total = BuildCandidates(logits, params, prompt, output);
    const double u = rng->NextUniform() * total;
    token = candidates_.back();
    double cumulative = 0.0;
    for (size_t i = 0; i < candidates_.size(); ++i) {
      cumulative += weights_[i];
      if (u < cumulative) {
        token = candidates_[i];
        break;
      }
    }
  }

  result->token = token;
  result->logprob = 0.0f;
  result->top_logprobs.clear();
  if (params.logprobs >= 0) {
    const double lse = LogSumExp(logits);
    result->logprob = static_cast<float>(logits[token] - lse);
    TopLogprobs(logits, params.logprobs, lse, &result->top_logprobs);
  }
}

std::vector<std::pair<TokenId, float>> Sampler::Distribution(std::span<const float> logits,
                                                             const SamplingParams& params,
                                                             std::span<const TokenId> prompt,
                                                             std::span<const TokenId> output) {
  std::vector<std::pair<TokenId, float>> dist;
  if (params.greedy()) {
    SampleResult greedy;
    SamplingRng unused;
    SamplingParams no_logprobs = params;
    no_logprobs.logprobs = -1;
    Sample(logits, no_logprobs, prompt, output, &unused, &greedy);
    dist.emplace_back(greedy.token, 1.0f);
    return dist;
  }
  const double total = BuildCandidates(logits, params, prompt, output);
  dist.reserve(candidates_.size());
  for (size_t i = 0; i < candidates_.size(); ++i) {
    dist.emplace_back(candidates_[i], static_cast<float>(weights_[i] / total));
  }
  return dist;
}

void Sampler::SortTop(size_t done, size_t n) {
  auto by_logit = [this](int32_t a, int32_t b) {
    return work_[a] > work_[b] || (work_[a] == work_[b] && a < b);
  };
  if (n < order_.size()) {
    std::nth_element(order_.begin() + done, order_.begin() + n, order_.end(), by_logit);
  }
  std::sort(order_.begin() + done, order_.begin() + n, by_logit);
}

double Sampler::BuildCandidates(std::span<const float> logits, const SamplingParams& params,
                                std::span<const TokenId> prompt, std::span<const TokenId> output) {
  const size_t vocab = logits.size();
  work_.assign(logits.begin(), logits.end());
  if (HasPenalties(params)) ApplyPenalties(work_, params, prompt, output, &penalty_scratch_);
  // Temperature; NaN and +inf are tamed so that sorting and exp stay well defined.
  float max_value = kNegInf;
  for (float& x : work_) {
    x /= params.temperature;
    if (std::isnan(x)) x = kNegInf;
    if (x == std::numeric_limits<float>::infinity()) x = std::numeric_limits<float>::max();
    max_value = std::max(max_value, x);
  }
  candidates_.clear();
  weights_.clear();
  if (max_value == kNegInf) {  // nothing finite to sample from
    candidates_.push_back(0);
    weights_.push_back(1.0f);
    return 1.0;
  }

  const size_t k = params.top_k > 0 && static_cast<size_t>(params.top_k) < vocab
                       ? static_cast<size_t>(params.top_k)
                       : vocab;
  const bool top_p_active = params.top_p < 1.0f;
  const float min_p = params.min_p;
  double kept_total = 0.0;

  if (k == vocab && !top_p_active) {
    // No ranking needed: walk the vocabulary in token order, dropping what min-p removes.
    for (size_t v = 0; v < vocab; ++v) {
      const float w = std::exp(work_[v] - max_value);
      if (w < min_p) continue;
      candidates_.push_back(static_cast<TokenId>(v));
      weights_.push_back(w);
      kept_total += w;
    }
    return kept_total;
  }

  order_.resize(vocab);
  std::iota(order_.begin(), order_.end(), 0);
  size_t sorted = k < vocab ? k : std::min(vocab, kTopPFirstSort);
  SortTop(0, sorted);

  size_t n = k;
  if (top_p_active) {
    // Mass of the top-k set (the whole vocabulary when top-k is off).
    double total = 0.0;
    if (k < vocab) {
      for (size_t i = 0; i < k; ++i) total += std::exp(work_[order_[i]] - max_value);
    } else {
      for (float x : work_) total += std::exp(x - max_value);
    }
    // Keep token i while the mass of the tokens ranked above it is below top_p.
    const double limit = static_cast<double>(params.top_p) * total;
    double cumulative = 0.0;
    size_t i = 0;
    n = k;
    bool cut = false;
    while (!cut) {
      for (; i < sorted; ++i) {
        if (cumulative >= limit) {
          n = i;
          cut = true;
          break;
        }
        cumulative += std::exp(work_[order_[i]] - max_value);
      }
      if (cut || sorted == k) break;
      const size_t more = std::min(k, sorted * 4);
      SortTop(sorted, more);
      sorted = more;
    }
  }

  // min-p: a sorted list ends at the first token below the threshold (the max has weight 1).
  for (size_t i = 0; i < n; ++i) {
    const float w = std::exp(work_[order_[i]] - max_value);
    if (w < min_p) break;
    candidates_.push_back(order_[i]);
    weights_.push_back(w);
    kept_total += w;
  }
  return kept_total;
}

}  // namespace tandem
