#include "router/request_builder.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/tokenizer/chat_template.h"
#include "common/util/status_macros.h"

namespace tandem {
namespace {

uint64_t RandomU64() {
  thread_local std::mt19937_64 rng{[] {
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ device();
  }()};
  return rng();
}

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

// Tokenizes prompt text, giving up as soon as it cannot fit the context with room for one
// output token: a prompt far larger than the context costs no more than one that fills it.
absl::StatusOr<std::vector<TokenId>> EncodePrompt(const std::string& text, bool add_special,
                                                  const ServedModel& model) {
  const int64_t context = model.max_context_tokens();
  auto ids = model.tokenizer->EncodeBounded(text, add_special,
                                            static_cast<size_t>(std::max<int64_t>(context - 1, 0)));
  if (!ids.has_value()) {
    return Invalid(absl::StrCat("the prompt has at least ", context,
                                " tokens; the model's context is ", context,
                                " tokens, which leaves no room for output"));
  }
  return *std::move(ids);
}

absl::StatusOr<std::vector<TokenId>> TokenizeChat(const v1::ChatMessages& chat,
                                                  const ServedModel& model) {
  if (chat.messages().empty()) return Invalid("prompt chat.messages is empty");
  if (!model.chat_template.has_value()) {
    return Invalid(absl::StrCat("model \"", model.name,
                                "\" has no chat template; send text or token_ids instead"));
  }
  ChatTemplateInputs inputs;
  for (int i = 0; i < chat.messages_size(); ++i) {
    const v1::ChatMessage& m = chat.messages(i);
    if (m.role().empty()) return Invalid(absl::StrCat("chat.messages[", i, "].role is empty"));
    inputs.messages.push_back(ChatMessage{.role = m.role(), .content = m.content()});
  }
  inputs.add_generation_prompt = true;
  if (model.tokenizer_config.has_value()) {
    inputs.bos_token = model.tokenizer_config->bos_token.value_or("");
    inputs.eos_token = model.tokenizer_config->eos_token.value_or("");
  }
  auto rendered = model.chat_template->Render(inputs);
  if (!rendered.ok()) {
    return Invalid(absl::StrCat("chat template: ", rendered.status().message()));
  }
  // The template writes BOS itself; the post-processor must not add a second one.
  return EncodePrompt(*rendered, /*add_special=*/false, model);
}

absl::StatusOr<std::vector<TokenId>> Tokenize(const v1::GenerateRequest& request,
                                              const ServedModel& model) {
  switch (request.prompt_case()) {
    case v1::GenerateRequest::kText: {
      if (request.text().empty()) return Invalid("prompt text is empty");
      const bool add_special =
          request.has_add_special_tokens() ? request.add_special_tokens() : true;
      return EncodePrompt(request.text(), add_special, model);
    }
    case v1::GenerateRequest::kTokenIds: {
      const auto& ids = request.token_ids().ids();
      if (ids.empty()) return Invalid("prompt token_ids.ids is empty");
      for (int i = 0; i < ids.size(); ++i) {
        if (ids[i] < 0 || ids[i] >= model.vocab_size()) {
          return Invalid(absl::StrCat("prompt token_ids.ids[", i, "] = ", ids[i],
                                      " is outside the vocabulary [0, ", model.vocab_size(), ")"));
        }
      }
      return std::vector<TokenId>(ids.begin(), ids.end());
    }
    case v1::GenerateRequest::kChat:
      return TokenizeChat(request.chat(), model);
    case v1::GenerateRequest::PROMPT_NOT_SET:
      break;
  }
  return Invalid("no prompt: set one of text, token_ids or chat");
}

}  // namespace

SamplingParams SamplingFromProto(const v1::SamplingParams& proto) {
  SamplingParams p;
  if (proto.has_temperature()) p.temperature = proto.temperature();
  if (proto.has_top_p()) p.top_p = proto.top_p();
  p.top_k = proto.top_k();
  p.min_p = proto.min_p();
  if (proto.has_seed()) p.seed = proto.seed();
  if (proto.has_repetition_penalty()) p.repetition_penalty = proto.repetition_penalty();
  p.presence_penalty = proto.presence_penalty();
  p.frequency_penalty = proto.frequency_penalty();
  if (proto.has_max_tokens()) p.max_tokens = proto.max_tokens();
  p.stop_token_ids.assign(proto.stop_token_ids().begin(), proto.stop_token_ids().end());
  p.ignore_eos = proto.ignore_eos();
  if (proto.has_logprobs()) p.logprobs = proto.logprobs();
  return p;
}

v1::SamplingParams SamplingToProto(const SamplingParams& p) {
  v1::SamplingParams proto;
  proto.set_temperature(p.temperature);
  proto.set_top_p(p.top_p);
  proto.set_top_k(p.top_k);
  proto.set_min_p(p.min_p);
  if (p.seed.has_value()) proto.set_seed(*p.seed);
  proto.set_repetition_penalty(p.repetition_penalty);
  proto.set_presence_penalty(p.presence_penalty);
  proto.set_frequency_penalty(p.frequency_penalty);
  proto.set_max_tokens(p.max_tokens);
  for (TokenId id : p.stop_token_ids) proto.add_stop_token_ids(id);
  proto.set_ignore_eos(p.ignore_eos);
  if (p.logprobs >= 0) proto.set_logprobs(p.logprobs);
  return proto;
}

std::string MakeRequestId() { return absl::StrFormat("req-%016x", RandomU64()); }

absl::StatusOr<RouterRequest> BuildRequest(const v1::GenerateRequest& request,
                                           const ServedModel& model,
                                           bool unset_max_tokens_fills_context) {
  if (!request.model().empty() && request.model() != model.name) {
    return absl::NotFoundError(absl::StrCat("model \"", request.model(),
                                            "\" is not served here; this router serves \"",
                                            model.name, "\""));
  }
  RouterRequest out;
  out.request_id = MakeRequestId();
  out.client_request_id = request.request_id();

  out.sampling = SamplingFromProto(request.sampling());
  if (absl::Status s = out.sampling.Validate(model.vocab_size()); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("sampling: ", s.message()));
  }
  for (int i = 0; i < request.stop_size(); ++i) {
    if (request.stop(i).empty()) return Invalid(absl::StrCat("stop[", i, "] is empty"));
    out.stop.push_back(request.stop(i));
  }
  out.include_stop_str_in_output = request.include_stop_str_in_output();
  out.skip_special_tokens =
      request.has_skip_special_tokens() ? request.skip_special_tokens() : true;

