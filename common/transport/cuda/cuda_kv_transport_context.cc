// TransportContext and PublishedState (cuda_kv_transport_context.h): what the parts of
// CudaKvTransport share. Touches the inner transport only to send protocol messages.
#include "common/transport/cuda/cuda_kv_transport_context.h"

#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/transport/cuda/device_pool_descriptor.h"

namespace tandem::cuda_internal {

namespace {


}  // namespace

std::string PeerTag(const std::string& address) {
  uint64_t h = 1469598103934665603ull;
  for (char c : address) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return absl::StrCat("peer-", absl::Hex(h & 0xffffffffull));
}

void PublishedState::Publish(std::string descriptor, uint64_t pool_base) {
  absl::MutexLock lock(&mu_);
  descriptor_ = std::move(descriptor);
  pool_base_ = pool_base;
}

std::string PublishedState::descriptor() const {
  absl::MutexLock lock(&mu_);
  return descriptor_;
}

uint64_t PublishedState::pool_base() const {
  absl::MutexLock lock(&mu_);
  return pool_base_;
}

void PublishedState::SetNoticeHandler(NoticeHandler handler) {
  absl::MutexLock lock(&mu_);
  handler_ = std::move(handler);
}

NoticeHandler PublishedState::HandlerForNotice() {
  absl::MutexLock lock(&mu_);
  ++stats_.notices_delivered;
  return handler_;
}

void PublishedState::Count(const std::function<void(CudaKvTransportStats&)>& fn) {
  absl::MutexLock lock(&mu_);
  fn(stats_);
}

CudaKvTransportStats PublishedState::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

TransportContext::TransportContext(std::unique_ptr<KvTransport> inner_transport,
                                   std::unique_ptr<MemoryCopier> memory_copier,
                                   CudaKvTransportOptions opts)
    : options(std::move(opts)),
      inner(std::move(inner_transport)),
      copier(std::move(memory_copier)),
      writer_id(RandomIncarnation()),
      host_id(HostIdentity()),
      inner_incarnation(inner->incarnation()) {}

void TransportContext::SendMessage(const KvTarget& to, StagedMessage m, absl::Time deadline,
                                   TransferDone sent) {
  m.writer_id = writer_id;
  m.reply_address = inner_address;
  inner->Notify(to, EncodeStagedMessage(m), deadline, std::move(sent));
}

}  // namespace tandem::cuda_internal
