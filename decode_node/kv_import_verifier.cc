#include "decode_node/kv_import_verifier.h"

#include <span>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/handoff/kv_checksum.h"
#include "spdlog/spdlog.h"

namespace tandem {
namespace {

ImportVerdict Refused(RequestId id, ImportRefusal refusal, bool writer_stopped,
                      const absl::Status& why) {
  ImportVerdict v;
  v.kind = ImportVerdict::Kind::kRefused;
  v.id = id;
  v.refusal = refusal;
  v.writer_stopped = writer_stopped;
  v.status = absl::DataLossError(absl::StrCat("request ", id,
                                              ": the prompt's KV was refused before admission (",
                                              ImportRefusalName(refusal), "): ", why.message()));
  return v;
}

}  // namespace

KvImportVerifier::KvImportVerifier(const KvTransport* transport, KvLayout layout,
                                   KvImportVerifierOptions options)
    : transport_(transport), layout_(layout), options_(options) {}

KvSeal KvImportVerifier::Seal(const KvReservation& reservation) {
  const bool host_pool = !transport_->host_pool().empty();
  KvSeal seal;
  Record record;
  if (options_.checksums && host_pool) seal.checksum_key = NewKvChecksumKey();
  record.checksum_key = seal.checksum_key;
  const size_t skip = static_cast<size_t>(reservation.num_cached_tokens / layout_.block_size);
  if (skip < reservation.block_ids.size()) {
    record.written_blocks.assign(reservation.block_ids.begin() + static_cast<ptrdiff_t>(skip),
                                 reservation.block_ids.end());
  }
  record.expires_nanos =
      reservation.lease_deadline_nanos + absl::ToInt64Nanoseconds(options_.record_grace);
  absl::MutexLock lock(&mu_);
  if (options_.checksums && !host_pool && !warned_device_pool_) {
    warned_device_pool_ = true;
    spdlog::warn(
        "decode: the KV pool is not host memory ({} transport): imports are checked by epoch "
        "only, without block checksums",
        std::string(transport_->name()));
  }
  seal.epoch = record.epoch = ++last_epoch_;
  PruneExpired(options_.clock->NowNanos());
  records_[reservation.request_id] = std::move(record);
  return seal;
}

void KvImportVerifier::PruneExpired(int64_t now_nanos) {
  if (now_nanos < next_prune_nanos_) return;
  next_prune_nanos_ = now_nanos + absl::ToInt64Nanoseconds(absl::Seconds(1));
  for (auto it = records_.begin(); it != records_.end();) {
    auto here = it++;
    if (here->second.expires_nanos <= now_nanos) records_.erase(here);
  }
}

std::optional<KvImportVerifier::Record> KvImportVerifier::TakeRecord(RequestId id) {
  absl::MutexLock lock(&mu_);
  auto it = records_.find(id);
  if (it == records_.end()) return std::nullopt;
  Record record = std::move(it->second);
  records_.erase(it);
  return record;
}

void KvImportVerifier::Judge(tandem::v1::KvCompletion completion,
                             absl::AnyInvocable<void(ImportVerdict)> act) {
  worker_.Schedule([this, completion = std::move(completion), act = std::move(act)]() mutable {
    act(JudgeNow(completion));
  });
}

ImportVerdict KvImportVerifier::JudgeNow(const tandem::v1::KvCompletion& c) {
  const RequestId id = c.request_id();
  ImportVerdict stopped;
  stopped.kind = ImportVerdict::Kind::kWriterStopped;
  stopped.id = id;
  stopped.status =
      absl::AbortedError(absl::StrCat("the prefill node stopped writing: ", c.error()));
  // 1. No record.
  std::optional<Record> record = TakeRecord(id);
  if (!record.has_value()) {
    if (c.ok()) {
      stopped.status = absl::DataLossError(
          absl::StrCat("request ", id, ": a completion for no live reservation is never admitted"));
    }
    return stopped;
  }
  // 2. Another epoch's writer.
  if (c.epoch() != record->epoch) {
    return Refused(id, ImportRefusal::kStaleEpoch, /*writer_stopped=*/false,
                   absl::FailedPreconditionError(
                       absl::StrCat("the completion is for epoch ", c.epoch(),
                                    ", the reservation's epoch is ", record->epoch)));
  }
  // 3. The writer stopped.
  if (!c.ok()) return stopped;
  // 4. The landed KV.
  ImportVerdict admit;
  admit.id = id;
  if (!record->checksum_key.empty()) {
    const auto sums = std::span<const uint64_t>(c.block_checksums().data(),
                                                static_cast<size_t>(c.block_checksums_size()));
    if (sums.size() != record->written_blocks.size()) {
      return Refused(id, ImportRefusal::kMissingChecksums, /*writer_stopped=*/true,
                     absl::InvalidArgumentError(absl::StrCat(
                         "the completion carries ", sums.size(), " block checksums for ",
                         record->written_blocks.size(), " written blocks")));
    }
    absl::StatusOr<KvBlockHasher> hasher = KvBlockHasher::Create(record->checksum_key, c.epoch());
    absl::Status verified = hasher.ok() ? VerifyKvBlocks(transport_->host_pool(), layout_,
                                                         record->written_blocks, *hasher, sums)
                                        : hasher.status();
    if (absl::IsDataLoss(verified)) {
      return Refused(id, ImportRefusal::kChecksumMismatch, /*writer_stopped=*/true, verified);
    }
    if (!verified.ok()) {
      return Refused(id, ImportRefusal::kUnverifiable, /*writer_stopped=*/true, verified);
    }
    admit.verified = true;
  }
  // 5. Admitted.
  admit.prefill = ImportedPrefillFromCompletion(c);
  return admit;
}

}  // namespace tandem
