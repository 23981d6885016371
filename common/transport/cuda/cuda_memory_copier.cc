#include "common/transport/cuda/cuda_memory_copier.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/transport/cuda/byte_codec.h"
#include "spdlog/spdlog.h"

namespace tandem {

namespace {

absl::Status CudaError(cudaError_t error, std::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  std::string message = absl::StrCat(std::string(what), ": CUDA error ", cudaGetErrorName(error),
                                     " (", cudaGetErrorString(error), ")");
  if (error == cudaErrorNoDevice || error == cudaErrorInsufficientDriver) {
    return absl::UnavailableError(message);
  }
  if (error == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

// Makes `device` current for the guard's lifetime and restores the caller's device after.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device) cudaSetDevice(device);
    device_ = device;
  }
  ~DeviceGuard() {
    if (previous_ >= 0 && previous_ != device_) cudaSetDevice(previous_);
  }

 private:
  int previous_ = -1;
  int device_ = -1;
};

constexpr std::string_view kHandlePrefix = "cudaipc:";

using GetAddressRangeFn = CUresult (*)(CUdeviceptr* base, size_t* size, CUdeviceptr ptr);

// cuMemGetAddressRange without linking libcuda (the runtime finds it in the loaded driver).
GetAddressRangeFn AddressRangeFunction() {
  static GetAddressRangeFn fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult result{};
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &p, 12000, cudaEnableDefault,
                                         &result) != cudaSuccess ||
        result != cudaDriverEntryPointSuccess) {
      return static_cast<GetAddressRangeFn>(nullptr);
    }
    return reinterpret_cast<GetAddressRangeFn>(p);
  }();
  return fn;
}

}  // namespace

struct CudaMemoryCopier::State {
  cudaStream_t stream = nullptr;
  std::map<uint64_t, cudaEvent_t> fences;
  std::vector<cudaEvent_t> spare_events;
  uint64_t next_fence = 1;
  std::map<void*, size_t> host_buffers;
  std::map<void*, void*> imported;  // pointer handed out -> the opened allocation's base
};

absl::StatusOr<std::unique_ptr<CudaMemoryCopier>> CudaMemoryCopier::Create(int device) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) return CudaError(e, "cudaGetDeviceCount");
  if (device < 0 || device >= count) {
    return absl::InvalidArgumentError(
        absl::StrCat("CUDA device ", device, " does not exist (", count, " devices)"));
  }
  DeviceGuard guard(device);
  cudaDeviceProp prop{};
  e = cudaGetDeviceProperties(&prop, device);
  if (e != cudaSuccess) return CudaError(e, "cudaGetDeviceProperties");
  auto state = std::make_unique<State>();
  e = cudaStreamCreateWithFlags(&state->stream, cudaStreamNonBlocking);
  if (e != cudaSuccess) return CudaError(e, "cudaStreamCreateWithFlags");
  std::string uuid(reinterpret_cast<const char*>(prop.uuid.bytes), sizeof(prop.uuid.bytes));
  return std::unique_ptr<CudaMemoryCopier>(
      new CudaMemoryCopier(device, std::move(uuid), std::move(state)));
}

CudaMemoryCopier::CudaMemoryCopier(int device, std::string uuid, std::unique_ptr<State> state)
    : device_(device), uuid_(std::move(uuid)), state_(std::move(state)) {}

CudaMemoryCopier::~CudaMemoryCopier() {
  DeviceGuard guard(device_);
  cudaStreamSynchronize(state_->stream);
  for (auto& [id, event] : state_->fences) cudaEventDestroy(event);
  for (cudaEvent_t event : state_->spare_events) cudaEventDestroy(event);
  for (auto& [p, base] : state_->imported) cudaIpcCloseMemHandle(base);
  for (auto& [p, bytes] : state_->host_buffers) cudaFreeHost(p);
  cudaStreamDestroy(state_->stream);
}

absl::Status CudaMemoryCopier::CheckPool(void* base, size_t bytes, int cuda_device) {
  if (base == nullptr || bytes == 0) return absl::InvalidArgumentError("empty device pool");
  if (cuda_device != device_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pool on CUDA device ", cuda_device, ", the transport's copier uses device ", device_));
  }
  DeviceGuard guard(device_);
  cudaPointerAttributes attr{};
  cudaError_t e = cudaPointerGetAttributes(&attr, base);
  if (e != cudaSuccess) return CudaError(e, "cudaPointerGetAttributes of the pool");
  if (attr.type != cudaMemoryTypeDevice || attr.device != device_) {
    return absl::InvalidArgumentError(
        absl::StrCat("the pool is not device memory of CUDA device ", device_, " (memory type ",
                     static_cast<int>(attr.type), ", device ", attr.device, ")"));
  }
  return absl::OkStatus();
}

absl::Status CudaMemoryCopier::Copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  DeviceGuard guard(device_);
  return CudaError(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, state_->stream),
                   "cudaMemcpyAsync");
}

