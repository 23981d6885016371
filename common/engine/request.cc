#include "common/engine/request.h"

namespace tandem {

std::string_view FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone:
      return "";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAborted:
      return "abort";
    case FinishReason::kError:
      return "error";
    case FinishReason::kPrefillDone:
      return "prefill_done";
  }
  return "?";
}

}  // namespace tandem
