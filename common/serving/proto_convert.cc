#include "common/serving/proto_convert.h"

namespace tandem {

SamplingParams SamplingFromProto(const v1::SamplingParams& proto) {
  SamplingParams params;
  if (proto.has_temperature()) params.temperature = proto.temperature();
  if (proto.has_top_p()) params.top_p = proto.top_p();
  params.top_k = proto.top_k();
  params.min_p = proto.min_p();
  if (proto.has_seed()) params.seed = proto.seed();
  if (proto.has_repetition_penalty()) params.repetition_penalty = proto.repetition_penalty();
  params.presence_penalty = proto.presence_penalty();
  params.frequency_penalty = proto.frequency_penalty();
  if (proto.has_max_tokens()) params.max_tokens = proto.max_tokens();
  params.stop_token_ids.assign(proto.stop_token_ids().begin(), proto.stop_token_ids().end());
  params.ignore_eos = proto.ignore_eos();
  if (proto.has_logprobs()) params.logprobs = proto.logprobs();
  return params;
}

void SamplingToProto(const SamplingParams& params, v1::SamplingParams* proto) {
  proto->set_temperature(params.temperature);
  proto->set_top_p(params.top_p);
  proto->set_top_k(params.top_k);
  proto->set_min_p(params.min_p);
  if (params.seed.has_value()) proto->set_seed(*params.seed);
  proto->set_repetition_penalty(params.repetition_penalty);
  proto->set_presence_penalty(params.presence_penalty);
  proto->set_frequency_penalty(params.frequency_penalty);
  proto->set_max_tokens(params.max_tokens);
  proto->mutable_stop_token_ids()->Assign(params.stop_token_ids.begin(),
                                          params.stop_token_ids.end());
  proto->set_ignore_eos(params.ignore_eos);
  if (params.logprobs >= 0) proto->set_logprobs(params.logprobs);
}

void TokenToProto(const GenerationEvent& event, bool with_logprobs, v1::Token* proto) {
  proto->set_id(event.token);
  if (!with_logprobs) return;
  proto->set_logprob(event.logprob);
  for (const TokenLogprob& top : event.top_logprobs) {
    v1::TokenLogprob* entry = proto->add_top_logprobs();
    entry->set_token_id(top.token);
    entry->set_logprob(top.logprob);
  }
}

void UsageToProto(const Usage& usage, v1::Usage* proto) {
  proto->set_prompt_tokens(usage.prompt_tokens);
  proto->set_completion_tokens(usage.completion_tokens);
  proto->set_cached_tokens(usage.cached_tokens);
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace tandem
