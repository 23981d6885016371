// The engine's inbox (engine.h): what other threads ask of the engine thread, one command per
// call of Engine's thread-safe API. Commands are plain data; the engine thread applies them in
// arrival order. Owns nothing but the types; touches nothing.
#ifndef TANDEM_COMMON_ENGINE_ENGINE_COMMANDS_H_
#define TANDEM_COMMON_ENGINE_ENGINE_COMMANDS_H_

#include <functional>
#include <memory>
#include <variant>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/engine/request.h"
#include "common/engine/sequence.h"

namespace tandem {

// Decode node: receives a reservation's blocks, or why it ended before it got any.
using ReservedCallback = std::function<void(absl::StatusOr<KvReservation>)>;

namespace engine_command {

// Engine::Submit: a validated request, to the scheduler's waiting queue.
struct Submit {
  std::unique_ptr<Sequence> seq;
  EventCallback on_event;
  PlacementTag placement;
};
// Engine::Cancel.
struct Cancel {
  RequestId id = 0;
};
// Engine::Reserve: a validated request, to the reservations waiting for blocks.
struct Reserve {
  std::unique_ptr<Sequence> seq;
  EventCallback on_event;
  ReservedCallback on_reserved;
  absl::Duration lease;
  PlacementTag placement;
};
// Engine::CompleteImport.
struct Import {
  ImportedPrefill prefill;
};
// Engine::AbortImport.
struct AbortImport {
  RequestId id = 0;
  absl::Status reason;
  bool writer_stopped = true;
};
// Engine::ReleaseExportedBlocks.
struct Release {
  RequestId id = 0;
};
// Engine::PauseForMigration.
struct Pause {
  RequestId id = 0;
};
// Engine::ResumePaused.
struct Resume {
  RequestId id = 0;
};
// Engine::ExportPaused.
struct ExportPaused {
  RequestId id = 0;
  std::shared_ptr<KvExporter> exporter;
};

}  // namespace engine_command

using EngineCommand =
    std::variant<engine_command::Submit, engine_command::Cancel, engine_command::Reserve,
                 engine_command::Import, engine_command::AbortImport, engine_command::Release,
                 engine_command::Pause, engine_command::Resume, engine_command::ExportPaused>;

}  // namespace tandem

#endif  // TANDEM_COMMON_ENGINE_ENGINE_COMMANDS_H_
