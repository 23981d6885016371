// The threads that run HTTP generation requests: RequestRunner::Run blocks for the whole
// request, so each request gets its own thread (the Beast I/O threads never block). Tracks them
// with their sinks so the server's Shutdown can wait for them, cancel the ones still running
// and join every thread. Thread-safe.
#ifndef TANDEM_ROUTER_HTTP_REQUEST_THREADS_H_
#define TANDEM_ROUTER_HTTP_REQUEST_THREADS_H_

#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "router/http/http_response_sink.h"

namespace tandem {

class RequestThreads {
 public:
  RequestThreads() = default;
  ~RequestThreads();  // JoinAll()
  RequestThreads(const RequestThreads&) = delete;
  RequestThreads& operator=(const RequestThreads&) = delete;

  // Runs `fn` on a new thread; `sink` is the request's, cancelled by CancelAll. False (and `fn`
  // does not run) after Close().
  bool Launch(std::shared_ptr<HttpResponseSink> sink, absl::AnyInvocable<void()> fn);
  // No more launches.
  void Close();
  // Waits until no request runs or `deadline` passes; true when none runs.
  bool WaitIdle(absl::Time deadline);
  // Cancels the sinks of the requests still running (their clients count as gone).
  void CancelAll();
  // Waits for every thread to end and joins it.
  void JoinAll();

  int64_t running() const;

 private:
  struct Entry {
    std::thread thread;
    std::shared_ptr<HttpResponseSink> sink;
  };
  void JoinFinished() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<uint64_t, Entry> running_ ABSL_GUARDED_BY(mu_);
  // Threads whose function returned, to be joined.
  std::vector<std::thread> finished_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem

#endif  // TANDEM_ROUTER_HTTP_REQUEST_THREADS_H_
