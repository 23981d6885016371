#include "decode_node/decode_drain.h"

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"
#include "common/serving/grpc_server.h"
#include "spdlog/spdlog.h"

namespace tandem {

bool HoldsNoRequest(const EngineStats& stats) {
  return stats.num_waiting == 0 && stats.num_pending_reservations == 0 &&
         stats.num_awaiting_kv == 0 && stats.num_running == 0 && stats.num_paused == 0;
}

void DrainDecodeNode(grpc::Server& server, DecodeService& service, const Engine& engine,
                     const DecodeDrainOptions& options, absl::AnyInvocable<void()> cut) {
  const absl::Time deadline = absl::Now() + options.drain;
  // 1. No new requests; every request pauses for the router to move.
  const int asked = service.BeginDrain(options.live_migration);
  if (options.live_migration) {
    spdlog::info("tandem-decode: pausing {} requests for live KV migration", asked);
    // 2. The router's migration calls are served until nothing is left here.
    while ((!HoldsNoRequest(engine.Stats()) || service.open_calls() > 0) &&
           absl::Now() < deadline) {
      absl::SleepFor(kDrainPollInterval);
    }
    const EngineStats left = engine.Stats();
    spdlog::info("tandem-decode: live KV migration phase over: {} requests paused, {} running left",
                 left.num_paused, left.num_running);
  }
  // 3. The ordinary drain for the time left.
  DrainGrpcServer(server, std::max(deadline - absl::Now(), absl::ZeroDuration()), std::move(cut));
}

}  // namespace tandem
