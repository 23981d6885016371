#include "common/handoff/kv_block_writer.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tandem {
namespace {

std::string Notice(const KvWriteTarget& target, uint64_t local_incarnation,
                   const HandoffAuthenticator* auth, const absl::Status& status,
                   const GenerationEvent* first_token, uint64_t rng_counter,
                   std::span<const uint64_t> block_checksums = {},
                   std::optional<uint64_t> epoch = std::nullopt) {
  tandem::v1::KvCompletion completion = MakeKvCompletion(target, local_incarnation, status,
                                                         first_token, rng_counter, block_checksums);
  if (epoch.has_value()) completion.set_epoch(*epoch);
  if (auth != nullptr) auth->Sign(&completion);
  return completion.SerializeAsString();
}

}  // namespace

absl::StatusOr<std::shared_ptr<KvBlockWriter>> KvBlockWriter::Create(KvBlockWriterOptions options) {
  if (options.transport == nullptr)
    return absl::InvalidArgumentError("KvBlockWriter: no transport");
  if (!options.release_blocks || !options.on_finished) {
    return absl::InvalidArgumentError("KvBlockWriter: release_blocks and on_finished are required");
  }
  absl::Status s = CheckLayoutsCompatible(options.local_layout, options.target.layout);
  if (!s.ok()) return s;
  s = ValidateKvWriteTarget(options.target);
  if (!s.ok()) return s;
  std::optional<KvBlockHasher> hasher;
  uint64_t epoch = options.target.epoch;
  if (TakeTestStaleKvEpoch()) --epoch;
  if (!options.target.checksum_key.empty()) {
    if (options.transport->host_pool().empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the handoff asks for KV checksums, but this node's ",
          std::string(options.transport->name()), " transport has no pool readable on the host"));
    }
    absl::StatusOr<KvBlockHasher> made = KvBlockHasher::Create(options.target.checksum_key, epoch);
    if (!made.ok()) return made.status();
    hasher = *made;
  }
  return std::shared_ptr<KvBlockWriter>(new KvBlockWriter(std::move(options), hasher, epoch));
}

KvBlockWriter::KvBlockWriter(KvBlockWriterOptions options, std::optional<KvBlockHasher> hasher,
                             uint64_t notice_epoch)
    : options_(std::move(options)), hasher_(std::move(hasher)), notice_epoch_(notice_epoch) {}

void KvBlockWriter::NotifyFailure(KvTransport* transport, const KvWriteTarget& target,
                                  uint64_t local_incarnation, const HandoffAuthenticator* auth,
                                  const absl::Status& status, absl::Time deadline,
                                  TransferDone done) {
  absl::Status error = status.ok() ? absl::CancelledError("prefill refused") : status;
  std::string notice = Notice(target, local_incarnation, auth, error, nullptr, 0);
  transport->Notify(target.target, std::move(notice), deadline, std::move(done));
}