  ASSIGN_OR_RETURN(out.prompt, Tokenize(request, model));
  if (out.prompt.empty()) return Invalid("the prompt is empty after tokenization");
  const int64_t prompt_tokens = static_cast<int64_t>(out.prompt.size());
  const int64_t context = model.max_context_tokens();
  if (prompt_tokens >= context) {
    return Invalid(absl::StrCat("the prompt has ", prompt_tokens,
                                " tokens; the model's context is ", context,
                                " tokens, which leaves no room for output"));
  }
  if (request.sampling().has_max_tokens()) {
    if (prompt_tokens + out.sampling.max_tokens > context) {
      return Invalid(absl::StrCat("the model's context is ", context, " tokens, but ",
                                  prompt_tokens + out.sampling.max_tokens, " were requested (",
                                  prompt_tokens, " in the prompt, ", out.sampling.max_tokens,
                                  " in sampling.max_tokens)"));
    }
  } else if (unset_max_tokens_fills_context) {
    out.sampling.max_tokens = static_cast<int32_t>(context - prompt_tokens);
  } else {
    out.sampling.max_tokens =
        static_cast<int32_t>(std::min<int64_t>(out.sampling.max_tokens, context - prompt_tokens));
  }

  out.node_sampling = SamplingToProto(out.sampling);
  if (!out.sampling.seed.has_value()) out.node_sampling.set_seed(RandomU64());
  return out;
}

}  // namespace tandem
