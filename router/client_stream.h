// The client side of one request, shared by its attempts: turns the decode node's events into
// responses for the client's ResponseSink (UTF-8-safe incremental text, stop strings, usage,
// the prompt ids on the first response), times the tokens (RouterMetrics), and reads a node's
// stream until it ends, the output stops or the client goes away.
#ifndef TANDEM_ROUTER_CLIENT_STREAM_H_
#define TANDEM_ROUTER_CLIENT_STREAM_H_

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "common/util/clock.h"
#include "grpcpp/grpcpp.h"
#include "router/attempt_verdict.h"
#include "router/node.h"
#include "router/node_client.h"
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

  enum class EventResult { kContinue, kFinished, kStopped, kClientGone };

  bool Write(v1::GenerateResponse& response) {
    // The client's own id is echoed when it sent one; otherwise the router's.
    response.set_request_id(request.client_request_id.empty() ? request.request_id
                                                              : request.client_request_id);
    if (!first_response_sent) {
      first_response_sent = true;
      response.mutable_prompt_token_ids()->Assign(request.prompt.begin(), request.prompt.end());
    }
    const bool written = sink->Write(response);
    if (response.tokens_size() > 0) {
      metrics->TokensWritten(*timer, response.tokens_size(), clock->Now());
    }
    if (!written) {
      client_gone = true;
      return false;
    }
    return true;
  }

  void SetUsage(v1::GenerateResponse& response) const {
    v1::Usage* usage = response.mutable_usage();
    usage->set_prompt_tokens(static_cast<int32_t>(request.prompt.size()));
    usage->set_completion_tokens(static_cast<int32_t>(completion_tokens));
    usage->set_cached_tokens(static_cast<int32_t>(cached_tokens));
  }

  // One event of a decode node's stream → at most one response to the client.
  EventResult OnEvent(const v1::DecodeEvent& event) {
    v1::GenerateResponse response;
    if (event.has_usage()) {
      cached_tokens = std::max<int64_t>(cached_tokens, event.usage().cached_tokens());
    }
    if (event.tokens_size() > 0) {
      std::vector<TokenId> ids;
      ids.reserve(event.tokens_size());
      for (const v1::Token& t : event.tokens()) ids.push_back(t.id());
      OutputText::Step step = output.Add(ids);
      for (size_t i = 0; i < step.tokens_used; ++i) *response.add_tokens() = event.tokens(i);
      completion_tokens += static_cast<int64_t>(step.tokens_used);
      if (step.tokens_used > 0) sent_tokens = true;
      response.set_text(std::move(step.text));
      if (step.stopped) {
        response.set_finish_reason("stop");
        SetUsage(response);
        finished = true;
        Write(response);
        return EventResult::kStopped;
      }
    }
    if (!event.finish_reason().empty()) {
      response.mutable_text()->append(output.Finish());
      response.set_finish_reason(output.stopped() ? "stop" : event.finish_reason());
      SetUsage(response);
      finished = true;
      Write(response);
      return EventResult::kFinished;
    }
    if (response.tokens_size() == 0 && response.text().empty()) return EventResult::kContinue;
    return Write(response) ? EventResult::kContinue : EventResult::kClientGone;
  }

  // Reads decode node `from`'s event stream until it ends, the output stops or the client goes
  // away; `on_first_token` runs when the first event with tokens arrives.
  template <typename OnFirstToken>
  StreamOutcome ReadFrom(DecodeEventReader* reader, grpc::ClientContext* ctx, Node& from,
                         OnFirstToken on_first_token) {
    StreamOutcome outcome;
    bool first_token = false;
    EventResult r = EventResult::kContinue;
    v1::DecodeEvent event;
    while (r == EventResult::kContinue && reader->Read(&event)) {
      from.NoteProgress(clock->Now());  // busy, not dead (node_pool.h)
      if (event.tokens_size() > 0 && !first_token) {
        first_token = true;
        on_first_token(event);
      }
      r = OnEvent(event);
    }
    if (r == EventResult::kStopped) {
      outcome.stopped = true;
      outcome.finished = true;
      ctx->TryCancel();
    } else if (r == EventResult::kClientGone) {
      ctx->TryCancel();
    } else if (r == EventResult::kFinished) {
      outcome.finished = true;
      // The node ends its stream right after the last event: drain it for Finish().
      while (reader->Read(&event)) {
      }
    }
    outcome.status = reader->Finish();
    return outcome;
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
};

}  // namespace tandem

#endif  // TANDEM_ROUTER_CLIENT_STREAM_H_
