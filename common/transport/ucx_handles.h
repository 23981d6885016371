// UCX objects held by RAII, and UCX status codes as absl::Status, for the UCX transport's files.
//
// Owns nothing itself: each alias frees one UCX object with the call UCX names for it. Touches no
// transport state. Everything here is released on the progress thread (the one that makes every
// UCX call), and in UCX's order: requests and remote keys before their worker, memory handles and
// the worker before their context.
#ifndef TANDEM_COMMON_TRANSPORT_UCX_HANDLES_H_
#define TANDEM_COMMON_TRANSPORT_UCX_HANDLES_H_

#include <ucp/api/ucp.h>

#include <memory>
#include <string>
#include <type_traits>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"

namespace tandem {

// A deleter that frees with `kFree`, one of UCX's one-argument release calls.
template <auto kFree>
struct UcxFree {
  template <typename T>
  void operator()(T* object) const {
    kFree(object);
  }
};

using UcpConfig = std::unique_ptr<ucp_config_t, UcxFree<&ucp_config_release>>;
using UcpContext = std::unique_ptr<std::remove_pointer_t<ucp_context_h>, UcxFree<&ucp_cleanup>>;
using UcpWorker =
    std::unique_ptr<std::remove_pointer_t<ucp_worker_h>, UcxFree<&ucp_worker_destroy>>;

// A mapped memory region; unmapping needs the context it was mapped in.
struct UcpMemUnmap {
  ucp_context_h context = nullptr;
  void operator()(ucp_mem_h memh) const { ucp_mem_unmap(context, memh); }
};
using UcpMemory = std::unique_ptr<std::remove_pointer_t<ucp_mem_h>, UcpMemUnmap>;

// A packed remote key (ucp_rkey_pack's buffer), and an unpacked one (ucp_ep_rkey_unpack).
using UcpRkeyBuffer = std::unique_ptr<void, UcxFree<&ucp_rkey_buffer_release>>;
using UcpRkey = std::unique_ptr<std::remove_pointer_t<ucp_rkey_h>, UcxFree<&ucp_rkey_destroy>>;

// A request a ucp_*_nbx call returned. Freeing one UCX has not completed yet hands it back to UCX:
// the operation goes on, but its callback no longer runs.
using UcsRequest = std::unique_ptr<void, UcxFree<&ucp_request_free>>;
// Requests outstanding together, looked up by the raw pointer UCX's callbacks get.
using UcsRequestSet = absl::flat_hash_set<UcsRequest>;

// In a request's completion callback: frees `request`, and forgets it in `held` if it held it.
void FreeCompleted(UcsRequest& held, void* request);
void FreeCompleted(UcsRequestSet& held, void* request);

// `what` failed with `s`, as the nearest canonical code (OK for UCS_OK).
absl::Status UcsStatus(ucs_status_t s, const std::string& what);

// What queued and in-flight work fails with when the transport stops.
absl::Status UcxStoppedError();

}  // namespace tandem

#endif  // TANDEM_COMMON_TRANSPORT_UCX_HANDLES_H_
