// tandem-generate's work: load a model directory, run every prompt through the batching engine
// concurrently, and write one JSON line per prompt in input order.
#ifndef TANDEM_TOOLS_GENERATE_GENERATE_RUNNER_H_
#define TANDEM_TOOLS_GENERATE_GENERATE_RUNNER_H_

#include <ostream>

#include "absl/status/status.h"
#include "tools/generate/generate_options.h"

namespace tandem {

// Each output line: {"index", "prompt_token_ids", "token_ids", "text", "finish_reason",
// "usage": {"prompt_tokens", "completion_tokens", "cached_tokens"}} plus "prompt" for text
// prompts and "logprobs" when asked. A request that fails inside the engine gets "error" instead
// of a finish; the run then returns that error after writing every line.
absl::Status RunGenerate(const GenerateOptions& options, std::ostream& out);

}  // namespace tandem

#endif  // TANDEM_TOOLS_GENERATE_GENERATE_RUNNER_H_
