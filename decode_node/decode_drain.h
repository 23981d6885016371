// tandem-decode's graceful drain (SIGINT/SIGTERM), live KV migration first:
//
//   1. DecodeService::BeginDrain: Reserve and Generate answer UNAVAILABLE and GetLoad reports
//      draining (routers place nothing here); every request with a router id is asked to pause
//      for migration (each stream sends migration_paused once its KV is computed). Health stays
//      SERVING: a router marks a NOT_SERVING node down, and the router must still reach this one.
//   2. The server still takes calls — the router's Reserve elsewhere is followed by ExportKv,
//      Cancel and ResumePaused here, which a shut-down server would refuse — until the engine
//      holds no request (each moved with its KV and cancelled here, or resumed and finished) and
//      every stream and export call has sent its status, or the drain time is up. They are read
//      every kDrainPollInterval.
//   3. DrainGrpcServer for what is left of the drain time: health NOT_SERVING, new calls refused,
//      streams still running then ended by `cut` (ABORTED: the router recomputes them on another
//      node).
// Without live migration, step 1 without the pause, then step 3 for the whole drain time.
#ifndef TANDEM_DECODE_NODE_DECODE_DRAIN_H_
#define TANDEM_DECODE_NODE_DECODE_DRAIN_H_

#include "absl/functional/any_invocable.h"
#include "absl/time/time.h"
#include "common/engine/engine.h"
#include "decode_node/decode_service.h"
#include "grpcpp/grpcpp.h"

namespace tandem {

inline constexpr absl::Duration kDrainPollInterval = absl::Milliseconds(20);

struct DecodeDrainOptions {
  absl::Duration drain = absl::Seconds(30);  // --drain-timeout-ms
  bool live_migration = true;                // not --no-drain-live-migration
};

// Whether the engine holds no request: none waiting, reserving, awaiting its KV, running or
// paused.
bool HoldsNoRequest(const EngineStats& stats);

// Runs the drain above; returns once the server has stopped. `service` and `engine` are the ones
// `server` serves (borrowed). Times are real (a drain bounds the process's own exit).
void DrainDecodeNode(grpc::Server& server, DecodeService& service, const Engine& engine,
                     const DecodeDrainOptions& options, absl::AnyInvocable<void()> cut);

}  // namespace tandem

#endif  // TANDEM_DECODE_NODE_DECODE_DRAIN_H_
