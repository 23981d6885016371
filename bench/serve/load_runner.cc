#include "bench/serve/load_runner.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <numeric>
#include <optional>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace tandem::bench {
namespace {

// Threads for the requests in flight: each task gets a thread of its own at once — an idle one
// when there is one, else a new one — so no request waits for another. Threads are kept for
// later tasks (starting a thread per request costs the sender more than the request itself at
// thousands of requests per second) and joined on destruction.
class RequestThreads {
 public:
  RequestThreads() = default;
  RequestThreads(const RequestThreads&) = delete;
  RequestThreads& operator=(const RequestThreads&) = delete;

  ~RequestThreads() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    for (std::thread& t : threads_) t.join();
  }

  // False (and `task` dropped) when no thread could be started for it.
  bool Run(absl::AnyInvocable<void()> task) {
    absl::MutexLock lock(&mu_);
    tasks_.push_back(std::move(task));
    if (static_cast<int>(tasks_.size()) <= idle_) return true;  // an idle thread takes it
    try {
      threads_.emplace_back([this] { Loop(); });
    } catch (const std::system_error&) {
      if (!threads_.empty()) return true;  // it waits for a busy thread to end
      tasks_.pop_back();
      return false;
    }
    return true;
  }

 private:
  void Loop() {
    while (true) {
      absl::AnyInvocable<void()> task;
      {
        absl::MutexLock lock(&mu_);
        ++idle_;
        auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return !tasks_.empty() || stopping_;
        };
        mu_.Await(absl::Condition(&ready));
        --idle_;
        if (tasks_.empty()) return;  // stopping
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  absl::Mutex mu_;
  std::deque<absl::AnyInvocable<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  int idle_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;  // touched by Run (under mu_) and the destructor only
};

// Each request's send time in seconds from the start (before time_scale).
absl::StatusOr<std::vector<double>> SendTimes(const std::vector<BenchRequest>& requests,
                                              const ArrivalOptions& arrivals) {
  const int n = static_cast<int>(requests.size());
  const bool all_timed = std::all_of(requests.begin(), requests.end(), [](const BenchRequest& r) {
    return r.timestamp_s.has_value();
  });
  std::vector<double> times(n, 0.0);
  if (!all_timed) {
    absl::StatusOr<std::vector<double>> drawn = ArrivalTimes(arrivals, n);
    if (!drawn.ok()) return drawn.status();
    times = *std::move(drawn);
  }
  for (int i = 0; i < n; ++i) {
    if (requests[i].timestamp_s.has_value()) {
      const double t = *requests[i].timestamp_s;
      if (!std::isfinite(t) || t < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("request ", i, " has timestamp ", t, " s (must be finite and >= 0)"));
      }
      times[i] = t;
    }
  }
  return times;
}

}  // namespace

absl::StatusOr<LoadResult> RunLoad(BenchClient& client, const std::vector<BenchRequest>& requests,
                                   const LoadOptions& options) {
  if (!(options.time_scale > 0) || !std::isfinite(options.time_scale)) {
    return absl::InvalidArgumentError(
        absl::StrCat("time_scale must be a positive number, got ", options.time_scale));
  }
  if (options.max_concurrency < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_concurrency must be >= 0, got ", options.max_concurrency));
  }
  absl::StatusOr<std::vector<double>> times = SendTimes(requests, options.arrivals);
  if (!times.ok()) return times.status();
  const int n = static_cast<int>(requests.size());
  // Sent in time order (trace timestamps need not be sorted); ties keep dataset order.
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return (*times)[a] < (*times)[b]; });

  const double scale = options.time_scale;
  const int limit = options.max_concurrency;
  std::vector<RequestResult> results(n);  // each slot written by its request's thread only
  absl::Mutex mu;                         // guards the three below
  int in_flight = 0;
  int ended = 0;
  absl::Time last_end = absl::InfinitePast();
  // A request has ended: counted, and reported to the callback under the lock so `ended`
  // reaches it in order, before RunLoad returns.
  auto finish = [&](int i, RequestResult r, absl::Time end) {
    results[i] = std::move(r);
    absl::MutexLock lock(&mu);
    --in_flight;
    ++ended;
    last_end = std::max(last_end, end);
    if (options.on_request_done) options.on_request_done(ended, n);
  };

  std::optional<absl::Time> first_send;
  const absl::Time start = absl::Now();
  {
    RequestThreads threads;  // joined before the results are read
    for (int i : order) {
      const absl::Time send_at = start + absl::Seconds((*times)[i] * scale);
      // Sleeps until the send time; sleeping to an absolute time keeps errors from adding up.
      for (absl::Time now = absl::Now(); now < send_at; now = absl::Now()) {
        absl::SleepFor(send_at - now);
      }
      {
        // Waiting here rather than on the request's thread sends queued requests in order (as a
        // FIFO semaphore would) without a thread per waiting request.
        absl::MutexLock lock(&mu);
        auto has_slot = [&]() { return limit == 0 || in_flight < limit; };
        mu.Await(absl::Condition(&has_slot));
        ++in_flight;
      }
      const absl::Time sent = absl::Now();
      if (!first_send.has_value()) first_send = sent;
      const double start_s = absl::ToDoubleSeconds(sent - start) / scale;
      const bool started = threads.Run([&, i, start_s] {
        RequestResult r = client.Send(requests[i]);
        const absl::Time end = absl::Now();
        r.start_s = start_s;
        r.ttft_s /= scale;
        r.e2e_s /= scale;
        for (double& gap : r.itl_s) gap /= scale;
        finish(i, std::move(r), end);
      });
      if (!started) {
        RequestResult r;  // out of threads: this request fails rather than the run
        r.error = "could not start a thread for the request";
        r.start_s = start_s;
        finish(i, std::move(r), absl::Now());
      }
    }
    absl::MutexLock lock(&mu);
    auto all_ended = [&]() { return ended == n; };
    mu.Await(absl::Condition(&all_ended));
  }

  LoadResult out;
  out.results = std::move(results);
  out.started = start;
  if (first_send.has_value()) {
    absl::MutexLock lock(&mu);
    out.duration_s = absl::ToDoubleSeconds(last_end - *first_send) / scale;
  }
  return out;
}

}  // namespace tandem::bench
