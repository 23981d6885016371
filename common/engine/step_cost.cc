#include "common/engine/step_cost.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tandem {
namespace {

constexpr int kTerms = 3;

// Solves xx[S] θ = xt[S] for the terms in `mask` (bit i: term i) by Gaussian elimination with
// partial pivoting, after scaling each term by its diagonal (the terms differ by orders of
// magnitude) and adding a ridge of 1e-9 of it (repeated steps make xx singular). False when the
// system is still singular.
bool SolveSubset(const std::array<std::array<double, 3>, 3>& xx, const std::array<double, 3>& xt,
                 int mask, std::array<double, 3>* theta) {
  int index[kTerms];
  int n = 0;
  for (int i = 0; i < kTerms; ++i) {
    if (mask & (1 << i)) index[n++] = i;
  }
  double scale[kTerms];
  double a[kTerms][kTerms + 1];
  for (int r = 0; r < n; ++r) {
    const double d = xx[index[r]][index[r]];
    if (!(d > 0)) return false;
    scale[r] = 1.0 / std::sqrt(d);
  }
  for (int r = 0; r < n; ++r) {
    for (int c = 0; c < n; ++c) a[r][c] = xx[index[r]][index[c]] * scale[r] * scale[c];
    a[r][r] += 1e-9;
    a[r][n] = xt[index[r]] * scale[r];
  }
  for (int c = 0; c < n; ++c) {
    int pivot = c;
    for (int r = c + 1; r < n; ++r) {
      if (std::abs(a[r][c]) > std::abs(a[pivot][c])) pivot = r;
    }
    if (std::abs(a[pivot][c]) < 1e-12) return false;
    for (int k = 0; k <= n; ++k) std::swap(a[c][k], a[pivot][k]);
    for (int r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = a[r][c] / a[c][c];
      for (int k = c; k <= n; ++k) a[r][k] -= f * a[c][k];
    }
  }
  *theta = {0, 0, 0};
  for (int r = 0; r < n; ++r) (*theta)[index[r]] = a[r][n] / a[r][r] * scale[r];
  return true;
}

}  // namespace

StepCostFit::StepCostFit(double decay, double outlier_factor)
    : decay_(decay > 0 && decay <= 1 ? decay : 1),
      outlier_factor_(outlier_factor > 1 ? outlier_factor : 0) {}

void StepCostFit::Add(int64_t new_tokens, int64_t context_tokens, double duration_us) {
  if (outlier_factor_ > 0 && xx_[0][0] >= kWarmupSteps) {
    const double predicted = Estimate().StepUs(new_tokens, context_tokens);
    if (predicted > 0) duration_us = std::min(duration_us, outlier_factor_ * predicted);
  }
  const double x[kTerms] = {1, static_cast<double>(new_tokens),
                            static_cast<double>(context_tokens)};
  for (int r = 0; r < kTerms; ++r) {
    for (int c = 0; c < kTerms; ++c) xx_[r][c] = xx_[r][c] * decay_ + x[r] * x[c];
    xt_[r] = xt_[r] * decay_ + x[r] * duration_us;
  }
  tt_ = tt_ * decay_ + duration_us * duration_us;
}

StepCost StepCostFit::Estimate() const {
  StepCost cost;
  if (!(xx_[0][0] > 0)) return cost;
  double best = std::numeric_limits<double>::infinity();
  std::array<double, 3> best_theta{};
  for (int mask = 1; mask < (1 << kTerms); ++mask) {
    std::array<double, 3> theta;
    if (!SolveSubset(xx_, xt_, mask, &theta)) continue;
    if (theta[0] < 0 || theta[1] < 0 || theta[2] < 0) continue;
    // The weighted squared error: tt − 2 θ·xt + θᵀ xx θ.
    double error = tt_;
    for (int r = 0; r < kTerms; ++r) {
      error -= 2 * theta[r] * xt_[r];
      for (int c = 0; c < kTerms; ++c) error += theta[r] * xx_[r][c] * theta[c];
    }
    // Fewer terms win a tie (rounding must not pick a term the data cannot tell apart).
    if (error < best * (1 - 1e-9) - 1e-12) {
      best = error;
      best_theta = theta;
    }
  }
  cost.per_step_us = best_theta[0];
  cost.per_token_us = best_theta[1];
  cost.per_context_token_us = best_theta[2];
  cost.samples = xx_[0][0];
  return cost;
}

void StepCostFit::Clear() {
  xx_ = {};
  xt_ = {};
  tt_ = 0;
}

}  // namespace tandem