absl::StatusOr<uint64_t> CudaMemoryCopier::Fence() {
  DeviceGuard guard(device_);
  cudaEvent_t event = nullptr;
  if (!state_->spare_events.empty()) {
    event = state_->spare_events.back();
    state_->spare_events.pop_back();
  } else {
    cudaError_t e = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
    if (e != cudaSuccess) return CudaError(e, "cudaEventCreateWithFlags");
  }
  cudaError_t e = cudaEventRecord(event, state_->stream);
  if (e != cudaSuccess) {
    state_->spare_events.push_back(event);
    return CudaError(e, "cudaEventRecord");
  }
  const uint64_t id = state_->next_fence++;
  state_->fences[id] = event;
  return id;
}

absl::StatusOr<bool> CudaMemoryCopier::Poll(uint64_t fence) {
  auto it = state_->fences.find(fence);
  if (it == state_->fences.end()) {
    return absl::InvalidArgumentError(absl::StrCat("unknown copy fence ", fence));
  }
  DeviceGuard guard(device_);
  const cudaError_t e = cudaEventQuery(it->second);
  if (e == cudaErrorNotReady) return false;
  state_->spare_events.push_back(it->second);
  state_->fences.erase(it);
  if (e != cudaSuccess) return CudaError(e, "a device copy");
  return true;
}

void CudaMemoryCopier::Drain() {
  DeviceGuard guard(device_);
  const cudaError_t e = cudaStreamSynchronize(state_->stream);
  if (e != cudaSuccess) spdlog::error("cuda copier: {}", CudaError(e, "drain").ToString());
}

absl::StatusOr<void*> CudaMemoryCopier::AllocateHost(size_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("empty host buffer");
  DeviceGuard guard(device_);
  void* p = nullptr;
  cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
  if (e != cudaSuccess) return CudaError(e, "cudaHostAlloc");
  std::memset(p, 0, bytes);
  state_->host_buffers[p] = bytes;
  return p;
}

void CudaMemoryCopier::FreeHost(void* p) {
  auto it = state_->host_buffers.find(p);
  if (it == state_->host_buffers.end()) return;
  DeviceGuard guard(device_);
  cudaFreeHost(p);
  state_->host_buffers.erase(it);
}

absl::StatusOr<std::string> CudaMemoryCopier::Export(void* base, size_t bytes) {
  GetAddressRangeFn range = AddressRangeFunction();
  if (range == nullptr) {
    return absl::UnimplementedError("the CUDA driver has no cuMemGetAddressRange");
  }
  DeviceGuard guard(device_);
  CUdeviceptr alloc_base = 0;
  size_t alloc_bytes = 0;
  if (range(&alloc_base, &alloc_bytes, reinterpret_cast<CUdeviceptr>(base)) != CUDA_SUCCESS) {
    return absl::InternalError("cuMemGetAddressRange of the pool failed");
  }
  const uint64_t offset = reinterpret_cast<uintptr_t>(base) - alloc_base;
  if (offset + bytes > alloc_bytes) {
    return absl::InvalidArgumentError("the pool spans more than one CUDA allocation");
  }
  cudaIpcMemHandle_t handle;
  cudaError_t e = cudaIpcGetMemHandle(&handle, reinterpret_cast<void*>(alloc_base));
  if (e != cudaSuccess) {
    // Memory from cudaMallocAsync pools or VMM cannot be exported this way.
    return absl::UnimplementedError(CudaError(e, "cudaIpcGetMemHandle").message());
  }
  std::string out(kHandlePrefix);
  out.append(reinterpret_cast<const char*>(&handle), sizeof(handle));
  transport_wire::ByteWriter w(&out);
  w.U64(offset);
  return out;
}

absl::StatusOr<void*> CudaMemoryCopier::Import(std::string_view handle, size_t bytes) {
  if (handle.size() != kHandlePrefix.size() + sizeof(cudaIpcMemHandle_t) + 8 ||
      handle.substr(0, kHandlePrefix.size()) != kHandlePrefix) {
    return absl::InvalidArgumentError("not a CUDA IPC pool handle");
  }
  cudaIpcMemHandle_t h;
  std::memcpy(&h, handle.data() + kHandlePrefix.size(), sizeof(h));
  transport_wire::ByteReader r(handle.substr(kHandlePrefix.size() + sizeof(h)));
  uint64_t offset = 0;
  r.U64(&offset);
  DeviceGuard guard(device_);
  void* base = nullptr;
  cudaError_t e = cudaIpcOpenMemHandle(&base, h, cudaIpcMemLazyEnablePeerAccess);
  if (e != cudaSuccess) {
    cudaGetLastError();  // not sticky; clear it
    return absl::UnavailableError(CudaError(e, "cudaIpcOpenMemHandle").message());
  }
  void* p = static_cast<char*>(base) + offset;
  state_->imported[p] = base;
  return p;
}

void CudaMemoryCopier::Close(void* imported) {
  auto it = state_->imported.find(imported);
  if (it == state_->imported.end()) return;
  DeviceGuard guard(device_);
  // Copies into it must have ended first.
  cudaStreamSynchronize(state_->stream);
  cudaIpcCloseMemHandle(it->second);
  state_->imported.erase(it);
}

}  // namespace tandem
