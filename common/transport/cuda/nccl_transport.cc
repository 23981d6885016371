#include "common/transport/cuda/nccl_transport.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <mutex>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/transport/cuda/nccl_api.h"
#include "common/transport/cuda/nccl_comm.h"
#include "common/transport/cuda/nccl_frame.h"
#include "common/transport/cuda/nccl_local_pool.h"
#include "common/transport/cuda/nccl_owner.h"
#include "common/transport/cuda/nccl_writer.h"
#include "spdlog/spdlog.h"

namespace tandem {

namespace {

using nccl_internal::CudaError;
using nccl_internal::NcclLocalPool;
using nccl_internal::NcclOwner;
using nccl_internal::NcclWriter;

}  // namespace

// The transport's own state (options, incarnation, the registered pool) and its two sides: the
// writer (nccl_writer.h) and the owner (nccl_owner.h), made once NCCL is loaded.
class NcclKvTransport::Impl {
 public:
  explicit Impl(NcclKvTransportOptions options)
      : options_(std::move(options)), incarnation_(RandomIncarnation()) {}

  ~Impl() { Shutdown(); }

  // Checks the options and the device, loads NCCL (Unavailable, naming where it looked, when it
  // cannot), and starts the writer's loop.
  absl::Status Start() {
    if (options_.frame_bytes < kNcclMinFrameBytes || options_.frames_in_flight <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("nccl transport: frame_bytes must be at least ", kNcclMinFrameBytes,
                       " and frames_in_flight positive"));
    }
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) return CudaError(e, "cudaGetDeviceCount");
    if (options_.cuda_device < 0 || options_.cuda_device >= count) {
      return absl::InvalidArgumentError(absl::StrCat("CUDA device ", options_.cuda_device,
                                                     " does not exist (", count, " devices)"));
    }
    absl::StatusOr<const NcclApi*> nccl = LoadNccl();
    if (!nccl.ok()) {
      return absl::Status(nccl.status().code(),
                          absl::StrCat("nccl transport: ", nccl.status().message()));
    }
    static std::once_flag logged;
    std::call_once(logged, [&nccl] {
      spdlog::info("nccl transport: NCCL {} from {} (built against NCCL {} headers)",
                   NcclVersionString((*nccl)->version), (*nccl)->path,
                   NcclVersionString(NCCL_VERSION_CODE));
    });
    writer_ = std::make_unique<NcclWriter>(**nccl, options_, incarnation_, pool_);
    owner_ = std::make_unique<NcclOwner>(**nccl, options_, pool_);
    writer_->Start();
    return absl::OkStatus();
  }

  // The writer first (its loop, connections and connectors), then the owner's receivers.
  void Shutdown() {
    if (writer_ != nullptr) writer_->Shutdown();
    if (owner_ != nullptr) owner_->Shutdown();
  }

  absl::Status RegisterDevicePool(void* base, size_t bytes, int cuda_device) {
    if (base == nullptr || bytes == 0) return absl::InvalidArgumentError("empty device pool");
    if (cuda_device != options_.cuda_device) {
      return absl::InvalidArgumentError(absl::StrCat("pool on CUDA device ", cuda_device,
                                                     ", the nccl transport uses device ",
                                                     options_.cuda_device));
    }
    cudaPointerAttributes attr{};
    cudaError_t e = cudaPointerGetAttributes(&attr, base);
    if (e != cudaSuccess) return CudaError(e, "cudaPointerGetAttributes of the pool");
    if (attr.type != cudaMemoryTypeDevice || attr.device != cuda_device) {
      return absl::InvalidArgumentError(
          absl::StrCat("the pool is not device memory of CUDA device ", cuda_device));
    }
    return pool_.Set(static_cast<char*>(base), bytes);
  }

  std::string address() const { return options_.address; }
  uint64_t incarnation() const { return incarnation_; }
  std::string pool_remote_key() const {
    const NcclLocalPool::View pool = pool_.Get();
    if (pool.base == nullptr) return "";
    return EncodeNcclPoolKey({pool.bytes, incarnation_});
  }
  uint64_t pool_base() const { return reinterpret_cast<uintptr_t>(pool_.Get().base); }

  // Made by Start (Create returns no transport without them).
  NcclWriter& writer() { return *writer_; }
  NcclOwner& owner() { return *owner_; }
  const NcclOwner& owner() const { return *owner_; }

 private:
  const NcclKvTransportOptions options_;
  const uint64_t incarnation_;
  NcclLocalPool pool_;  // outlives the writer and the owner, which read it
  std::unique_ptr<NcclWriter> writer_;
  std::unique_ptr<NcclOwner> owner_;
};

absl::StatusOr<std::unique_ptr<NcclKvTransport>> NcclKvTransport::Create(
    NcclKvTransportOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  absl::Status s = impl->Start();
  if (!s.ok()) return s;
  return std::unique_ptr<NcclKvTransport>(new NcclKvTransport(std::move(impl)));
}

NcclKvTransport::NcclKvTransport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
NcclKvTransport::~NcclKvTransport() { impl_->Shutdown(); }

absl::Status NcclKvTransport::RegisterPool(void*, size_t) {
  return absl::UnimplementedError(
      "the nccl KV transport moves device pools: call "
      "RegisterDevicePool");
}
absl::Status NcclKvTransport::RegisterDevicePool(void* base, size_t bytes, int cuda_device) {
  return impl_->RegisterDevicePool(base, bytes, cuda_device);
}
std::string NcclKvTransport::address() const { return impl_->address(); }
std::string NcclKvTransport::pool_remote_key() const { return impl_->pool_remote_key(); }
uint64_t NcclKvTransport::pool_base() const { return impl_->pool_base(); }
uint64_t NcclKvTransport::incarnation() const { return impl_->incarnation(); }
void NcclKvTransport::SetNoticeHandler(NoticeHandler handler) {
  impl_->owner().SetNoticeHandler(std::move(handler));
}
void NcclKvTransport::Write(const KvTarget& target, std::vector<KvCopy> copies, absl::Time deadline,
                            TransferDone done) {
  impl_->writer().Write(target, std::move(copies), deadline, std::move(done));
}
void NcclKvTransport::Notify(const KvTarget& target, std::string payload, absl::Time deadline,
                             TransferDone done) {
  impl_->writer().Notify(target, std::move(payload), deadline, std::move(done));
}
absl::Status NcclKvTransport::AcceptConnection(std::string_view nccl_unique_id,
                                               uint64_t writer_incarnation) {
  return impl_->owner().AcceptConnection(nccl_unique_id, writer_incarnation);
}
int NcclKvTransport::num_connections() const { return impl_->owner().num_connections(); }

}  // namespace tandem
