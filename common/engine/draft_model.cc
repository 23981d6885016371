#include "common/engine/draft_model.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/util/mapped_file.h"
#include "spdlog/spdlog.h"

namespace tandem {
namespace {

// The greedy token of one logits row: the highest logit, the lowest id on ties (as the sampler's
// greedy choice); NaN never wins.
TokenId DraftArgmax(std::span<const float> row) {
  TokenId best = 0;
  float best_logit = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < row.size(); ++i) {
    if (row[i] > best_logit) {
      best_logit = row[i];
      best = static_cast<TokenId>(i);
    }
  }
  return best;
}

size_t CommonPrefix(std::span<const TokenId> a, std::span<const TokenId> b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

}  // namespace

absl::Status CheckDraftConfig(const ModelConfig& draft, const ModelConfig& target) {
  if (draft.vocab_size != target.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the draft model's vocabulary has ", draft.vocab_size, " tokens and the target's ",
        target.vocab_size, ": a draft model must use the target's tokenizer"));
  }
  if (draft.bos_token_id != target.bos_token_id) {
    return absl::InvalidArgumentError(absl::StrCat("the draft model's bos_token_id is ",
                                                   draft.bos_token_id, " and the target's ",
                                                   target.bos_token_id));
  }
  if (draft.eos_token_ids != target.eos_token_ids) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the draft model's eos_token_id is [", absl::StrJoin(draft.eos_token_ids, ", "),
        "] and the target's [", absl::StrJoin(target.eos_token_ids, ", "), "]"));
  }
  return absl::OkStatus();
}

