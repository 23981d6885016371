// Turns a public GenerateRequest into what the router sends to nodes: validated prompt token ids
// (text tokenized, chat rendered with the model's template), sampling parameters with tandem's
// defaults filled in, stop strings and output options. Every problem with the input is an
// InvalidArgument naming the field.
#ifndef TANDEM_ROUTER_REQUEST_BUILDER_H_
#define TANDEM_ROUTER_REQUEST_BUILDER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/sampling/sampling_params.h"
#include "common/types/dtype.h"
#include "router/served_model.h"
#include "tandem/v1/generate.pb.h"
#include "tandem/v1/sampling.pb.h"

namespace tandem {

struct RouterRequest {
  // The router's own id, unique per request: node calls, Cancel RPCs and logs go by it. A client's
  // id need not be unique (two clients can send the same one), so it is never sent to a node.
  std::string request_id;
  std::string client_request_id;  // the client's request_id, "" if none: a label for its logs
  std::vector<TokenId> prompt;
  SamplingParams sampling;  // validated
  // What the nodes get: `sampling` with every default written out and a seed chosen when the
  // client gave none, so the prefill node (first token) and the decode node (the rest) draw from
  // one random stream, and a retry is the same request.
  v1::SamplingParams node_sampling;
  std::vector<std::string> stop;
  bool include_stop_str_in_output = false;
  bool skip_special_tokens = true;
};

// The proto's `optional` fields unset → SamplingParams' defaults (temperature 1, top_p 1,
// repetition_penalty 1, max_tokens 16, no logprobs, no seed). Not validated.
SamplingParams SamplingFromProto(const v1::SamplingParams& proto);
// Every field written, optionals included (seed and logprobs only when set).
v1::SamplingParams SamplingToProto(const SamplingParams& params);

// Validates and tokenizes. max_tokens unset is 16 clamped to the context left after the prompt
// (all of the context left when `unset_max_tokens_fills_context`); set, prompt + max_tokens must
// fit the model's context (vLLM's rule). NotFound for a model this router does not serve,
// InvalidArgument for anything else wrong with the request.
absl::StatusOr<RouterRequest> BuildRequest(const v1::GenerateRequest& request,
                                           const ServedModel& model,
                                           bool unset_max_tokens_fills_context = false);

// "req-" and 16 random hex digits.
std::string MakeRequestId();

}  // namespace tandem

#endif  // TANDEM_ROUTER_REQUEST_BUILDER_H_
