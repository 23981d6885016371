// RunLoad with a fake client: send times follow the arrival process (never early), in arrival
// order; max_concurrency holds; results come back in dataset order; time_scale stretches the
// schedule and divides the measured times; trace timestamps replace the arrival process. Timing
// checks are one-sided (never before the scheduled time) so a busy machine cannot fail them.
#include "bench/serve/load_runner.h"

#include <atomic>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/bench/serve/fake_bench_client.h"

namespace tandem::bench {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Rounding between absl::Duration and double seconds.
constexpr double kEps = 1e-6;

TEST(LoadRunnerTest, SendsAtArrivalTimesInOrder) {
  FakeBenchClient client;
  const std::vector<BenchRequest> requests = NumberedRequests(15);
  LoadOptions options;
  options.arrivals.rate = 300;
  options.arrivals.seed = 7;
  const absl::Time before = absl::Now();
  absl::StatusOr<LoadResult> result = RunLoad(client, requests, options);
  ASSERT_TRUE(result.ok()) << result.status();
  absl::StatusOr<std::vector<double>> times = ArrivalTimes(options.arrivals, 15);
  ASSERT_TRUE(times.ok());

  ASSERT_EQ(result->results.size(), 15u);
  // The threads reach the client in any order; every one of them no earlier than its time.
  const std::vector<FakeBenchClient::Call> calls = client.calls();
  ASSERT_EQ(calls.size(), 15u);
  // The run's zero: no call before it, each one no earlier than its time after it.
  EXPECT_GE(result->started, before);
  for (const FakeBenchClient::Call& call : calls) {
    const int i = call.request.output_len - 1;
    EXPECT_GE(absl::ToDoubleSeconds(call.at - before), (*times)[i] - kEps);
    EXPECT_GE(absl::ToDoubleSeconds(call.at - result->started), (*times)[i] - kEps);
  }
  for (int i = 0; i < 15; ++i) {
    EXPECT_GE(result->results[i].start_s, (*times)[i] - kEps) << "request " << i << " went early";
    // Sent in arrival order.
    if (i > 0) {
      EXPECT_GE(result->results[i].start_s, result->results[i - 1].start_s);
    }
  }
  // The run spans at least the first send to the last one.
  EXPECT_GE(result->duration_s, result->results.back().start_s - result->results[0].start_s);
}

TEST(LoadRunnerTest, ResultsComeBackInDatasetOrder) {
  FakeBenchClient client;
  // The first requests take longest, so they end last.
  client.hold = [](const BenchRequest& r) { return absl::Milliseconds(2 * (10 - r.output_len)); };
  const std::vector<BenchRequest> requests = NumberedRequests(10);
  std::vector<int> ended;
  LoadOptions options;  // rate inf: all at once
  options.on_request_done = [&ended](int done, int total) {
    EXPECT_EQ(total, 10);
    ended.push_back(done);  // the runner serializes the calls
  };
  absl::StatusOr<LoadResult> result = RunLoad(client, requests, options);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->results.size(), 10u);
  for (int i = 0; i < 10; ++i) {
    EXPECT_TRUE(result->results[i].success);
    EXPECT_EQ(result->results[i].output_tokens, i + 1) << "result " << i << " is another's";
  }
  EXPECT_THAT(ended, ElementsAre(1, 2, 3, 4, 5, 6, 7, 8, 9, 10));
  EXPECT_GT(result->duration_s, 0.0);
}

