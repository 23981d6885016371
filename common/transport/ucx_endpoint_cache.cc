// Endpoint creation, remote keys, failure reports and closing (see ucx_endpoint_cache.h). Owns
// the endpoints; touches the worker only through ucp_ep_* calls. Progress thread only.
#include "common/transport/ucx_endpoint_cache.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace tandem {

namespace {

// A short printable id of a worker address, for messages.
std::string AddressTag(const std::string& address) {
  uint64_t h = 1469598103934665603ull;
  for (char c : address) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return absl::StrCat("ucx-peer-", absl::Hex(h & 0xffffffffull));
}

}  // namespace

absl::StatusOr<UcxEndpoint*> UcxEndpointCache::Get(const std::string& address) {
  auto it = cached_.find(address);
  if (it != cached_.end()) return it->second.get();
  if (address.empty()) return absl::InvalidArgumentError("empty ucx address");
  auto ep = std::make_unique<UcxEndpoint>();
  ep->cache = this;
  ep->address = address;
  ep->tag = AddressTag(address);
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(ep->address.data());
  params.err_mode = peer_error_handling_ ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
  params.err_handler.cb = &UcxEndpointCache::ErrorCb;
  params.err_handler.arg = ep.get();
  ucs_status_t s = ucp_ep_create(worker_, &params, &ep->ep);
  if (s == UCS_ERR_UNREACHABLE && params.err_mode == UCP_ERR_HANDLING_MODE_PEER) {
    // No transport to this peer detects peer failure (UCX 1.13's shared memory): go on
    // without, and rely on deadlines.
    params.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    s = ucp_ep_create(worker_, &params, &ep->ep);
    if (s == UCS_OK && !warned_no_peer_errors_) {
      warned_no_peer_errors_ = true;
      spdlog::warn(
          "ucx transport: no transport to {} detects peer failure; a dead peer is noticed "
          "only at each operation's deadline",
          ep->tag);
    }
  }
  if (s != UCS_OK) return UcsStatus(s, absl::StrCat("ucp_ep_create to ", ep->tag));
  ep->err_mode = params.err_mode;
  UcxEndpoint* raw = ep.get();
  cached_.emplace(address, std::move(ep));
  return raw;
}

absl::StatusOr<ucp_rkey_h> UcxEndpointCache::GetRkey(UcxEndpoint* ep, const std::string& key) {
  auto it = ep->rkeys.find(key);
  if (it != ep->rkeys.end()) return it->second.get();
  if (key.empty()) return absl::InvalidArgumentError("empty remote key");
  ucp_rkey_h rkey = nullptr;
  ucs_status_t s = ucp_ep_rkey_unpack(ep->ep, key.data(), &rkey);
  if (s != UCS_OK) return UcsStatus(s, absl::StrCat("ucp_ep_rkey_unpack for ", ep->tag));
  ep->rkeys.emplace(key, UcpRkey(rkey));
  return rkey;
}

void UcxEndpointCache::Fail(UcxEndpoint* ep, absl::Status error) {
  ep->state = UcxEndpointState::kFailed;
  ep->error = std::move(error);
}

UcxEndpoint* UcxEndpointCache::PopFailed() {
  if (failed_.empty()) return nullptr;
  UcxEndpoint* ep = failed_.back();
  failed_.pop_back();
  return ep;
}

void UcxEndpointCache::Uncache(UcxEndpoint* ep) {
  auto it = cached_.find(ep->address);
  if (it != cached_.end() && it->second.get() == ep) {
    retired_.push_back(std::move(it->second));
    cached_.erase(it);
  }
}

void UcxEndpointCache::Close(UcxEndpoint* ep) {
  if (ep->state != UcxEndpointState::kFailed) return;  // closing already
  const bool abandon = !ep->peer_errors() && ep->error.code() != absl::StatusCode::kCancelled;
  ep->state = abandon ? UcxEndpointState::kAbandoned : UcxEndpointState::kClosing;
  ucp_request_param_t p{};
  p.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = ep->peer_errors() ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  p.cb.send = &UcxEndpointCache::CloseCb;
  p.user_data = ep;
  ucs_status_ptr_t r = ucp_ep_close_nbx(ep->ep, &p);
  if (UCS_PTR_IS_ERR(r)) {
    spdlog::warn("ucx transport: closing the endpoint to {}: {}", ep->tag,
                 ucs_status_string(UCS_PTR_STATUS(r)));
  }
  if (r == nullptr || UCS_PTR_IS_ERR(r)) {
    ep->state = UcxEndpointState::kClosed;
  } else {
    ep->close_request.reset(r);
  }
}

bool UcxEndpointCache::Reap() {
  bool any = false;
  for (size_t i = 0; i < retired_.size();) {
    const UcxEndpoint& ep = *retired_[i];
    if (ep.state == UcxEndpointState::kClosed && ep.ops.empty()) {
      retired_.erase(retired_.begin() + i);  // destroys its remote keys
      any = true;
    } else {
      ++i;
    }
  }
  return any;
}

std::vector<UcxEndpoint*> UcxEndpointCache::Cached() const {
  std::vector<UcxEndpoint*> eps;
  for (const auto& [address, ep] : cached_) eps.push_back(ep.get());
  return eps;
}

bool UcxEndpointCache::AnyClosing() const {
  for (const auto& ep : retired_) {
    if (ep->state == UcxEndpointState::kClosing) return true;
  }
  return false;
}

void UcxEndpointCache::ReleaseCloseRequests() {
  for (auto& ep : retired_) ep->close_request.reset();
}

void UcxEndpointCache::DestroyRkeys() {
  for (auto& ep : retired_) ep->rkeys.clear();
  for (auto& [address, ep] : cached_) ep->rkeys.clear();
}

void UcxEndpointCache::Clear() {
  retired_.clear();
  cached_.clear();
  failed_.clear();
}

void UcxEndpointCache::ErrorCb(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* ep = static_cast<UcxEndpoint*>(arg);
  if (ep->failed()) return;
  Fail(ep, absl::UnavailableError(
               absl::StrCat("connection to ", ep->tag, " failed: ", ucs_status_string(status))));
  ep->cache->failed_.push_back(ep);
}

void UcxEndpointCache::CloseCb(void* request, ucs_status_t, void* user_data) {
  auto* ep = static_cast<UcxEndpoint*>(user_data);
  FreeCompleted(ep->close_request, request);
  ep->state = UcxEndpointState::kClosed;
}

}  // namespace tandem
