#include "bench/serve/completion_stream.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace tandem::bench {
namespace {

using json = nlohmann::json;

bool NonEmptyString(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() && !it->get_ref<const std::string&>().empty();
}

std::optional<int32_t> OptInt(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int32_t>();
}

}  // namespace

void StreamRecorder::Content(absl::Time at, int tokens) {
  if (first_.has_value()) {
    itl_s_.push_back(absl::ToDoubleSeconds(at - last_));
  } else {
    first_ = at;
  }
  last_ = at;
  tokens_ += std::max(tokens, 1);
}

void StreamRecorder::Usage(int32_t prompt_tokens, int32_t completion_tokens) {
  usage_prompt_ = prompt_tokens;
  usage_completion_ = completion_tokens;
}

RequestResult StreamRecorder::Finish(absl::Time end, const BenchRequest& request) const {
  RequestResult r;
  r.success = true;
  r.ttft_s = first_.has_value() ? absl::ToDoubleSeconds(*first_ - sent_) : 0.0;
  r.e2e_s = absl::ToDoubleSeconds(end - sent_);
  r.itl_s = itl_s_;
  r.prompt_tokens = usage_prompt_.value_or(request.prompt_len);
  r.output_tokens = usage_completion_.value_or(static_cast<int32_t>(tokens_));
  return r;
}

absl::StatusOr<CompletionEvent> ParseCompletionEvent(std::string_view data) {
  CompletionEvent event;
  if (data == "[DONE]") {
    event.done = true;
    return event;
  }
  json doc = json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("stream event is not a JSON object: ", std::string(data.substr(0, 200))));
  }
  if (auto err = doc.find("error"); err != doc.end() && !err->is_null()) {
    event.error = err->is_object() && NonEmptyString(*err, "message")
                      ? (*err)["message"].get<std::string>()
                      : err->dump();
    if (event.error.empty()) event.error = "error event";
    return event;
  }
  if (auto usage = doc.find("usage"); usage != doc.end() && usage->is_object()) {
    event.prompt_tokens = OptInt(*usage, "prompt_tokens");
    event.completion_tokens = OptInt(*usage, "completion_tokens");
  }
  auto choices = doc.find("choices");
  if (choices == doc.end() || !choices->is_array() || choices->empty()) return event;
  const json& choice = (*choices)[0];
  if (!choice.is_object()) return event;
  int ids = 0;
  if (auto t = choice.find("token_ids"); t != choice.end() && t->is_array()) {
    ids = static_cast<int>(t->size());
  }
  bool text = NonEmptyString(choice, "text");
  if (auto delta = choice.find("delta"); delta != choice.end() && delta->is_object()) {
    text = text || NonEmptyString(*delta, "content");
  }
  auto finish = choice.find("finish_reason");
  const bool finished = finish != choice.end() && !finish->is_null();
  event.content = text || ids > 0 || !finished;
  if (event.content) event.tokens = std::max(ids, 1);
  return event;
}

absl::Status CompletionStreamReader::Feed(std::string_view bytes, absl::Time at) {
  events_.clear();
  parser_.Feed(bytes, &events_);
  for (const std::string& data : events_) {
    if (done_) continue;  // nothing counts after [DONE]
    absl::StatusOr<CompletionEvent> event = ParseCompletionEvent(data);
    if (!event.ok()) return event.status();
    if (!event->error.empty())
      return absl::InternalError(absl::StrCat("error event: ", event->error));
    if (event->done) {
      done_ = true;
      continue;
    }
    if (event->content) recorder_.Content(at, event->tokens);
    if (event->prompt_tokens.has_value() && event->completion_tokens.has_value()) {
      recorder_.Usage(*event->prompt_tokens, *event->completion_tokens);
    }
  }
  return absl::OkStatus();
}

RequestResult CompletionStreamReader::Finish(absl::Time end, const BenchRequest& request) const {
  if (!done_ || !recorder_.got_content()) {
    RequestResult r;
    r.error = !done_ ? "the stream ended before data: [DONE]" : "the stream carried no output";
    return r;
  }
  return recorder_.Finish(end, request);
}

}  // namespace tandem::bench