TEST(LoadRunnerTest, MaxConcurrencyIsNeverExceeded) {
  FakeBenchClient client;
  client.hold = [](const BenchRequest&) { return absl::Milliseconds(3); };
  LoadOptions options;
  options.max_concurrency = 3;
  absl::StatusOr<LoadResult> result = RunLoad(client, NumberedRequests(24), options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_LE(client.max_in_flight(), 3);
  EXPECT_GE(client.max_in_flight(), 1);
  EXPECT_EQ(client.calls().size(), 24u);
  // Queued requests still go in dataset order.
  for (int i = 1; i < 24; ++i) {
    EXPECT_GE(result->results[i].start_s, result->results[i - 1].start_s);
  }
}

TEST(LoadRunnerTest, WithoutALimitRequestsOverlap) {
  // The open loop does not wait for earlier requests: all 8 are in flight together.
  FakeBenchClient client;
  std::atomic<int> arrived{0};
  client.hold = [&arrived](const BenchRequest&) {
    ++arrived;
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    while (arrived.load() < 8 && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(1));
    return absl::ZeroDuration();
  };
  absl::StatusOr<LoadResult> result = RunLoad(client, NumberedRequests(8), LoadOptions());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(client.max_in_flight(), 8);
}

TEST(LoadRunnerTest, TimeScaleStretchesTheScheduleAndDividesTheTimes) {
  FakeBenchClient client;
  client.result = [](const BenchRequest&) {
    RequestResult r;
    r.success = true;
    r.ttft_s = 0.4;
    r.e2e_s = 0.8;
    r.itl_s = {0.04, 0.08};
    r.output_tokens = 3;
    return r;
  };
  std::vector<BenchRequest> requests = NumberedRequests(3);
  requests[0].timestamp_s = 0.0;
  requests[1].timestamp_s = 0.005;
  requests[2].timestamp_s = 0.010;
  LoadOptions options;
  options.time_scale = 4;
  const absl::Time before = absl::Now();
  absl::StatusOr<LoadResult> result = RunLoad(client, requests, options);
  ASSERT_TRUE(result.ok()) << result.status();
  const std::vector<FakeBenchClient::Call> calls = client.calls();
  ASSERT_EQ(calls.size(), 3u);
  // Wall clock: stretched four times.
  EXPECT_GE(absl::ToDoubleSeconds(calls[2].at - before), 0.040 - kEps);
  for (int i = 0; i < 3; ++i) {
    const RequestResult& r = result->results[i];
    // Reported in the modelled time.
    EXPECT_GE(r.start_s, *requests[i].timestamp_s - kEps);
    EXPECT_DOUBLE_EQ(r.ttft_s, 0.1);
    EXPECT_DOUBLE_EQ(r.e2e_s, 0.2);
    EXPECT_THAT(r.itl_s, ElementsAre(0.01, 0.02));
  }
}

TEST(LoadRunnerTest, TraceTimestampsReplaceTheArrivalProcess) {
  FakeBenchClient client;
  std::vector<BenchRequest> requests = NumberedRequests(3);
  requests[0].timestamp_s = 0.030;  // not sorted: sent in time order, reported in dataset order
  requests[1].timestamp_s = 0.0;
  requests[2].timestamp_s = 0.015;
  LoadOptions options;
  options.arrivals.rate = -1;  // would be invalid; unused when every request has a timestamp
  absl::StatusOr<LoadResult> result = RunLoad(client, requests, options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_LE(result->results[1].start_s, result->results[2].start_s);
  EXPECT_LE(result->results[2].start_s, result->results[0].start_s);
  for (int i = 0; i < 3; ++i) {
    EXPECT_GE(result->results[i].start_s, *requests[i].timestamp_s - kEps);
    EXPECT_EQ(result->results[i].output_tokens, i + 1);
  }
}

TEST(LoadRunnerTest, FailedRequestsAreResultsNotErrors) {
  FakeBenchClient client;
  client.result = [](const BenchRequest& r) {
    RequestResult out;
    out.success = r.output_len % 2 == 0;
    if (!out.success) out.error = "HTTP 503: busy";
    out.output_tokens = out.success ? r.output_len : 0;
    return out;
  };
  absl::StatusOr<LoadResult> result = RunLoad(client, NumberedRequests(4), LoadOptions());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->results[0].success);
  EXPECT_EQ(result->results[0].error, "HTTP 503: busy");
  EXPECT_TRUE(result->results[1].success);
}

TEST(LoadRunnerTest, RejectsBadOptions) {
  FakeBenchClient client;
  const std::vector<BenchRequest> requests = NumberedRequests(2);
  LoadOptions options;
  options.time_scale = 0;
  EXPECT_THAT(std::string(RunLoad(client, requests, options).status().message()),
              HasSubstr("time_scale"));
  options = LoadOptions();
  options.max_concurrency = -1;
  EXPECT_FALSE(RunLoad(client, requests, options).ok());
  options = LoadOptions();
  options.arrivals.rate = 0;
  EXPECT_FALSE(RunLoad(client, requests, options).ok());
  std::vector<BenchRequest> bad = requests;
  bad[0].timestamp_s = -1;
  EXPECT_FALSE(RunLoad(client, bad, LoadOptions()).ok());
  EXPECT_TRUE(client.calls().empty());
}

TEST(LoadRunnerTest, EmptyDatasetIsAnEmptyRun) {
  FakeBenchClient client;
  absl::StatusOr<LoadResult> result = RunLoad(client, {}, LoadOptions());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->results.empty());
  EXPECT_EQ(result->duration_s, 0.0);
}

}  // namespace
}  // namespace tandem::bench
