// The progress thread, its command queue and its pacing (see ucx_progress_loop.h). Owns the
// thread and the fds; touches the worker only to poll, arm and wait on it.
#include "common/transport/ucx_progress_loop.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/transport/ucx_handles.h"
#include "spdlog/spdlog.h"

namespace tandem {

UcxProgressLoop::~UcxProgressLoop() {
  Stop();
  if (cmd_fd_ >= 0) close(cmd_fd_);
}

absl::Status UcxProgressLoop::Start(Work* work) {
  work_ = work;
  absl::Notification ready;
  absl::Status init_status;
  thread_ = std::thread([this, &ready, &init_status] {
    absl::StatusOr<ucp_worker_h> worker = work_->Init();
    absl::Status s = worker.ok() ? OpenFds(*worker) : worker.status();
    const bool ok = s.ok();
    init_status = std::move(s);
    ready.Notify();  // `ready` and `init_status` are gone after this
    if (ok) Run();
    work_->Teardown();
  });
  ready.WaitForNotification();
  if (!init_status.ok()) {
    thread_.join();
    return init_status;
  }
  return absl::OkStatus();
}

void UcxProgressLoop::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stop_) return;
    stop_ = true;
  }
  Wake();
  if (thread_.joinable()) thread_.join();
}

void UcxProgressLoop::Post(UcxTask task) {
  bool accepted = false;
  bool wake = false;
  {
    absl::MutexLock lock(&mu_);
    if (!stop_) {
      queue_.push_back(std::move(task));
      accepted = true;
      wake = sleeping_;
    }
  }
  if (!accepted) {
    task(true);
    return;
  }
  if (wake) Wake();
}

absl::Status UcxProgressLoop::RunSync(absl::AnyInvocable<absl::Status()> fn) {
  absl::Notification done;
  absl::Status status;
  Post([&](bool cancelled) {
    status = cancelled ? UcxStoppedError() : fn();
    done.Notify();
  });
  done.WaitForNotification();
  return status;
}

bool UcxProgressLoop::RunQueued(bool cancelled) {
  std::deque<UcxTask> tasks;
  {
    absl::MutexLock lock(&mu_);
    tasks.swap(queue_);
  }
  for (UcxTask& t : tasks) t(cancelled);
  return !tasks.empty();
}

void UcxProgressLoop::RefuseTasks() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;  // Post() fails inline from now on
  }
  while (RunQueued(/*cancelled=*/true)) {
  }
  if (epoll_fd_ >= 0) close(epoll_fd_);
  epoll_fd_ = -1;
}

absl::Status UcxProgressLoop::OpenFds(ucp_worker_h worker) {
  worker_ = worker;
  cmd_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (cmd_fd_ < 0) return absl::InternalError(absl::StrCat("eventfd: ", std::strerror(errno)));
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) {
    return absl::InternalError(absl::StrCat("epoll_create1: ", std::strerror(errno)));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = cmd_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, cmd_fd_, &ev);
  ucs_status_t s = ucp_worker_get_efd(worker_, &ucx_fd_);
  if (s == UCS_OK) {
    ev.data.fd = ucx_fd_;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, ucx_fd_, &ev) != 0) ucx_fd_ = -1;
  } else {
    ucx_fd_ = -1;
  }
  if (ucx_fd_ < 0) {
    spdlog::warn("ucx transport: no worker event fd ({}); polling every millisecond",
                 ucs_status_string(s));
  }
  return absl::OkStatus();
}

void UcxProgressLoop::Run() {
  Clock* const real = Clock::Real();  // pacing: real time
  absl::Time last_busy = real->Now();
  while (true) {
    bool busy = RunQueued(/*cancelled=*/false);
    if (stopping()) break;
    for (int i = 0; i < 256 && ucp_worker_progress(worker_) != 0; ++i) busy = true;
    busy |= work_->AfterProgress();
    absl::Time now = real->Now();
    work_->CheckDeadlines(deadline_clock_->Now());
    busy |= work_->AfterProgress();
    if (busy) {
      last_busy = now;
      continue;
    }
    if (work_->InFlight() && now - last_busy < busy_poll_) continue;
    Sleep(deadline_clock_->Now());  // wakes by the first op's deadline
    last_busy = real->Now();
  }
}

bool UcxProgressLoop::stopping() const {
  absl::MutexLock lock(&mu_);
  return stop_;
}

void UcxProgressLoop::Sleep(absl::Time now) {
  {
    absl::MutexLock lock(&mu_);
    if (!queue_.empty() || stop_) return;
    sleeping_ = true;
  }
  bool armed = true;
  if (ucx_fd_ >= 0) armed = ucp_worker_arm(worker_) == UCS_OK;
  if (armed) {
    epoll_event events[4];
    epoll_wait(epoll_fd_, events, 4, SleepTimeoutMs(now));
    uint64_t value;
    while (read(cmd_fd_, &value, sizeof(value)) > 0) {
    }
  }
  absl::MutexLock lock(&mu_);
  sleeping_ = false;
}

int UcxProgressLoop::SleepTimeoutMs(absl::Time now) const {
  int timeout_ms = ucx_fd_ < 0 ? 1 : 100;
  std::optional<absl::Time> deadline = work_->EarliestDeadline();
  if (deadline && *deadline - now != absl::InfiniteDuration()) {
    const int64_t ms = absl::ToInt64Milliseconds(*deadline - now) + 1;
    timeout_ms = static_cast<int>(std::clamp<int64_t>(ms, 0, timeout_ms));
  }
  if (work_->EndpointsClosing()) timeout_ms = std::min(timeout_ms, 10);
  return timeout_ms;
}

void UcxProgressLoop::Wake() {
  if (cmd_fd_ < 0) return;
  const uint64_t one = 1;
  ssize_t n = write(cmd_fd_, &one, sizeof(one));
  (void)n;
}

}  // namespace tandem
