// A BenchClient for tests of the load runner and the sweep: no server; each Send records when it
// was called and with what, holds the request for a set time, counts how many are in flight at
// once, and returns a scripted result.
#ifndef TANDEM_TESTS_BENCH_SERVE_FAKE_BENCH_CLIENT_H_
#define TANDEM_TESTS_BENCH_SERVE_FAKE_BENCH_CLIENT_H_

#include <algorithm>
#include <functional>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench/serve/bench_client.h"

namespace tandem::bench {

class FakeBenchClient : public BenchClient {
 public:
  struct Call {
    absl::Time at;
    BenchRequest request;
  };

  // How long Send holds a request (default: not at all).
  std::function<absl::Duration(const BenchRequest&)> hold = [](const BenchRequest&) {
    return absl::ZeroDuration();
  };
  // The result Send returns (default: a success echoing the request's lengths).
  std::function<RequestResult(const BenchRequest&)> result = [](const BenchRequest& r) {
    RequestResult out;
    out.success = true;
    out.ttft_s = 0.001;
    out.e2e_s = 0.002;
    out.itl_s.assign(std::max(r.output_len - 1, 0), 0.001 / std::max(r.output_len - 1, 1));
    out.prompt_tokens = r.prompt_len;
    out.output_tokens = r.output_len;
    return out;
  };

  RequestResult Send(const BenchRequest& request) override {
    {
      absl::MutexLock lock(&mu_);
      calls_.push_back({absl::Now(), request});
      ++in_flight_;
      max_in_flight_ = std::max(max_in_flight_, in_flight_);
    }
    absl::SleepFor(hold(request));
    RequestResult r = result(request);
    absl::MutexLock lock(&mu_);
    --in_flight_;
    return r;
  }

  std::vector<Call> calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  int max_in_flight() const {
    absl::MutexLock lock(&mu_);
    return max_in_flight_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<Call> calls_ ABSL_GUARDED_BY(mu_);
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int max_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

// `n` requests whose output_len is 1..n (so a result shows which request it belongs to).
inline std::vector<BenchRequest> NumberedRequests(int n) {
  std::vector<BenchRequest> out(n);
  for (int i = 0; i < n; ++i) {
    out[i].prompt_ids = {100 + i, 200 + i};
    out[i].prompt_len = 2;
    out[i].output_len = i + 1;
  }
  return out;
}

}  // namespace tandem::bench

#endif  // TANDEM_TESTS_BENCH_SERVE_FAKE_BENCH_CLIENT_H_
