// tandem-bench-ttft: where one disaggregated request's time to first token goes, against running
// nodes: Reserve on a decode node, Prefill on a prefill node, first token on the decode stream.
// Reports queue, prefill compute, KV transfer (total and the part not hidden behind compute) and
// the decode node's admission of the first token, as a table and JSON.
//
//   tandem-bench-ttft --decode ADDR --prefill ADDR --prompt-tokens 4096 --repeats 5 --json out.json
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/util/cli_flags.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"
#include "tandem/v1/node.grpc.pb.h"

namespace {

struct Options {
  std::string decode;
  std::string prefill;
  int prompt_tokens = 4096;
  int repeats = 5;
  int first_token_id = 1000;
  std::string json;
  // The link's bandwidth (from tandem-bench-kv-transfer), to estimate what sending the KV after
  // the compute would have cost; 0: not given.
  double link_gb_s = 0;
};

struct Sample {
  double reserve_ms = 0;
  double queue_ms = 0;
  double compute_ms = 0;
  double transfer_ms = 0;
  double transfer_exposed_ms = 0;
  double first_token_ms = 0;   // Prefill answered -> first token read from the decode stream
  double second_token_ms = 0;  // first token -> second token (one decode step)
  double ttft_ms = 0;          // Reserve sent -> first token read
  double bytes = 0;
  int writes = 0;
};

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

bool RunOnce(const Options& o, tandem::v1::DecodeNode::Stub& decode,
             tandem::v1::PrefillNode::Stub& prefill, int salt, Sample* s, std::string* error) {
  tandem::v1::ReserveRequest reserve;
  // Distinct prompts: no prefix-cache hits between repeats.
  for (int i = 0; i < o.prompt_tokens; ++i) {
    reserve.add_prompt_token_ids(o.first_token_id + (i * 7919 + salt * 104729) % 100000);
  }
  reserve.mutable_sampling()->set_temperature(0);
  reserve.mutable_sampling()->set_max_tokens(2);
  reserve.mutable_sampling()->set_ignore_eos(true);
  const absl::Time start = absl::Now();
  grpc::ClientContext decode_context;
  auto stream = decode.Reserve(&decode_context, reserve);
  tandem::v1::DecodeEvent event;
  if (!stream->Read(&event) || !event.has_handoff()) {
    *error = "Reserve: " + stream->Finish().error_message();
    return false;
  }
  const absl::Time reserved = absl::Now();
  tandem::v1::PrefillRequest request;
  *request.mutable_prompt_token_ids() = reserve.prompt_token_ids();
  *request.mutable_sampling() = reserve.sampling();
  *request.mutable_handoff() = event.handoff();
  grpc::ClientContext prefill_context;
  tandem::v1::PrefillResponse response;
  grpc::Status status = prefill.Prefill(&prefill_context, request, &response);
  if (!status.ok()) {
    *error = "Prefill: " + status.error_message();
    return false;
  }
  const absl::Time prefilled = absl::Now();
  absl::Time first = absl::InfinitePast();
  absl::Time second = absl::InfinitePast();
  int tokens = 0;
  while (stream->Read(&event)) {
    for (int i = 0; i < event.tokens_size(); ++i) {
      ++tokens;
      if (tokens == 1) first = absl::Now();
      if (tokens == 2) second = absl::Now();
    }
  }
  status = stream->Finish();
  if (!status.ok() || tokens < 2) {
    *error = "decode stream: " + status.error_message();
    return false;
  }
  const tandem::v1::PrefillTimings& t = response.timings();
  s->reserve_ms = Ms(reserved - start);
  s->queue_ms = t.queue_us() / 1000.0;
  s->compute_ms = t.compute_us() / 1000.0;
  s->transfer_ms = t.transfer_us() / 1000.0;
  s->transfer_exposed_ms = t.transfer_exposed_us() / 1000.0;
  s->first_token_ms = Ms(first - prefilled);
  s->second_token_ms = Ms(second - first);
  s->ttft_ms = Ms(first - start);
  s->bytes = static_cast<double>(response.bytes_transferred());
  s->writes = response.num_writes();
  return true;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  tandem::FlagSet flags;
  flags.String("decode", &o.decode, {"ADDR", "the decode node's gRPC address (required)"});
  flags.String("prefill", &o.prefill, {"ADDR", "the prefill node's gRPC address (required)"});
  flags.Number("prompt-tokens", &o.prompt_tokens, {"N", "tokens per prompt (default 4096)"});
  flags.Number("repeats", &o.repeats,
               {"R", "timed requests, after one that warms up and is dropped (default 5)"});
  flags.String("json", &o.json, {"FILE", "write the results as JSON"});
  flags.Number("link-gb-s", &o.link_gb_s,
               {"X",
                "the link's bandwidth in GB/s (from tandem-bench-kv-transfer), to estimate what "
                "sending the KV after the compute would cost (default: not given)"});
  bool help = false;
  std::string error = flags.Parse(argc, argv, &help);
  if (help) {
    std::fputs(flags
                   .Help("Usage: tandem-bench-ttft --decode ADDR --prefill ADDR [options]\n\n"
                         "Where one disaggregated request's time to first token goes: Reserve, "
                         "queue, prefill\ncompute, KV transfer and the first token's admission "
                         "on the decode node.\n")
                   .c_str(),
               stdout);
    return 0;
  }
  if (error.empty() && (o.decode.empty() || o.prefill.empty())) {
    error = "--decode and --prefill are required";
  }
  if (!error.empty()) {
    std::fprintf(stderr, "tandem-bench-ttft: %s\n", error.c_str());
    return 2;
  }
  auto decode = tandem::v1::DecodeNode::NewStub(
      grpc::CreateChannel(o.decode, grpc::InsecureChannelCredentials()));
  auto prefill = tandem::v1::PrefillNode::NewStub(
      grpc::CreateChannel(o.prefill, grpc::InsecureChannelCredentials()));
  std::vector<Sample> samples;
  for (int r = 0; r < o.repeats + 1; ++r) {  // the first run warms up and is dropped
    Sample s;
    if (!RunOnce(o, *decode, *prefill, r, &s, &error)) {
      std::fprintf(stderr, "tandem-bench-ttft: %s\n", error.c_str());
      return 1;
    }
    if (r > 0) samples.push_back(s);
  }
  auto median = [&](double Sample::*field) {
    std::vector<double> v;
    for (const Sample& s : samples) v.push_back(s.*field);
    return Median(v);
  };
  const double transfer = median(&Sample::transfer_ms);
  const double exposed = median(&Sample::transfer_exposed_ms);
  // Sending the whole KV after the compute would cost bytes / bandwidth; what shows is `exposed`.
  const double serial_ms =
      o.link_gb_s > 0 ? samples.front().bytes / (o.link_gb_s * 1e9) * 1e3 : 0.0;
  const double hidden = serial_ms > 0 ? std::max(0.0, 1.0 - exposed / serial_ms) : -1.0;
  std::printf("TTFT breakdown, prompt of %d tokens, median of %d runs\n", o.prompt_tokens,
              o.repeats);
  std::printf("| part | ms |\n|---|---|\n");
  std::printf("| reserve (router->decode, blocks + handoff) | %.2f |\n",
              median(&Sample::reserve_ms));
  std::printf("| prefill queue | %.2f |\n", median(&Sample::queue_ms));
  std::printf("| prefill compute | %.2f |\n", median(&Sample::compute_ms));
  std::printf("| first KV write -> completion sent (spans the compute) | %.2f |\n", transfer);
  std::printf("| KV transfer, exposed (after the first token) | %.2f |\n", exposed);
  std::printf("| completion -> first token at the client | %.2f |\n",
              median(&Sample::first_token_ms));
  std::printf("| TTFT (client) | %.2f |\n", median(&Sample::ttft_ms));
  std::printf("| first decode step (token 1 -> 2) | %.2f |\n", median(&Sample::second_token_ms));
  std::printf("KV: %.1f MiB in %d writes", samples.front().bytes / (1 << 20),
              samples.front().writes);
  if (serial_ms > 0) {
    std::printf("; sent after the compute it would take %.1f ms at %.2f GB/s: %.1f%% hidden",
                serial_ms, o.link_gb_s, hidden * 100);
  }
  std::printf("\n");
  if (!o.json.empty()) {
    nlohmann::json j = {{"prompt_tokens", o.prompt_tokens},
                        {"repeats", o.repeats},
                        {"reserve_ms", median(&Sample::reserve_ms)},
                        {"queue_ms", median(&Sample::queue_ms)},
                        {"compute_ms", median(&Sample::compute_ms)},
                        {"transfer_ms", transfer},
                        {"transfer_exposed_ms", exposed},
                        {"link_gb_s", o.link_gb_s},
                        {"serial_transfer_estimate_ms", serial_ms},
                        {"transfer_hidden_fraction", hidden},
                        {"completion_to_first_token_ms", median(&Sample::first_token_ms)},
                        {"ttft_ms", median(&Sample::ttft_ms)},
                        {"first_decode_step_ms", median(&Sample::second_token_ms)},
                        {"bytes", samples.front().bytes},
                        {"writes", samples.front().writes}};
    std::ofstream(o.json) << j.dump(2) << "\n";
  }
  return 0;
}
