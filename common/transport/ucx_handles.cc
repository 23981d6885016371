// UCX status codes as absl::Status, and freeing completed requests (see ucx_handles.h). Owns no
// state.
#include "common/transport/ucx_handles.h"

#include "absl/strings/str_cat.h"

namespace tandem {

void FreeCompleted(UcsRequest& held, void* request) {
  if (held.get() == request) {
    held.reset();
  } else {
    ucp_request_free(request);
  }
}

void FreeCompleted(UcsRequestSet& held, void* request) {
  if (held.erase(request) == 0) ucp_request_free(request);
}

absl::Status UcsStatus(ucs_status_t s, const std::string& what) {
  std::string msg = absl::StrCat(what, ": ", ucs_status_string(s));
  switch (s) {
    case UCS_OK:
      return absl::OkStatus();
    case UCS_ERR_CANCELED:
      return absl::CancelledError(msg);
    case UCS_ERR_TIMED_OUT:
    case UCS_ERR_ENDPOINT_TIMEOUT:
      return absl::DeadlineExceededError(msg);
    case UCS_ERR_INVALID_PARAM:
    case UCS_ERR_INVALID_ADDR:
      return absl::InvalidArgumentError(msg);
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_REJECTED:
    case UCS_ERR_IO_ERROR:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_UNSUPPORTED:
      return absl::UnavailableError(msg);
    case UCS_ERR_NO_MEMORY:
    case UCS_ERR_EXCEEDS_LIMIT:
      return absl::ResourceExhaustedError(msg);
    default:
      return absl::InternalError(msg);
  }
}

absl::Status UcxStoppedError() { return absl::CancelledError("ucx transport stopped"); }

}  // namespace tandem
