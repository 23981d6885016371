// Follows one node's WatchKvEvents stream (PrefillNode or DecodeNode, by its role) on a thread of
// its own and applies the events to the node's prefix-cache view (Node::ApplyKvEvents). When the
// stream ends (a draining node ends it UNAVAILABLE) the view is dropped and the stream is reopened
// after `retry_interval` (while the node is up).
#ifndef TANDEM_ROUTER_KV_EVENTS_WATCHER_H_
#define TANDEM_ROUTER_KV_EVENTS_WATCHER_H_

#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "router/node.h"

namespace tandem {

class KvEventsWatcher {
 public:
  KvEventsWatcher(std::shared_ptr<Node> node, absl::Duration retry_interval);
  ~KvEventsWatcher();  // Stop()
  KvEventsWatcher(const KvEventsWatcher&) = delete;
  KvEventsWatcher& operator=(const KvEventsWatcher&) = delete;

  // Ends the current stream (the node restarted); a new one opens at once.
  void Restart();
  // The node came up: open the stream now rather than after the retry interval.
  void Wake();
  // Ends the stream and joins the thread.
  void Stop();

 private:
  void Run();

  const std::shared_ptr<Node> node_;
  const absl::Duration retry_interval_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* active_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::thread thread_;
};

}  // namespace tandem

#endif  // TANDEM_ROUTER_KV_EVENTS_WATCHER_H_
