// The client side of one request, shared by its attempts: turns the decode node's events into
// responses for the client's ResponseSink (UTF-8-safe incremental text, stop strings, usage,
// the prompt ids on the first response) and times the tokens written (RouterMetrics). It does no
// I/O: the request's flow (request_flow.h) reads the node and writes the client.
#ifndef TANDEM_ROUTER_CLIENT_STREAM_H_
#define TANDEM_ROUTER_CLIENT_STREAM_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "common/util/clock.h"
#include "router/output_text.h"
#include "router/request_builder.h"
#include "router/response_sink.h"
#include "router/router_metrics.h"
#include "tandem/v1/generate.pb.h"
#include "tandem/v1/node.pb.h"

namespace tandem {

// The client side of one request, shared by its attempts.
struct ClientStream {
  ClientStream(ResponseSink* s, const RouterRequest& r, const Tokenizer& tokenizer, RequestTimer* t,
               RouterMetrics* m, Clock* c)
      : sink(s),
        request(r),
        output(tokenizer, r.skip_special_tokens, r.stop, r.include_stop_str_in_output),
        timer(t),
        metrics(m),
        clock(c) {}

  // The client's own id is echoed when it sent one, otherwise the router's; the first response
  // carries the prompt's ids.
  v1::GenerateResponse Stamped(v1::GenerateResponse response) {
    response.set_request_id(request.client_request_id.empty() ? request.request_id
                                                              : request.client_request_id);
    if (!first_response_sent) {
      first_response_sent = true;
      response.mutable_prompt_token_ids()->Assign(request.prompt.begin(), request.prompt.end());
    }
    return response;
  }

  void SetUsage(v1::GenerateResponse& response) const {
    v1::Usage* usage = response.mutable_usage();
    usage->set_prompt_tokens(static_cast<int32_t>(request.prompt.size()));
    usage->set_completion_tokens(static_cast<int32_t>(completion_tokens));
    usage->set_cached_tokens(static_cast<int32_t>(cached_tokens));
  }

  // What one decode event means for the client.
  enum class EventResult {
    kContinue,  // more to come
    kFinished,  // the last response (finish_reason set); the node ends its stream next
    kStopped,   // a stop string ended the output; the node's stream is to be cancelled
  };
  struct EventStep {
    EventResult result = EventResult::kContinue;
    std::optional<v1::GenerateResponse> response;  // to write to the client, stamped
  };

  // One event of a decode node's stream → at most one response for the client. No I/O.
  EventStep OnEvent(const v1::DecodeEvent& event) {
    EventStep step;
    v1::GenerateResponse response;
    if (event.has_usage()) {
      cached_tokens = std::max<int64_t>(cached_tokens, event.usage().cached_tokens());
    }
    if (event.tokens_size() > 0) {
      std::vector<TokenId> ids;
      ids.reserve(event.tokens_size());
      for (const v1::Token& t : event.tokens()) ids.push_back(t.id());
      OutputText::Step text = output.Add(ids);
      for (size_t i = 0; i < text.tokens_used; ++i) {
        *response.add_tokens() = event.tokens(i);
        output_ids.push_back(ids[i]);
      }
      rng_counter = event.rng_counter();
      completion_tokens += static_cast<int64_t>(text.tokens_used);
      if (text.tokens_used > 0) sent_tokens = true;
      response.set_text(std::move(text.text));
      if (text.stopped) {
        response.set_finish_reason("stop");
        SetUsage(response);
        finished = true;
        step.result = EventResult::kStopped;
        step.response = Stamped(std::move(response));
        return step;
      }
    }
    if (!event.finish_reason().empty()) {
      response.mutable_text()->append(output.Finish());
      response.set_finish_reason(output.stopped() ? "stop" : event.finish_reason());
      SetUsage(response);
      finished = true;
      step.result = EventResult::kFinished;
      step.response = Stamped(std::move(response));
      return step;
    }
    if (response.tokens_size() > 0 || !response.text().empty()) {
      step.response = Stamped(std::move(response));
    }
    return step;
  }

  // A response OnEvent made, with `tokens` tokens, was written (`ok`), or the client is gone.
  void Written(int tokens, bool ok) {
    if (tokens > 0) {
      metrics->TokensWritten(*timer, tokens, clock->Now());
    }
    if (!ok) client_gone = true;
  }

  ResponseSink* const sink;
  const RouterRequest& request;
  OutputText output;
  RequestTimer* const timer;
  RouterMetrics* const metrics;
  Clock* const clock;  // the runner's: token timestamps
  bool first_response_sent = false;
  bool sent_tokens = false;  // a token went (or was being written) to the client
  bool finished = false;     // the last response (finish_reason set) was written
  bool client_gone = false;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
  // Every output token so far, in order, and the node's sampler draws after the last of them:
  // where a migrated request resumes (NodeGenerateRequest.resumed_*).
  std::vector<TokenId> output_ids;
  uint64_t rng_counter = 0;
};

}  // namespace tandem

#endif  // TANDEM_ROUTER_CLIENT_STREAM_H_
