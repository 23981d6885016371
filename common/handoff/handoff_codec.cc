#include "common/handoff/handoff_codec.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/handoff/kv_checksum.h"

namespace tandem {

tandem::v1::KvLayoutDescriptor KvLayoutToProto(const KvLayout& layout) {
  tandem::v1::KvLayoutDescriptor proto;
  proto.set_dtype(std::string(KvDTypeName(layout.dtype)));
  proto.set_num_layers(layout.num_layers);
  proto.set_num_kv_heads(layout.num_kv_heads);
  proto.set_head_dim(layout.head_dim);
  proto.set_block_size(layout.block_size);
  proto.set_num_blocks(layout.num_blocks);
  proto.set_scale_fingerprint(layout.scale_fingerprint);
  return proto;
}

absl::StatusOr<KvLayout> KvLayoutFromProto(const tandem::v1::KvLayoutDescriptor& proto) {
  std::optional<DType> dtype = ParseKvDType(proto.dtype());
  if (!dtype) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV layout: unknown dtype '", proto.dtype(), "'"));
  }
  KvLayout layout;
  layout.dtype = *dtype;
  layout.num_layers = proto.num_layers();
  layout.num_kv_heads = proto.num_kv_heads();
  layout.head_dim = proto.head_dim();
  layout.block_size = proto.block_size();
  layout.num_blocks = proto.num_blocks();
  layout.scale_fingerprint = proto.scale_fingerprint();
  if ((layout.dtype == DType::kFP8E4M3) != (layout.scale_fingerprint != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KV layout: scale_fingerprint must be set for fp8_e4m3 and only for it (dtype ",
        KvDTypeName(layout.dtype), ", scale_fingerprint ", layout.scale_fingerprint, ")"));
  }
  const std::pair<const char*, int32_t> dims[] = {{"num_layers", layout.num_layers},
                                                  {"num_kv_heads", layout.num_kv_heads},
                                                  {"head_dim", layout.head_dim},
                                                  {"block_size", layout.block_size},
                                                  {"num_blocks", layout.num_blocks}};
  for (const auto& [name, value] : dims) {
    if (value <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("KV layout: ", name, " must be positive, got ", value));
    }
  }
  return layout;
}

absl::Status CheckLayoutsCompatible(const KvLayout& local, const KvLayout& remote) {
  if (local.dtype != remote.dtype) {
    return absl::InvalidArgumentError(absl::StrCat("KV layout mismatch: dtype is ",
                                                   KvDTypeName(local.dtype), " here but ",
                                                   KvDTypeName(remote.dtype), " at the target"));
  }
  if (local.scale_fingerprint != remote.scale_fingerprint) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KV layout mismatch: scale_fingerprint (the fp8 KV scales per layer and KV head) is ",
        absl::Hex(local.scale_fingerprint), " here but ", absl::Hex(remote.scale_fingerprint),
        " at the target: the nodes calibrated different scales (different models or builds)"));
  }
  const std::tuple<const char*, int32_t, int32_t> fields[] = {
      {"num_layers", local.num_layers, remote.num_layers},
      {"num_kv_heads", local.num_kv_heads, remote.num_kv_heads},
      {"head_dim", local.head_dim, remote.head_dim},
      {"block_size", local.block_size, remote.block_size}};
  for (const auto& [name, here, there] : fields) {
    if (here != there) {
      return absl::InvalidArgumentError(absl::StrCat("KV layout mismatch: ", name, " is ", here,
                                                     " here but ", there, " at the target"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateKvWriteTarget(const KvWriteTarget& t) {
  if (t.target.address.empty()) return absl::InvalidArgumentError("KV target: empty address");
  if (t.target.remote_key.empty()) {
    return absl::InvalidArgumentError("KV target: empty remote key");
  }
  if (t.layout.block_size <= 0 || t.layout.num_blocks <= 0) {
    return absl::InvalidArgumentError("KV target: layout has no blocks");
  }
  for (size_t i = 0; i < t.block_ids.size(); ++i) {
    if (t.block_ids[i] < 0 || t.block_ids[i] >= t.layout.num_blocks) {
      return absl::InvalidArgumentError(absl::StrCat("KV target: block_ids[", i,
                                                     "] = ", t.block_ids[i], " is outside the ",
                                                     t.layout.num_blocks, "-block pool"));
    }
  }
  if (!t.checksum_key.empty() && t.checksum_key.size() != kKvChecksumKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat("KV target: a checksum key of ",
                                                   t.checksum_key.size(), " bytes, not ",
                                                   kKvChecksumKeyBytes));
  }
  const int64_t capacity = static_cast<int64_t>(t.block_ids.size()) * t.layout.block_size;
  if (t.num_cached_tokens < 0 || t.num_cached_tokens % t.layout.block_size != 0 ||
      t.num_cached_tokens > capacity) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KV target: num_cached_tokens ", t.num_cached_tokens, " is not a whole number of ",
        t.layout.block_size, "-token blocks within the ", t.block_ids.size(), " blocks given"));
  }
  return absl::OkStatus();
}

