// Receiving notices (eager or rendezvous) and delivering them (see ucx_notice_receiver.h). Owns
// the receives and the payloads; touches the worker only through the active-message calls.
#include "common/transport/ucx_notice_receiver.h"

#include <utility>

#include "spdlog/spdlog.h"

namespace tandem {

absl::Status UcxNoticeReceiver::Register(ucp_worker_h worker) {
  worker_ = worker;
  ucp_am_handler_param_t am{};
  am.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                  UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
  am.id = kUcxNoticeAmId;
  am.flags = UCP_AM_FLAG_WHOLE_MSG;
  am.cb = &UcxNoticeReceiver::AmRecvCb;
  am.arg = this;
  ucs_status_t s = ucp_worker_set_am_recv_handler(worker, &am);
  if (s != UCS_OK) return UcsStatus(s, "ucp_worker_set_am_recv_handler");
  return absl::OkStatus();
}

void UcxNoticeReceiver::SetHandler(NoticeHandler handler) {
  absl::MutexLock lock(&mu_);
  handler_ = std::move(handler);
}

void UcxNoticeReceiver::Deliver() {
  std::vector<std::string> deliveries;
  deliveries.swap(deliveries_);
  NoticeHandler handler;
  {
    absl::MutexLock lock(&mu_);
    handler = handler_;
  }
  for (const std::string& payload : deliveries) {
    if (handler) {
      handler(payload);
    } else {
      spdlog::warn("ucx transport: notice of {} bytes dropped: no handler", payload.size());
    }
  }
}

void UcxNoticeReceiver::ReleaseRequests() {
  for (const auto& pending : pending_) pending->request.reset();
}

ucs_status_t UcxNoticeReceiver::AmRecvCb(void* arg, const void*, size_t, void* data, size_t length,
                                         const ucp_am_recv_param_t* param) {
  auto* self = static_cast<UcxNoticeReceiver*>(arg);
  if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) == 0) {
    self->deliveries_.emplace_back(static_cast<const char*>(data), length);
    return UCS_OK;
  }
  auto pending = std::make_unique<Pending>();
  pending->self = self;
  pending->data.assign(length, '\0');
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.recv_am = &UcxNoticeReceiver::AmDataCb;
  p.user_data = pending.get();
  ucs_status_ptr_t r = ucp_am_recv_data_nbx(self->worker_, data, pending->data.data(), length, &p);
  if (r == nullptr) {
    self->deliveries_.push_back(std::move(pending->data));
  } else if (UCS_PTR_IS_ERR(r)) {
    spdlog::error("ucx transport: receiving a {}-byte notice failed: {}", length,
                  ucs_status_string(UCS_PTR_STATUS(r)));
  } else {
    pending->request.reset(r);
    self->pending_.insert(std::move(pending));
  }
  return UCS_OK;
}

void UcxNoticeReceiver::AmDataCb(void* request, ucs_status_t status, size_t length,
                                 void* user_data) {
  auto* raw = static_cast<Pending*>(user_data);
  UcxNoticeReceiver* self = raw->self;
  auto node = self->pending_.extract(raw);
  std::unique_ptr<Pending> pending = std::move(node.value());
  FreeCompleted(pending->request, request);
  if (status == UCS_OK) {
    pending->data.resize(length);
    self->deliveries_.push_back(std::move(pending->data));
  } else {
    spdlog::error("ucx transport: receiving a notice failed: {}", ucs_status_string(status));
  }
}

}  // namespace tandem
