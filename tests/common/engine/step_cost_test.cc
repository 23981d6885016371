#include "common/engine/step_cost.h"

#include "gtest/gtest.h"

namespace tandem {
namespace {

TEST(StepCostFitTest, NothingKnownBeforeTheFirstStep) {
  StepCostFit fit;
  EXPECT_FALSE(fit.Estimate().known());
  fit.Add(1, 100, 50);
  EXPECT_TRUE(fit.Estimate().known());
  fit.Clear();
  EXPECT_FALSE(fit.Estimate().known());
}

TEST(StepCostFitTest, RecoversTheThreeTermsOfMixedSteps) {
  // t = 800 µs + 0.25 µs per token + 0.002 µs per context token: prefill chunks and decode
  // batches of several sizes.
  StepCostFit fit(1.0);
  for (int64_t batch : {1, 4, 16, 64}) {
    for (int64_t chunk : {0, 512, 2048}) {
      const int64_t tokens = batch + chunk;
      const int64_t context = batch * 3000 + chunk * 2;
      fit.Add(tokens, context, 800 + 0.25 * tokens + 0.002 * context);
    }
  }
  const StepCost cost = fit.Estimate();
  EXPECT_NEAR(cost.per_step_us, 800, 1e-3);
  EXPECT_NEAR(cost.per_token_us, 0.25, 1e-6);
  EXPECT_NEAR(cost.per_context_token_us, 0.002, 1e-8);
  EXPECT_NEAR(cost.StepUs(10, 5000), 800 + 2.5 + 10, 1e-3);
}

TEST(StepCostFitTest, CoefficientsNeverGoNegative) {
  // Steps that get cheaper with more tokens (noise, a warming cache): the token term is dropped,
  // not made negative.
  StepCostFit fit(1.0);
  for (int64_t tokens = 1; tokens <= 64; ++tokens) fit.Add(tokens, 0, 1000 - 2.0 * tokens);
  const StepCost cost = fit.Estimate();
  EXPECT_GE(cost.per_step_us, 0);
  EXPECT_EQ(cost.per_token_us, 0);
  EXPECT_EQ(cost.per_context_token_us, 0);
  EXPECT_NEAR(cost.per_step_us, 1000 - 2.0 * 32.5, 1e-6);  // the mean
}

TEST(StepCostFitTest, RepeatedIdenticalStepsPredictThemselves) {
  StepCostFit fit;
  for (int i = 0; i < 100; ++i) fit.Add(8, 16000, 12000);
  EXPECT_NEAR(fit.Estimate().StepUs(8, 16000), 12000, 1e-3);
}

TEST(StepCostFitTest, RecentStepsOutweighOldOnes) {
  StepCostFit fit(0.9);
  for (int i = 0; i < 200; ++i) fit.Add(4 + i % 8, 1000, 100);
  for (int i = 0; i < 200; ++i) fit.Add(4 + i % 8, 1000, 400);
  EXPECT_NEAR(fit.Estimate().StepUs(8, 1000), 400, 1.0);
  EXPECT_LT(fit.Estimate().samples, 11);  // about 1 / (1 − 0.9)
}

TEST(StepCostFitTest, AStepStretchedByTheMachineBarelyMovesThePrice) {
  // 200 steps of 2 ms, then one the process spent 40 ms descheduled in.
  StepCostFit plain;
  StepCostFit robust(0.995, 3);
  for (StepCostFit* fit : {&plain, &robust}) {
    for (int i = 0; i < 200; ++i) fit->Add(4 + i % 8, 1000, 2000);
    fit->Add(8, 1000, 42000);
  }
  // Least squares moves the price of every step by about 40 ms / 200 (the fit's weight); the
  // robust fit counts the step as 6 ms.
  EXPECT_GT(plain.Estimate().StepUs(8, 1000), 2100);
  EXPECT_LT(robust.Estimate().StepUs(8, 1000), 2040);
  EXPECT_GT(robust.Estimate().StepUs(8, 1000), 2000);
}

TEST(StepCostFitTest, ARobustFitStillFollowsANodeThatGotFiveTimesSlower) {
  StepCostFit fit(0.9, 3);
  for (int i = 0; i < 200; ++i) fit.Add(4 + i % 8, 1000, 100);
  int steps = 0;
  while (fit.Estimate().StepUs(8, 1000) < 495 && steps < 200) {
    fit.Add(4 + steps % 8, 1000, 500);
    ++steps;
  }
  EXPECT_LT(steps, 60);  // a plain fit at this decay: about 50
  EXPECT_NEAR(fit.Estimate().StepUs(8, 1000), 500, 5);
}

TEST(StepCostFitTest, TheFirstStepsAreTakenAsTheyCome) {
  // Before kWarmupSteps there is no prediction to hold a step against.
  StepCostFit fit(1.0, 3);
  fit.Add(8, 0, 100);
  fit.Add(8, 0, 1000);
  EXPECT_NEAR(fit.Estimate().StepUs(8, 0), 550, 1e-6);
}

}  // namespace
}  // namespace tandem
