// What tandem-bench sends (one BenchRequest per request of a dataset) and what it measured of
// each (RequestResult). Plain structs shared by datasets, clients, the load runner and reports.
#ifndef TANDEM_BENCH_SERVE_BENCH_REQUEST_H_
#define TANDEM_BENCH_SERVE_BENCH_REQUEST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tandem::bench {

// A trace line's prompt, described instead of built (TraceOptions::defer_prompt_ids):
// TracePromptIds (datasets.h) builds the very ids LoadTrace would have, when the request is sent,
// so that a long trace holds only the prompts in flight (tandem-sim's hour of 1,000 GPUs).
struct DeferredTracePrompt {
  std::vector<uint64_t> hash_ids;
  int line = 0;  // the trace line, which seeds the tokens past the blocks
  uint64_t seed = 0;
  int32_t hash_block_tokens = 512;
  int32_t token_id_min = 0;
  int32_t token_id_max = 0;
};

struct BenchRequest {
  // The prompt: token ids when not empty (sent as an array of ids, exact length), else text.
  std::vector<int32_t> prompt_ids;
  std::string prompt_text;
  int32_t prompt_len = 0;  // tokens: prompt_ids.size(), or the tokenizer's count of the text
  int32_t output_len = 0;  // sent as max_tokens with ignore_eos, so the server makes exactly this
  // Trace datasets: when the request is sent, in seconds from the start of the run.
  std::optional<double> timestamp_s;
  // Set instead of prompt_ids by a trace loaded with deferred prompts.
  std::optional<DeferredTracePrompt> deferred_prompt;
};

struct RequestResult {
  bool success = false;
  std::string error;          // why it failed (HTTP status and body, gRPC status, ...)
  int32_t http_status = 0;    // the HTTP response's status; 0: none arrived, or the gRPC API
  int32_t grpc_code = 0;      // the gRPC API: the call's status code (0: OK, or the HTTP API)
  double start_s = 0;         // when it was sent, seconds from the start of the run
  double ttft_s = 0;          // sent → first token received
  double e2e_s = 0;           // sent → last byte of the response received
  std::vector<double> itl_s;  // gaps between consecutive streamed chunks after the first
  int32_t prompt_tokens = 0;  // as the server counted them (usage), else the request's
  int32_t output_tokens = 0;  // as the server counted them (usage), else chunks received
  // gRPC API with ClientOptions::record_tokens only (tandem-chaos checks them): every token id
  // streamed, in order, and the last response's finish_reason; kept on failures too.
  std::vector<int32_t> token_ids;
  std::string finish_reason;
  // Where its last attempt ran, as tandem-sim names the nodes ("prefill-0", "decode-1"; no
  // prefill node for a prompt computed where it decodes): written by tandem-sim, which knows;
  // empty from the real cluster, whose router logs it instead (tools/sim/placements.py).
  std::string prefill_node;
  std::string decode_node;
};

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_SERVE_BENCH_REQUEST_H_
