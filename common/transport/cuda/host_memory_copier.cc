#include "common/transport/cuda/host_memory_copier.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace tandem {

namespace {

// SharedHostPools of this process, by first byte: what Export() can name.
struct SharedPoolRegistry {
  absl::Mutex mu;
  std::map<void*, std::pair<int, size_t>> pools ABSL_GUARDED_BY(mu);  // base -> (fd, bytes)
};

SharedPoolRegistry& Registry() {
  static auto* registry = new SharedPoolRegistry();
  return *registry;
}

absl::Status ErrnoStatus(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

constexpr std::string_view kHandlePrefix = "memfd:";

}  // namespace

absl::StatusOr<std::unique_ptr<SharedHostPool>> SharedHostPool::Create(size_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("empty shared host pool");
  const int fd = memfd_create("tandem-kv-pool", MFD_CLOEXEC);
  if (fd < 0) return ErrnoStatus("memfd_create");
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    absl::Status s = ErrnoStatus("ftruncate");
    close(fd);
    return s;
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    absl::Status s = ErrnoStatus("mmap");
    close(fd);
    return s;
  }
  {
    SharedPoolRegistry& r = Registry();
    absl::MutexLock lock(&r.mu);
    r.pools[p] = {fd, bytes};
  }
  return std::unique_ptr<SharedHostPool>(new SharedHostPool(static_cast<char*>(p), bytes, fd));
}

SharedHostPool::~SharedHostPool() {
  {
    SharedPoolRegistry& r = Registry();
    absl::MutexLock lock(&r.mu);
    r.pools.erase(data_);
  }
  munmap(data_, bytes_);
  close(fd_);
}

HostMemoryCopier::HostMemoryCopier(HostMemoryCopierOptions options) : options_(options) {}

HostMemoryCopier::~HostMemoryCopier() {
  for (auto& [p, bytes] : imported_) munmap(p, bytes);
  for (auto& [p, bytes] : host_buffers_) std::free(p);
}

absl::Status HostMemoryCopier::CheckPool(void* base, size_t bytes, int) {
  if (base == nullptr || bytes == 0) return absl::InvalidArgumentError("empty pool");
  return absl::OkStatus();
}

absl::Status HostMemoryCopier::Copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  if (dst == nullptr || src == nullptr)
    return absl::InvalidArgumentError("copy with a null pointer");
  pending_.push_back({dst, src, bytes});
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> HostMemoryCopier::Fence() {
  const uint64_t id = next_fence_++;
  fences_[id] = {options_.clock->Now() + options_.copy_latency, pending_.size()};
  return id;
}

void HostMemoryCopier::RunUpTo(uint64_t fence) {
  auto it = fences_.find(fence);
  if (it == fences_.end()) return;
  const size_t end = it->second.copies_end;
  for (size_t i = 0; i < end; ++i) std::memcpy(pending_[i].dst, pending_[i].src, pending_[i].bytes);
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<ptrdiff_t>(end));
  // Earlier fences are done too (a stream runs in order); later ones shift down.
  for (auto f = fences_.begin(); f != fences_.end();) {
    if (f->first <= fence) {
      f = fences_.erase(f);
    } else {
      f->second.copies_end -= end;
      ++f;
    }
  }
}

absl::StatusOr<bool> HostMemoryCopier::Poll(uint64_t fence) {
  auto it = fences_.find(fence);
  if (it == fences_.end()) return true;  // ran with a later fence
  if (options_.clock->Now() < it->second.due) return false;
  absl::Status injected;
  {
    absl::MutexLock lock(&error_mu_);
    injected = injected_error_;
  }
  if (!injected.ok()) {
    // The copies of a failed fence do not run.
    const size_t end = it->second.copies_end;
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<ptrdiff_t>(end));
    for (auto f = fences_.begin(); f != fences_.end();) {
      if (f->first <= fence) {
        f = fences_.erase(f);
      } else {
        f->second.copies_end -= end;
        ++f;
      }
    }
    return injected;
  }
  RunUpTo(fence);
  return true;
}

void HostMemoryCopier::Drain() {
  if (!fences_.empty()) RunUpTo(fences_.rbegin()->first);
  for (const PendingCopy& c : pending_) std::memcpy(c.dst, c.src, c.bytes);
  pending_.clear();
}

absl::StatusOr<void*> HostMemoryCopier::AllocateHost(size_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("empty host buffer");
  const size_t rounded = (bytes + 4095) / 4096 * 4096;
  void* p = std::aligned_alloc(4096, rounded);
  if (p == nullptr) return absl::ResourceExhaustedError("out of host memory");
  std::memset(p, 0, rounded);
  host_buffers_[p] = rounded;
  return p;
}

void HostMemoryCopier::FreeHost(void* p) {
  auto it = host_buffers_.find(p);
  if (it == host_buffers_.end()) return;
  std::free(it->first);
  host_buffers_.erase(it);
}

absl::StatusOr<std::string> HostMemoryCopier::Export(void* base, size_t bytes) {
  SharedPoolRegistry& r = Registry();
  absl::MutexLock lock(&r.mu);
  auto it = r.pools.find(base);
  if (it == r.pools.end() || it->second.second < bytes) {
    return absl::UnimplementedError("this host pool is not a SharedHostPool: it cannot be shared");
  }
  return absl::StrCat(std::string(kHandlePrefix), getpid(), ":", it->second.first);
}

absl::StatusOr<void*> HostMemoryCopier::Import(std::string_view handle, size_t bytes) {
  const std::string h(handle);
  int pid = 0, fd = 0, used = 0;
  if (h.compare(0, kHandlePrefix.size(), kHandlePrefix) != 0 ||
      std::sscanf(h.c_str() + kHandlePrefix.size(), "%d:%d%n", &pid, &fd, &used) != 2 ||
      kHandlePrefix.size() + used != h.size()) {
    return absl::InvalidArgumentError("not a host pool handle");
  }
  const std::string path = absl::StrCat("/proc/", pid, "/fd/", fd);
  const int local = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (local < 0)
    return absl::UnavailableError(absl::StrCat("open ", path, ": ", std::strerror(errno)));
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, local, 0);
  close(local);
  if (p == MAP_FAILED) return ErrnoStatus(absl::StrCat("mmap ", path));
  imported_[p] = bytes;
  return p;
}

void HostMemoryCopier::Close(void* imported) {
  auto it = imported_.find(imported);
  if (it == imported_.end()) return;
  munmap(it->first, it->second);
  imported_.erase(it);
}

void HostMemoryCopier::InjectCopyError(absl::Status status) {
  absl::MutexLock lock(&error_mu_);
  injected_error_ = std::move(status);
}

}  // namespace tandem