tandem::v1::KvHandoff MakeKvHandoff(const KvReservation& reservation, const KvTransport& transport,
                                    const KvLayout& layout, uint64_t decode_incarnation,
                                    int64_t lease_remaining_ms, const KvSeal& seal) {
  tandem::v1::KvHandoff handoff;
  handoff.set_request_id(reservation.request_id);
  handoff.set_decode_incarnation(decode_incarnation);
  handoff.set_transport(std::string(transport.name()));
  handoff.set_transport_address(transport.address());
  handoff.set_remote_key(transport.pool_remote_key());
  handoff.set_remote_base(transport.pool_base());
  *handoff.mutable_layout() = KvLayoutToProto(layout);
  handoff.mutable_block_ids()->Add(reservation.block_ids.begin(), reservation.block_ids.end());
  handoff.set_num_cached_tokens(reservation.num_cached_tokens);
  handoff.set_lease_remaining_ms(lease_remaining_ms);
  handoff.set_epoch(seal.epoch);
  handoff.set_checksum_key(seal.checksum_key);
  return handoff;
}

absl::StatusOr<KvWriteTarget> KvWriteTargetFromHandoff(const tandem::v1::KvHandoff& handoff,
                                                       std::string_view transport_name) {
  if (!handoff.transport().empty() && handoff.transport() != transport_name) {
    return absl::FailedPreconditionError(absl::StrCat("KV handoff is for transport '",
                                                      handoff.transport(), "', this node uses '",
                                                      std::string(transport_name), "'"));
  }
  absl::StatusOr<KvLayout> layout = KvLayoutFromProto(handoff.layout());
  if (!layout.ok()) return layout.status();
  KvWriteTarget t;
  t.target.address = handoff.transport_address();
  t.target.remote_key = handoff.remote_key();
  t.target.remote_base = handoff.remote_base();
  t.target.incarnation = handoff.decode_incarnation();
  t.layout = *layout;
  t.block_ids.assign(handoff.block_ids().begin(), handoff.block_ids().end());
  t.num_cached_tokens = handoff.num_cached_tokens();
  t.decode_request_id = handoff.request_id();
  t.decode_incarnation = handoff.decode_incarnation();
  t.epoch = handoff.epoch();
  t.checksum_key = handoff.checksum_key();
  absl::Status s = ValidateKvWriteTarget(t);
  if (!s.ok()) return s;
  return t;
}

absl::Time HandoffDeadline(const tandem::v1::KvHandoff& handoff, absl::Time received_at) {
  return received_at + absl::Milliseconds(handoff.lease_remaining_ms());
}

tandem::v1::KvCompletion MakeKvCompletion(const KvWriteTarget& target, uint64_t prefill_incarnation,
                                          const absl::Status& status,
                                          const GenerationEvent* first_token, uint64_t rng_counter,
                                          std::span<const uint64_t> block_checksums) {
  tandem::v1::KvCompletion c;
  c.set_request_id(target.decode_request_id);
  c.set_decode_incarnation(target.decode_incarnation);
  c.set_epoch(target.epoch);
  c.set_prefill_incarnation(prefill_incarnation);
  c.set_ok(status.ok());
  if (!status.ok()) c.set_error(status.ToString());
  if (status.ok() && first_token != nullptr) {
    tandem::v1::Token* token = c.mutable_first_token();
    token->set_id(first_token->token);
    token->set_logprob(first_token->logprob);
    for (const TokenLogprob& lp : first_token->top_logprobs) {
      tandem::v1::TokenLogprob* out = token->add_top_logprobs();
      out->set_token_id(lp.token);
      out->set_logprob(lp.logprob);
    }
    c.set_rng_counter(rng_counter);
    c.mutable_block_checksums()->Add(block_checksums.begin(), block_checksums.end());
  }
  return c;
}

absl::StatusOr<tandem::v1::KvCompletion> ParseKvCompletion(std::string_view payload) {
  tandem::v1::KvCompletion c;
  if (!c.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return absl::InvalidArgumentError(
        absl::StrCat("notice of ", payload.size(), " bytes is not a KvCompletion"));
  }
  return c;
}

ImportedPrefill ImportedPrefillFromCompletion(const tandem::v1::KvCompletion& completion) {
  ImportedPrefill p;
  p.request_id = completion.request_id();
  p.first_token = completion.first_token().id();
  p.logprob = completion.first_token().logprob();
  for (const auto& lp : completion.first_token().top_logprobs()) {
    p.top_logprobs.push_back(TokenLogprob{lp.token_id(), lp.logprob()});
  }
  p.rng_counter = completion.rng_counter();
  return p;
}

}  // namespace tandem
