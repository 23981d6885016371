#include "router/node_probe.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/util/serial_executor.h"
#include "grpcpp/client_context.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"

namespace tandem {
namespace {

constexpr char kHealthCheckMethod[] = "/grpc.health.v1.Health/Check";
constexpr int kServing = 1;

std::string ServingStatusName(int status) {
  switch (status) {
    case 0:
      return "UNKNOWN";
    case 1:
      return "SERVING";
    case 2:
      return "NOT_SERVING";
    case 3:
      return "SERVICE_UNKNOWN";
  }
  return absl::StrCat("malformed response (", status, ")");
}

const grpc::Slice* EmptySlice() {
  static const grpc::Slice* empty = new grpc::Slice();
  return empty;
}

// The calls of one round; shared with the callbacks so a caller that stops waiting leaves
// nothing dangling.
struct Round {
  struct Probe {
    std::shared_ptr<Node> node;
    grpc::ClientContext health_ctx;
    // HealthCheckRequest{service: ""} encodes to no bytes (but must be a real, empty buffer).
    grpc::ByteBuffer health_request{EmptySlice(), 1};
    grpc::ByteBuffer health_response;
    grpc::Status health_status;
    grpc::ClientContext load_ctx;
    v1::LoadRequest load_request;
    v1::NodeLoad load;
    grpc::Status load_status;
  };
  absl::Mutex mu;
  int outstanding ABSL_GUARDED_BY(mu) = 0;
  std::vector<std::unique_ptr<Probe>> probes;

  void Done() {
    absl::MutexLock lock(&mu);
    --outstanding;
  }
};

std::string StatusText(const grpc::Status& status) {
  static constexpr const char* kNames[] = {"OK",
                                           "CANCELLED",
                                           "UNKNOWN",
                                           "INVALID_ARGUMENT",
                                           "DEADLINE_EXCEEDED",
                                           "NOT_FOUND",
                                           "ALREADY_EXISTS",
                                           "PERMISSION_DENIED",
                                           "RESOURCE_EXHAUSTED",
                                           "FAILED_PRECONDITION",
                                           "ABORTED",
                                           "OUT_OF_RANGE",
                                           "UNIMPLEMENTED",
                                           "INTERNAL",
                                           "UNAVAILABLE",
                                           "DATA_LOSS",
                                           "UNAUTHENTICATED"};
  const int code = static_cast<int>(status.error_code());
  std::string text = code >= 0 && code < 17 ? kNames[code] : absl::StrCat("code ", code);
  if (!status.error_message().empty()) absl::StrAppend(&text, ": ", status.error_message());
  return text;
}

std::string BufferBytes(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!buffer.Dump(&slices).ok()) return out;
  for (const grpc::Slice& s : slices) {
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return out;
}

}  // namespace

int ParseHealthCheckResponse(const std::string& bytes) {
  int status = 0;  // proto3 default: UNKNOWN
  size_t i = 0;
  while (i < bytes.size()) {
    const uint8_t tag = static_cast<uint8_t>(bytes[i++]);
    if (tag != 0x08) return -1;  // only field 1 (varint) is defined
    uint64_t value = 0;
    int shift = 0;
    while (true) {
      if (i >= bytes.size() || shift > 63) return -1;
      const uint8_t b = static_cast<uint8_t>(bytes[i++]);
      value |= static_cast<uint64_t>(b & 0x7f) << shift;
      shift += 7;
      if ((b & 0x80) == 0) break;
    }
    status = static_cast<int>(value);
  }
  return status;
}

std::vector<ProbeResult> ProbeNodes(std::span<const std::shared_ptr<Node>> nodes,
                                    absl::Duration timeout) {
  auto round = std::make_shared<Round>();
  const auto deadline = std::chrono::system_clock::now() +
                        std::chrono::milliseconds(
                            absl::ToInt64Milliseconds(std::max(timeout, absl::Milliseconds(1))));
  {
    absl::MutexLock lock(&round->mu);
    round->outstanding = static_cast<int>(nodes.size()) * 2;
  }
  for (const std::shared_ptr<Node>& node : nodes) {
    auto probe = std::make_unique<Round::Probe>();
    probe->node = node;
    round->probes.push_back(std::move(probe));
  }
  for (auto& probe_ptr : round->probes) {
    Round::Probe* probe = probe_ptr.get();
    probe->health_ctx.set_deadline(deadline);
    probe->load_ctx.set_deadline(deadline);
    grpc::GenericStub generic(probe->node->channel());
    generic.UnaryCall(&probe->health_ctx, kHealthCheckMethod, grpc::StubOptions(),
                      &probe->health_request, &probe->health_response,
                      [round, probe](grpc::Status s) {
                        probe->health_status = std::move(s);
                        round->Done();
                      });
    if (probe->node->role() == NodeRole::kDecode) {
      probe->node->decode().async()->GetLoad(&probe->load_ctx, &probe->load_request, &probe->load,
                                             [round, probe](grpc::Status s) {
                                               probe->load_status = std::move(s);
                                               round->Done();
                                             });
    } else {
      probe->node->prefill().async()->GetLoad(&probe->load_ctx, &probe->load_request, &probe->load,
                                              [round, probe](grpc::Status s) {
                                                probe->load_status = std::move(s);
                                                round->Done();
                                              });
    }
  }
  std::vector<ProbeResult> results(nodes.size());
  {
    absl::MutexLock lock(&round->mu);
    // A plain capture, not an init-capture: clang cannot name an init-capture in the attribute.
    Round* const this_round = round.get();
    auto all_done = [this_round]() ABSL_SHARED_LOCKS_REQUIRED(this_round->mu) {
      return this_round->outstanding == 0;
    };
    // The deadlines end every call; the extra second only guards against a lost callback.
    if (!round->mu.AwaitWithTimeout(absl::Condition(&all_done), timeout + absl::Seconds(1))) {
      for (ProbeResult& r : results) {
        r.error = "health check did not complete";
        r.slow = true;
      }
      SerialExecutor::InlineBlock no_inline;  // TryCancel under round->mu
      for (auto& probe : round->probes) {
        probe->health_ctx.TryCancel();
        probe->load_ctx.TryCancel();
      }
      return results;
    }
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Round::Probe& probe = *round->probes[i];
    ProbeResult& r = results[i];
    if (!probe.health_status.ok()) {
      r.error = absl::StrCat("health check: ", StatusText(probe.health_status));
      r.slow = probe.health_status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
      continue;
    }
    const int serving = ParseHealthCheckResponse(BufferBytes(probe.health_response));
    if (serving != kServing) {
      r.error = absl::StrCat("health check: ", ServingStatusName(serving));
      continue;
    }
    if (!probe.load_status.ok()) {
      r.error = absl::StrCat("GetLoad: ", StatusText(probe.load_status));
      r.slow = probe.load_status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
      if (probe.load_status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
        absl::StrAppend(&r.error, " (not a ", NodeRoleName(probe.node->role()), " node?)");
      }
      continue;
    }
    const std::string want = NodeRoleName(probe.node->role());
    if (probe.load.role() != want) {
      r.error = absl::StrCat("GetLoad: the node says it is a \"", probe.load.role(),
                             "\" node; it was configured as a ", want, " node");
      continue;
    }
    r.ok = true;
    r.load = probe.load;
  }
  return results;
}

}  // namespace tandem
