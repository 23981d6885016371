// CudaKvTransport's handles on MemoryCopier memory: pinned host buffers (AllocateHost/FreeHost)
// and peer pools mapped from another process (Import/Close), each released exactly once by its
// owner's destructor or Reset(). Owns nothing else; touches only the copier it was given, which
// must outlive the handle. Not thread-safe, like the copier (the transport's thread only).
#ifndef TANDEM_COMMON_TRANSPORT_CUDA_CUDA_KV_TRANSPORT_HANDLES_H_
#define TANDEM_COMMON_TRANSPORT_CUDA_CUDA_KV_TRANSPORT_HANDLES_H_

#include <utility>

#include "common/transport/cuda/memory_copier.h"

namespace tandem::cuda_internal {

// Memory a MemoryCopier handed out, given back with `kRelease` (FreeHost or Close). Move-only;
// empty when default-constructed, moved from or reset.
template <void (MemoryCopier::*kRelease)(void*)>
class CopierMemory {
 public:
  CopierMemory() = default;
  // Takes `p` (from `copier`); null makes an empty handle.
  CopierMemory(MemoryCopier* copier, void* p) : copier_(copier), p_(static_cast<char*>(p)) {}
  ~CopierMemory() { Reset(); }

  CopierMemory(CopierMemory&& other) noexcept
      : copier_(other.copier_), p_(std::exchange(other.p_, nullptr)) {}
  CopierMemory& operator=(CopierMemory&& other) noexcept {
    if (this != &other) {
      Reset();
      copier_ = other.copier_;
      p_ = std::exchange(other.p_, nullptr);
    }
    return *this;
  }
  CopierMemory(const CopierMemory&) = delete;
  CopierMemory& operator=(const CopierMemory&) = delete;

  char* get() const { return p_; }
  explicit operator bool() const { return p_ != nullptr; }

  // Gives the memory back now (no-op when empty).
  void Reset() {
    if (p_ != nullptr) (copier_->*kRelease)(p_);
    p_ = nullptr;
  }

 private:
  MemoryCopier* copier_ = nullptr;
  char* p_ = nullptr;
};

// Host memory from AllocateHost (the staging buffers and landing slots).
using HostBuffer = CopierMemory<&MemoryCopier::FreeHost>;
// A same-host owner's pool mapped here with Import (the direct path).
using ImportedPool = CopierMemory<&MemoryCopier::Close>;

}  // namespace tandem::cuda_internal

#endif  // TANDEM_COMMON_TRANSPORT_CUDA_CUDA_KV_TRANSPORT_HANDLES_H_
