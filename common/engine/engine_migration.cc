// Live KV migration on a decode node (engine.h): the Pause, Resume and ExportPaused commands. A
// paused request is out of the batch with its blocks, in paused_; its KV is exported through the
// same KvExporter interface a prefill node's request uses (kv_exporter.h), so the handoff's writer
// (common/handoff/kv_block_writer.h) moves it unchanged. Engine thread only; ends requests only
// through EndRequest (engine_lifecycle.cc).
#include <span>
#include <utility>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "common/engine/engine.h"
#include "common/engine/kv_exporter.h"
#include "spdlog/spdlog.h"

namespace tandem {

void Engine::Apply(engine_command::Pause& command) {
  if (paused_.contains(command.id)) return;
  pause_asked_.insert(command.id);  // PauseWhereAsked forgets it if the request is unknown
}

void Engine::Apply(engine_command::Resume& command) {
  pause_asked_.erase(command.id);
  auto it = paused_.find(command.id);
  if (it == paused_.end()) return;
  if (it->second.exporter != nullptr) {
    it->second.resume_after_release = true;  // its blocks are being read: not appended to yet
    return;
  }
  ResumeNow(command.id);
}

void Engine::Apply(engine_command::ExportPaused& command) {
  auto it = paused_.find(command.id);
  if (it == paused_.end() || it->second.exporter != nullptr) {
    command.exporter->OnAborted(
        command.id,
        absl::FailedPreconditionError(absl::StrCat(
            "request ", command.id,
            it == paused_.end() ? " is not paused for migration" : " is already being exported")));
    return;
  }
  PausedRequest& paused = it->second;
  paused.exporter = std::move(command.exporter);
  const Sequence& seq = *paused.seq;
  // The KV of every token but the last: the destination computes that one in its next step.
  const int32_t blocks = block_manager_.BlocksForTokens(seq.num_computed_tokens);
  paused.exporter->OnBlocksReady(seq.id, 0,
                                 std::span<const int32_t>(seq.block_table.blocks).first(blocks));
  GenerationEvent last;
  last.request_id = seq.id;
  last.token = seq.tokens.back();
  last.rng_counter = seq.rng.counter();
  paused.exporter->OnPrefillDone(last, seq.rng.counter());
}

void Engine::PauseWhereAsked() {
  if (pause_asked_.empty()) return;
  std::vector<RequestId> done;
  for (RequestId id : pause_asked_) {
    Sequence* seq = scheduler_.Find(id);
    if (seq == nullptr) {
      // Not in the batch yet (reserving, awaiting its KV) or ended.
      const bool coming = awaiting_kv_.contains(id) ||
                          absl::c_any_of(pending_reservations_, [id](const PendingReservation& p) {
                            return p.seq->id == id;
                          });
      if (!coming) done.push_back(id);
      continue;
    }
    const bool settled =
        (seq->status == SequenceStatus::kRunning || seq->status == SequenceStatus::kPrefilled) &&
        seq->num_uncomputed_tokens() == 1 && seq->num_output_tokens() > 0 &&
        seq->kv_exporter == nullptr;
    if (!settled) continue;  // prefilling, or preempted: paused once it decodes again
    done.push_back(id);
    std::unique_ptr<Sequence> taken = scheduler_.Remove(id);
    taken->status = SequenceStatus::kPaused;
    GenerationEvent event;
    event.request_id = id;
    event.paused = true;
    event.usage = taken->usage();
    event.rng_counter = taken->rng.counter();
    paused_.emplace(id, PausedRequest{std::move(taken), nullptr, false});
    spdlog::debug("engine: request {} paused for migration", id);
    Deliver(event);
  }
  for (RequestId id : done) pause_asked_.erase(id);
  PublishStats();
}

void Engine::ResumeNow(RequestId id) {
  auto node = paused_.extract(id);
  if (node.empty()) return;
  scheduler_.AddPrefilled(std::move(node.mapped().seq));
  PublishStats();
}

bool Engine::ReleasePausedExport(RequestId id) {
  auto it = paused_.find(id);
  if (it == paused_.end()) return false;
  it->second.exporter.reset();
  if (it->second.resume_after_release) ResumeNow(id);
  return true;
}

}  // namespace tandem
