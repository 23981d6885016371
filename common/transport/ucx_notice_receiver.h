// The owner side of the UCX transport's notices: the active-message handler, rendezvous receives
// in progress, and delivering received payloads to the NoticeHandler.
//
// Owns the receives in progress (and their UCX requests), the payloads waiting for delivery and
// the handler. Touches the worker only to register the handler and receive data. SetHandler may
// be called on any thread; everything else on the progress thread, where the handler runs.
#ifndef TANDEM_COMMON_TRANSPORT_UCX_NOTICE_RECEIVER_H_
#define TANDEM_COMMON_TRANSPORT_UCX_NOTICE_RECEIVER_H_

#include <ucp/api/ucp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/transport/kv_transport.h"
#include "common/transport/ucx_handles.h"

namespace tandem {

// Active message id of notices (the sender is ucx_ops).
inline constexpr unsigned kUcxNoticeAmId = 0x7a;

class UcxNoticeReceiver {
 public:
  UcxNoticeReceiver() = default;
  UcxNoticeReceiver(const UcxNoticeReceiver&) = delete;
  UcxNoticeReceiver& operator=(const UcxNoticeReceiver&) = delete;

  // Registers the notice handler with `worker`.
  absl::Status Register(ucp_worker_h worker);
  void SetHandler(NoticeHandler handler);

  // Payloads received, not yet delivered.
  bool has_deliveries() const { return !deliveries_.empty(); }
  // Runs the handler on each (or logs the drop when there is none).
  void Deliver();
  // Rendezvous receives in progress.
  bool receiving() const { return !pending_.empty(); }

  // Teardown, before the worker goes: frees the receives' requests.
  void ReleaseRequests();
  // Teardown, after the worker went: forgets the receives.
  void Clear() { pending_.clear(); }

 private:
  // A rendezvous notice being received.
  struct Pending {
    UcxNoticeReceiver* self = nullptr;
    std::string data;
    UcsRequest request;
  };

  static ucs_status_t AmRecvCb(void* arg, const void* header, size_t header_length, void* data,
                               size_t length, const ucp_am_recv_param_t* param);
  static void AmDataCb(void* request, ucs_status_t status, size_t length, void* user_data);

  ucp_worker_h worker_ = nullptr;
  absl::flat_hash_set<std::unique_ptr<Pending>> pending_;
  std::vector<std::string> deliveries_;
  mutable absl::Mutex mu_;
  NoticeHandler handler_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem

#endif  // TANDEM_COMMON_TRANSPORT_UCX_NOTICE_RECEIVER_H_
