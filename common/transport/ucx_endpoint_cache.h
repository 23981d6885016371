// The UCX transport's endpoints: one per peer worker address, created on first use and cached,
// with the peer's remote keys unpacked once each; endpoints taken out of the cache (retired) wait
// here until UCX has closed them and no operation refers to them.
//
// Owns the endpoints, their remote keys and close requests. Touches the worker only through
// ucp_ep_* calls; knows operations only as the pointers each endpoint lists (ucx_ops fails them).
// Progress thread only.
#ifndef TANDEM_COMMON_TRANSPORT_UCX_ENDPOINT_CACHE_H_
#define TANDEM_COMMON_TRANSPORT_UCX_ENDPOINT_CACHE_H_

#include <ucp/api/ucp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/transport/ucx_handles.h"

namespace tandem {

class UcxEndpointCache;
struct UcxOp;

// An endpoint's life. Each state moves only down the table, by what its row says.
//
//   state       what it means                             what moves it on
//   kOpen       cached; operations may use it             the peer failed (UCX's error callback),
//                                                         a write past its deadline with puts
//                                                         outstanding, or the transport stopping:
//                                                         Fail -> kFailed
//   kFailed     has its error; still cached until retired Close (in Retire) -> kClosing, or
//                                                         kAbandoned, or kClosed if UCX closed it
//                                                         at once. (Stopping overwrites the error.)
//   kClosing    retired, close requested; will close      the close callback -> kClosed
//   kAbandoned  retired without peer error handling for   the close callback (the peer resumed)
//               a reason other than stopping; UCX may      -> kClosed
//               never close it
//   kClosed     closed; deleted once no operation lists   Reap deletes it
//               it
enum class UcxEndpointState { kOpen, kFailed, kClosing, kAbandoned, kClosed };

struct UcxEndpoint {
  UcxEndpointCache* cache = nullptr;  // for UCX's error callback
  std::string address;
  std::string tag;  // short printable id of `address`, for messages
  ucp_ep_h ep = nullptr;
  // UCP_ERR_HANDLING_MODE_PEER: a failure is reported, and a forced close cancels outstanding
  // requests. NONE (shared memory in UCX 1.13): UCX can do neither.
  ucp_err_handling_mode_t err_mode = UCP_ERR_HANDLING_MODE_PEER;
  UcxEndpointState state = UcxEndpointState::kOpen;
  absl::Status error;  // set on leaving kOpen
  absl::flat_hash_map<std::string, UcpRkey> rkeys;
  absl::flat_hash_set<UcxOp*> ops;  // operations on it, not owned
  UcsRequest close_request;

  bool failed() const { return state != UcxEndpointState::kOpen; }
  bool peer_errors() const { return err_mode == UCP_ERR_HANDLING_MODE_PEER; }
};

class UcxEndpointCache {
 public:
  explicit UcxEndpointCache(bool peer_error_handling) : peer_error_handling_(peer_error_handling) {}

  UcxEndpointCache(const UcxEndpointCache&) = delete;
  UcxEndpointCache& operator=(const UcxEndpointCache&) = delete;

  // The worker endpoints are created on; before any Get.
  void Open(ucp_worker_h worker) { worker_ = worker; }

  // The cached endpoint to `address`, created if needed.
  absl::StatusOr<UcxEndpoint*> Get(const std::string& address);
  // `ep`'s remote key for `key` (a packed key), unpacked on first use.
  absl::StatusOr<ucp_rkey_h> GetRkey(UcxEndpoint* ep, const std::string& key);

  // kOpen (or kFailed, when stopping) -> kFailed with `error`.
  static void Fail(UcxEndpoint* ep, absl::Status error);
  // The next endpoint UCX reported failed, or null.
  UcxEndpoint* PopFailed();
  bool has_failed() const { return !failed_.empty(); }

  // Takes a failed `ep` out of the cache into the retired list (Retire's first half).
  void Uncache(UcxEndpoint* ep);
  // Closes a failed, retired `ep` (Retire's second half); nothing if it is closing already. With
  // peer error handling the close is forced: UCX completes its outstanding requests, cancelled.
  void Close(UcxEndpoint* ep);
  // Deletes closed endpoints no operation lists. True if it deleted any.
  bool Reap();

  // The cached endpoints.
  std::vector<UcxEndpoint*> Cached() const;
  // Some retired endpoint is in kClosing: expected to close soon.
  bool AnyClosing() const;
  size_t num_retired() const { return retired_.size(); }

  // Teardown, before the worker goes: frees close requests, then destroys remote keys.
  void ReleaseCloseRequests();
  void DestroyRkeys();
  // Teardown, after the worker went: deletes every endpoint.
  void Clear();

 private:
  static void ErrorCb(void* arg, ucp_ep_h ep, ucs_status_t status);
  static void CloseCb(void* request, ucs_status_t status, void* user_data);

  const bool peer_error_handling_;
  ucp_worker_h worker_ = nullptr;
  bool warned_no_peer_errors_ = false;
  absl::flat_hash_map<std::string, std::unique_ptr<UcxEndpoint>> cached_;
  std::vector<std::unique_ptr<UcxEndpoint>> retired_;
  std::vector<UcxEndpoint*> failed_;  // reported by ErrorCb, not yet retired
};

}  // namespace tandem

#endif  // TANDEM_COMMON_TRANSPORT_UCX_ENDPOINT_CACHE_H_
