// The HTTP generation requests in flight, with their sinks, so the server's Shutdown can wait for
// them and cancel the ones still running. A request costs no thread (RequestRunner::Start): it is
// registered when it starts and leaves when its `done` runs. Thread-safe.
#ifndef TANDEM_ROUTER_HTTP_RUNNING_REQUESTS_H_
#define TANDEM_ROUTER_HTTP_RUNNING_REQUESTS_H_

#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "router/http/http_response_sink.h"

namespace tandem {

class RunningRequests {
 public:
  // Registers a request with its sink (cancelled by CancelAll); false after Close().
  bool Begin(std::shared_ptr<HttpResponseSink> sink, uint64_t* id);
  // The request ended.
  void End(uint64_t id);
  // No more requests.
  void Close();
  // Waits until none runs or `deadline` passes; true when none runs.
  bool WaitIdle(absl::Time deadline);
  // Cancels the sinks of the requests still running (their clients count as gone).
  void CancelAll();

  int64_t running() const;

 private:
  mutable absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<uint64_t, std::shared_ptr<HttpResponseSink>> running_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem

#endif  // TANDEM_ROUTER_HTTP_RUNNING_REQUESTS_H_
