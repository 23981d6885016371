// Fuzzes what nodes do with KV handoff messages from the wire: the same bytes parsed as a
// tandem.v1.PrefillRequest (what a prefill node's Prefill RPC gets), a KvHandoff and a
// KvCompletion (a notice a decode node gets over the KV transport), then
//   - HandoffGate::Admit with and without an authenticator, and with the handoff signed (what a
//     decode node could issue: the checks after the MAC),
//   - KvWriteTargetFromHandoff, HandoffDeadline and, for a target this node's layout can write,
//     KvBlockWriter::PlanCopies (every copy inside both pools),
//   - the sampling parameters' conversion (common/serving/proto_convert.h) and validation,
//   - ParseKvCompletion, its MAC check, ImportedPrefillFromCompletion, and MakeKvCompletion's
//     notice for the target, which must verify once signed.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/time.h"
#include "common/serving/proto_convert.h"
#include "common/transport/handoff_auth.h"
#include "common/handoff/handoff_codec.h"
#include "common/transport/handoff_gate.h"
#include "common/handoff/kv_block_writer.h"
#include "tests/fuzz/fuzz_common.h"

namespace tandem {
namespace {

constexpr int64_t kNowUnixMs = 1'700'000'000'000;
constexpr int kVocabSize = 128256;

// The prefill node's own pool: what the seeds' handoffs describe.
KvLayout LocalLayout() {
  KvLayout layout;
  layout.dtype = DType::kBF16;
  layout.num_layers = 2;
  layout.num_kv_heads = 2;
  layout.head_dim = 8;
  layout.block_size = 16;
  layout.num_blocks = 64;
  return layout;
}

const std::shared_ptr<const HandoffAuthenticator>& AuthPtr() {
  static const std::shared_ptr<const HandoffAuthenticator> auth = [] {
    auto a = HandoffAuthenticator::FromSecret(std::string(32, 's'));
    FUZZ_CHECK(a.ok());
    return *a;
  }();
  return auth;
}
const HandoffAuthenticator& Auth() { return *AuthPtr(); }

// A gate per input would forget nothing; one per process remembers what earlier inputs admitted,
// as a node does.
HandoffGate& Gate(bool authenticated) {
  static HandoffGate* with_auth = new HandoffGate(AuthPtr());
  static HandoffGate* without_auth = new HandoffGate(nullptr);
  return authenticated ? *with_auth : *without_auth;
}

void CheckPlan(const KvWriteTarget& target, std::span<const int32_t> local_blocks,
               int32_t first_index) {
  const KvLayout local = LocalLayout();
  if (!CheckLayoutsCompatible(local, target.layout).ok()) return;
  int32_t skipped = 0;
  absl::StatusOr<std::vector<KvCopy>> copies =
      KvBlockWriter::PlanCopies(local, target, first_index, local_blocks, &skipped);
  if (!copies.ok()) return;
  FUZZ_CHECK(skipped >= 0 && static_cast<size_t>(skipped) <= local_blocks.size());
  const uint64_t local_bytes = local.total_bytes();
  const uint64_t remote_bytes = target.layout.total_bytes();
  for (const KvCopy& c : *copies) {
    FUZZ_CHECK(c.bytes > 0);
    FUZZ_CHECK(c.src_offset + c.bytes <= local_bytes);
    FUZZ_CHECK(c.dst_offset + c.bytes <= remote_bytes);
  }
}

void CheckHandoff(const v1::KvHandoff& handoff, std::span<const int32_t> local_blocks,
                  int32_t first_index) {
  (void)Gate(/*authenticated=*/true).Admit(handoff, kNowUnixMs);
  (void)Gate(/*authenticated=*/false).Admit(handoff, kNowUnixMs);
  v1::KvHandoff signed_handoff = handoff;
  Auth().Sign(&signed_handoff);
  FUZZ_CHECK(Auth().Verify(signed_handoff).ok());
  (void)Gate(/*authenticated=*/true).Admit(signed_handoff, kNowUnixMs);

  (void)HandoffDeadline(handoff, absl::FromUnixMillis(kNowUnixMs));
  for (std::string_view transport : {"ucx", "local"}) {
    absl::StatusOr<KvWriteTarget> target = KvWriteTargetFromHandoff(handoff, transport);
    if (!target.ok()) continue;
    FUZZ_CHECK(ValidateKvWriteTarget(*target).ok());
    for (int32_t id : target->block_ids) FUZZ_CHECK(id >= 0 && id < target->layout.num_blocks);
    CheckPlan(*target, local_blocks, first_index);
    // The notice this node would send back.
    v1::KvCompletion notice = MakeKvCompletion(*target, 7, absl::DataLossError("fuzz"), nullptr, 0);
    Auth().Sign(&notice);
    absl::StatusOr<v1::KvCompletion> parsed = ParseKvCompletion(notice.SerializeAsString());
    FUZZ_CHECK(parsed.ok());
    FUZZ_CHECK(Auth().Verify(*parsed).ok());
  }
}

void CheckSampling(const v1::SamplingParams& proto) {
  const SamplingParams params = SamplingFromProto(proto);
  if (!params.Validate(kVocabSize).ok()) return;
  v1::SamplingParams back;
  SamplingToProto(params, &back);
  const SamplingParams again = SamplingFromProto(back);
  FUZZ_CHECK(again.Validate(kVocabSize).ok());
}

}  // namespace
}  // namespace tandem

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tandem;  // NOLINT
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);

  v1::PrefillRequest request;
  if (request.ParseFromArray(data, static_cast<int>(size))) {
    // The prompt's token ids stand in for the local blocks the engine filled.
    const std::vector<int32_t> local(request.prompt_token_ids().begin(),
                                     request.prompt_token_ids().end());
    const int32_t first_index = local.empty() ? 0 : local.front() % 8;
    CheckHandoff(request.handoff(), local, first_index);
    CheckSampling(request.sampling());
    (void)ToGrpcStatus(absl::InvalidArgumentError(request.request_id()));
  }

  v1::KvHandoff handoff;
  if (handoff.ParseFromArray(data, static_cast<int>(size))) {
    std::vector<int32_t> local;
    for (int i = 0; i < handoff.block_ids_size(); ++i) local.push_back(i);
    CheckHandoff(handoff, local, 0);
  }

  absl::StatusOr<v1::KvCompletion> completion = ParseKvCompletion(bytes);
  if (completion.ok()) {
    (void)Auth().Verify(*completion);
    const ImportedPrefill imported = ImportedPrefillFromCompletion(*completion);
    FUZZ_CHECK(imported.request_id == completion->request_id());
    FUZZ_CHECK(imported.top_logprobs.size() ==
               static_cast<size_t>(completion->first_token().top_logprobs_size()));
  }
  return 0;
}