absl::StatusOr<std::vector<KvCopy>> KvBlockWriter::PlanCopies(const KvLayout& local,
                                                              const KvWriteTarget& target,
                                                              int32_t first_index,
                                                              std::span<const int32_t> blocks,
                                                              int32_t* num_skipped) {
  const int32_t skip = target.num_cached_tokens / target.layout.block_size;
  struct Run {
    int32_t local = 0;
    int32_t remote = 0;
    int32_t length = 0;
  };
  std::vector<Run> runs;
  int32_t skipped = 0;
  for (size_t j = 0; j < blocks.size(); ++j) {
    const int64_t i = int64_t{first_index} + static_cast<int64_t>(j);
    if (i < skip) {
      ++skipped;
      continue;
    }
    if (i >= static_cast<int64_t>(target.block_ids.size())) {
      return absl::OutOfRangeError(absl::StrCat("prompt block ", i,
                                                " has no remote block: the "
                                                "decode node reserved ",
                                                target.block_ids.size()));
    }
    const int32_t lb = blocks[j];
    const int32_t rb = target.block_ids[i];
    if (lb < 0 || lb >= local.num_blocks) {
      return absl::InternalError(
          absl::StrCat("local block ", lb, " is outside the ", local.num_blocks, "-block pool"));
    }
    if (!runs.empty() && runs.back().local + runs.back().length == lb &&
        runs.back().remote + runs.back().length == rb) {
      ++runs.back().length;
    } else {
      runs.push_back(Run{lb, rb, 1});
    }
  }
  if (num_skipped != nullptr) *num_skipped = skipped;
  std::vector<KvCopy> copies;
  copies.reserve(runs.size() * 2 * static_cast<size_t>(local.num_layers));
  const uint64_t elem = DTypeSize(local.dtype);
  const uint64_t block_bytes = static_cast<uint64_t>(local.block_stride()) * elem;
  for (int layer = 0; layer < local.num_layers; ++layer) {
    for (int kv = 0; kv < 2; ++kv) {
      for (const Run& r : runs) {
        KvCopy c;
        c.src_offset = static_cast<uint64_t>(local.Offset(layer, kv, r.local, 0, 0)) * elem;
        c.dst_offset =
            static_cast<uint64_t>(target.layout.Offset(layer, kv, r.remote, 0, 0)) * elem;
        c.bytes = block_bytes * static_cast<uint64_t>(r.length);
        copies.push_back(c);
      }
    }
  }
  return copies;
}

void KvBlockWriter::OnBlocksReady(RequestId id, int32_t first_index,
                                  std::span<const int32_t> blocks) {
  std::vector<KvCopy> copies;
  int64_t bytes = 0;
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    engine_id_ = id;
    if (!error_.ok() || engine_done_) return;
    if (options_.clock->Now() >= options_.deadline) {
      Fail(absl::DeadlineExceededError("KV transfer deadline passed while prefilling"));
      actions = Progress();
    } else {
      int32_t skipped = 0;
      absl::StatusOr<std::vector<KvCopy>> planned =
          PlanCopies(options_.local_layout, options_.target, first_index, blocks, &skipped);
      if (!planned.ok()) {
        Fail(planned.status());
        actions = Progress();
      } else {
        copies = std::move(planned).value();
        result_.num_blocks_skipped += skipped;
        result_.num_blocks_written += static_cast<int32_t>(blocks.size()) - skipped;
        if (!copies.empty()) {
          for (const KvCopy& c : copies) bytes += static_cast<int64_t>(c.bytes);
          ++in_flight_;
          result_.num_writes += static_cast<int32_t>(copies.size());
          ++result_.num_transport_writes;
          if (result_.first_write_issued == absl::InfinitePast()) {
            result_.first_write_issued = options_.clock->Now();
          }
        }
      }
    }
  }
  if (!copies.empty()) {
    options_.transport->Write(
        options_.target.target, std::move(copies), options_.deadline,
        [self = shared_from_this(), bytes](absl::Status s) { self->OnWriteDone(s, bytes); });
    // The source blocks stay as they are until released: hash them while the write travels.
    if (hasher_.has_value()) HashWrittenBlocks(first_index, blocks);
  }
  Run(std::move(actions));
}

void KvBlockWriter::HashWrittenBlocks(int32_t first_index, std::span<const int32_t> blocks) {
  const int32_t skip = options_.target.num_cached_tokens / options_.target.layout.block_size;
  const int32_t from = std::max(0, skip - first_index);
  if (from >= static_cast<int32_t>(blocks.size())) return;
  const absl::Time start = options_.clock->Now();
  absl::StatusOr<std::vector<uint64_t>> sums = hasher_->HashBlocks(
      options_.transport->host_pool(), options_.local_layout, blocks.subspan(from));
  const int64_t nanos = absl::ToInt64Nanoseconds(options_.clock->Now() - start);
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    result_.checksum_nanos += nanos;
    if (!sums.ok()) {
      Fail(sums.status());
    } else if (static_cast<int64_t>(checksums_.size()) != int64_t{first_index} + from - skip) {
      Fail(absl::InternalError(absl::StrCat("KV checksums: blocks from prompt block ",
                                            first_index + from, " arrived after ",
                                            checksums_.size(), " written blocks")));
    } else {
      checksums_.insert(checksums_.end(), sums->begin(), sums->end());
    }
    actions = Progress();
  }
  Run(std::move(actions));
}