absl::Status CheckDraftTokenizer(const std::string& draft_dir, const std::string& target_dir) {
  const std::string draft_path = draft_dir + "/tokenizer.json";
  const std::string target_path = target_dir + "/tokenizer.json";
  std::error_code ec;
  if (!std::filesystem::exists(draft_path, ec) || !std::filesystem::exists(target_path, ec)) {
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> draft = ReadFileToString(draft_path);
  if (!draft.ok()) return draft.status();
  absl::StatusOr<std::string> target = ReadFileToString(target_path);
  if (!target.ok()) return target.status();
  if (*draft != *target) {
    return absl::InvalidArgumentError(absl::StrCat(
        draft_path, " differs from ", target_path,
        ": a draft model must use the target's tokenizer (the same token ids for the same text)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<DraftModel>> LoadDraftModel(
    const std::string& draft_dir, const std::string& target_dir, const Backend& target,
    int32_t max_batch_tokens, int32_t max_num_seqs, const DraftBackendFactory& factory) {
  auto named = [&draft_dir](const absl::Status& status) {
    return absl::Status(status.code(),
                        absl::StrCat("--draft-model ", draft_dir, ": ", status.message()));
  };
  if (absl::Status same = CheckDraftTokenizer(draft_dir, target_dir); !same.ok())
    return named(same);
  absl::StatusOr<std::unique_ptr<Backend>> backend =
      factory(target.kv_layout().num_blocks + std::max(max_num_seqs, 1));
  if (!backend.ok()) return named(backend.status());
  absl::StatusOr<std::unique_ptr<DraftModel>> draft =
      DraftModel::Create(std::move(*backend), target.config(), max_batch_tokens);
  if (!draft.ok()) return named(draft.status());
  const Backend& loaded = (*draft)->backend();
  spdlog::info("draft model {}: {} layers, hidden {}; KV pool {} blocks of {} tokens", draft_dir,
               loaded.config().num_layers, loaded.config().hidden_size,
               loaded.kv_layout().num_blocks, loaded.kv_layout().block_size);
  return draft;
}

absl::StatusOr<std::unique_ptr<DraftModel>> DraftModel::Create(std::unique_ptr<Backend> draft,
                                                               const ModelConfig& target,
                                                               int32_t max_batch_tokens,
                                                               Clock* clock) {
  if (draft == nullptr || clock == nullptr) {
    return absl::InvalidArgumentError("a draft model needs a backend and a clock");
  }
  if (max_batch_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("draft model: max_batch_tokens must be >= 1, got ", max_batch_tokens));
  }
  if (absl::Status fits = CheckDraftConfig(draft->config(), target); !fits.ok()) return fits;
  const KvLayout& layout = draft->kv_layout();
  if (layout.num_blocks < 1 || layout.block_size < 1) {
    return absl::InvalidArgumentError("the draft model's KV pool is empty");
  }
  return std::unique_ptr<DraftModel>(new DraftModel(std::move(draft), max_batch_tokens, clock));
}

DraftModel::DraftModel(std::unique_ptr<Backend> draft, int32_t max_batch_tokens, Clock* clock)
    : backend_(std::move(draft)),
      max_batch_tokens_(max_batch_tokens),
      clock_(clock),
      block_size_(backend_->kv_layout().block_size),
      vocab_(static_cast<size_t>(backend_->config().vocab_size)) {
  const int32_t blocks = backend_->kv_layout().num_blocks;
  free_blocks_.reserve(blocks);
  for (int32_t b = blocks - 1; b >= 0; --b) free_blocks_.push_back(b);
}

bool DraftModel::FitBlocks(DraftSeq& seq, int64_t tokens) {
  const size_t needed = static_cast<size_t>((tokens + block_size_ - 1) / block_size_);
  if (needed > seq.blocks.size() && needed - seq.blocks.size() > free_blocks_.size()) {
    return false;
  }
  while (seq.blocks.size() < needed) {
    seq.blocks.push_back(free_blocks_.back());
    free_blocks_.pop_back();
  }
  while (seq.blocks.size() > needed) {
    free_blocks_.push_back(seq.blocks.back());
    seq.blocks.pop_back();
  }
  return true;
}

void DraftModel::FreeBlocks(DraftSeq& seq) {
  free_blocks_.insert(free_blocks_.end(), seq.blocks.begin(), seq.blocks.end());
  seq.blocks.clear();
  seq.computed.clear();
}

void DraftModel::Forget(RequestId id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  FreeBlocks(it->second);
  seqs_.erase(it);
}

absl::Status DraftModel::RunPass(std::span<const Drafting> rows) {
  logits_.resize(rows.size() * vocab_);
  ++stats_.num_forwards;
  absl::Status status =
      backend_->Forward(ForwardBatch{items_}, LogitsOutput{std::span<float>(logits_)});
  if (!status.ok()) return status;
  for (size_t r = 0; r < rows.size(); ++r) {
    rows[r].ask->drafts->push_back(
        DraftArgmax(std::span<const float>(logits_.data() + r * vocab_, vocab_)));
  }
  return absl::OkStatus();
}

absl::Status DraftModel::Propose(std::span<DraftAsk> asks) {
  const int64_t start = clock_->NowNanos();
  std::vector<Drafting> drafting;
  drafting.reserve(asks.size());
  items_.clear();
  int64_t budget = max_batch_tokens_;
  // 1. Catch up: every ask's context past what its draft KV holds, in one pass.
  for (DraftAsk& ask : asks) {
    ask.drafts->clear();
    if (ask.context.empty() || ask.max_drafts < 1) continue;
    DraftSeq& seq = seqs_[ask.id];
    size_t valid = CommonPrefix(seq.computed, ask.context);
    // The last context token's logits give draft 1: compute it again if the KV has it already.
    if (valid == ask.context.size()) --valid;
    seq.computed.resize(valid);
    // KV slots for the context and drafts 1..K-1 (the last draft is never fed back).
    const int64_t positions = static_cast<int64_t>(ask.context.size()) + ask.max_drafts - 1;
    if (!FitBlocks(seq, positions)) {
      ++stats_.num_out_of_blocks;
      FreeBlocks(seq);
      seqs_.erase(ask.id);
      continue;
    }
    const int64_t missing = static_cast<int64_t>(ask.context.size() - valid);
    const int64_t now = std::min(missing, budget);
    if (now <= 0) continue;
    budget -= now;
    ForwardItem& item = items_.emplace_back();
    item.tokens = ask.context.subspan(valid, static_cast<size_t>(now));
    item.start_pos = static_cast<int32_t>(valid);
    item.block_table = seq.blocks;
    item.want_logits = now == missing;  // caught up: its last row is draft 1
    drafting.push_back(Drafting{&ask, &seq});
  }
  absl::Status status = absl::OkStatus();
  if (!items_.empty()) {
    // Rows only for the caught-up items, in item order.
    std::vector<Drafting> rows;
    for (size_t i = 0; i < items_.size(); ++i) {
      if (items_[i].want_logits) rows.push_back(drafting[i]);
    }
    status = RunPass(rows);
    if (status.ok()) {
      for (size_t i = 0; i < items_.size(); ++i) {
        std::vector<TokenId>& computed = drafting[i].seq->computed;
        computed.insert(computed.end(), items_[i].tokens.begin(), items_[i].tokens.end());
        stats_.num_catch_up_tokens += static_cast<int64_t>(items_[i].tokens.size());
      }
    }
    drafting = std::move(rows);
  }
  // 2. Drafts 2..K: one token per sequence still drafting, one pass per position.
  for (int32_t position = 1; status.ok() && !drafting.empty(); ++position) {
    std::erase_if(drafting,
                  [position](const Drafting& d) { return d.ask->max_drafts <= position; });
    if (drafting.empty()) break;
    items_.clear();
    feed_.clear();
    for (const Drafting& d : drafting) feed_.push_back(d.ask->drafts->back());
    for (size_t i = 0; i < drafting.size(); ++i) {
      ForwardItem& item = items_.emplace_back();
      item.tokens = std::span<const TokenId>(&feed_[i], 1);
      item.start_pos = static_cast<int32_t>(drafting[i].seq->computed.size());
      item.block_table = drafting[i].seq->blocks;
      item.want_logits = true;
    }
    status = RunPass(drafting);
    if (status.ok()) {
      for (size_t i = 0; i < drafting.size(); ++i) drafting[i].seq->computed.push_back(feed_[i]);
    }
  }
  if (!status.ok()) {
    for (DraftAsk& ask : asks) {
      ask.drafts->clear();
      Forget(ask.id);
    }
  } else {
    for (const DraftAsk& ask : asks) {
      stats_.num_proposed_tokens += static_cast<int64_t>(ask.drafts->size());
    }
  }
  stats_.busy_nanos += clock_->NowNanos() - start;
  return status;
}

}  // namespace tandem