void KvBlockWriter::OnPrefillDone(const GenerationEvent& first_token, uint64_t rng_counter) {
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    if (engine_done_) return;
    engine_done_ = true;
    prefill_done_ = true;
    if (engine_id_ == 0) engine_id_ = first_token.request_id;
    first_token_ = first_token;
    result_.first_token = first_token.token;
    result_.logprob = first_token.logprob;
    result_.top_logprobs = first_token.top_logprobs;
    result_.rng_counter = rng_counter;
    result_.prefill_done = options_.clock->Now();
    if (error_.ok() && options_.clock->Now() >= options_.deadline) {
      Fail(absl::DeadlineExceededError("KV transfer deadline passed before the prefill finished"));
    }
    actions = Progress();
  }
  Run(std::move(actions));
}

void KvBlockWriter::OnAborted(RequestId id, const absl::Status& status) {
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    if (engine_done_) return;
    engine_done_ = true;
    engine_id_ = id;
    Fail(status.ok()
             ? absl::CancelledError("prefill aborted")
             : absl::Status(status.code(), absl::StrCat("prefill aborted: ", status.message())));
    actions = Progress();
  }
  Run(std::move(actions));
}

void KvBlockWriter::OnWriteDone(const absl::Status& status, int64_t bytes) {
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    --in_flight_;
    result_.last_write_done = options_.clock->Now();
    if (status.ok()) {
      result_.bytes += bytes;
    } else {
      Fail(absl::Status(status.code(), absl::StrCat("KV write failed: ", status.message())));
    }
    actions = Progress();
  }
  Run(std::move(actions));
}

void KvBlockWriter::OnNoticeDone(const absl::Status& status) {
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    notice_done_ = true;
    notice_status_ = status;
    actions = Progress();
  }
  Run(std::move(actions));
}

void KvBlockWriter::Fail(absl::Status status) {
  if (error_.ok()) error_ = std::move(status);
}

KvBlockWriter::Actions KvBlockWriter::Progress() {
  Actions a;
  const bool writes_over = in_flight_ == 0;
  if (error_.ok()) {
    if (prefill_done_ && writes_over && !notice_started_) {
      notice_started_ = true;
      result_.completion_sent = options_.clock->Now();
      a.notify = true;
      a.notice =
          Notice(options_.target, options_.local_incarnation, options_.auth, absl::OkStatus(),
                 &first_token_, result_.rng_counter, checksums_, notice_epoch_);
    }
  } else if (writes_over && !notice_started_) {
    notice_started_ = true;
    a.notify = true;
    a.notice =
        Notice(options_.target, options_.local_incarnation, options_.auth, error_, nullptr, 0);
  }
  // Local blocks are free once the engine is done with the request and no write reads them.
  if (engine_done_ && writes_over && !released_) {
    released_ = true;
    a.release = true;
    a.release_id = engine_id_;
  }
  if (notice_done_ && !reported_) {
    reported_ = true;
    a.report = true;
    if (!error_.ok()) {
      a.result = error_;
    } else if (!notice_status_.ok()) {
      a.result = absl::Status(notice_status_.code(), absl::StrCat("KV completion notice failed: ",
                                                                  notice_status_.message()));
    } else {
      a.result = result_;
    }
  }
  return a;
}

void KvBlockWriter::Run(Actions actions) {
  if (actions.release) options_.release_blocks(actions.release_id);
  if (actions.notify) {
    options_.transport->Notify(
        options_.target.target, std::move(actions.notice), options_.deadline,
        [self = shared_from_this()](absl::Status s) { self->OnNoticeDone(s); });
  }
  if (actions.report) options_.on_finished(std::move(actions.result));
}

}  // namespace tandem
