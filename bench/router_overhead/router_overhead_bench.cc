// tandem-bench-router-overhead: what the router adds to a request, against a running colocated
// cluster (one decode node and a router in front of it). In one run, requests are sent at a fixed
// rate and interleaved across three paths to the same decode node, so all see the same load:
//   direct  DecodeNode.Generate on the decode node (gRPC)
//   grpc    the router's Generation.Generate (gRPC)
//   http    the router's POST /v1/completions, streamed (SSE); timed from the request's first
//           byte on a connected socket, as the gRPC paths use connected channels
//   relay   (with --relay) tandem-grpc-relay's Generation.Generate: a bare callback-API hop in
//           front of the same decode node, the floor any gRPC front end pays on this machine
// and the time to first token of each path is reported (p50/p90/p99 and the router's added
// latency against direct). A second phase opens many concurrent streams through each path in turn
// and reports the tokens per second the clients receive.
//
//   tandem-bench-router-overhead --decode ADDR --router ADDR --router-http ADDR [--relay ADDR]
//       [--rate 8] [--requests 300] [--prompt-tokens 64] [--max-tokens 8]
//       [--streams 64] [--stream-tokens 64] [--json out.json]
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/router_overhead/sse_client.h"
#include "common/util/cli_flags.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"
#include "tandem/v1/generate.grpc.pb.h"
#include "tandem/v1/node.grpc.pb.h"

namespace {

struct Options {
  std::string decode;
  std::string router;
  std::string router_http;
  std::string relay;  // "": no relay path
  double rate = 8;    // requests per second, all paths together
  int requests = 300;
  int prompt_tokens = 64;
  int max_tokens = 8;
  int streams = 64;
  int stream_tokens = 64;
  std::string model;  // "": the router's served model (the first of GET /v1/models)
  std::string json;
};

enum Path { kDirect = 0, kGrpc = 1, kHttp = 2, kRelay = 3 };
constexpr const char* kPathNames[] = {"direct", "grpc", "http", "relay"};

// The paths this run measures: the relay's only with --relay.
std::vector<Path> ActivePaths(const Options& o) {
  std::vector<Path> paths = {kDirect, kGrpc, kHttp};
  if (!o.relay.empty()) paths.push_back(kRelay);
  return paths;
}

struct Result {
  bool ok = false;
  double ttft_ms = 0;
  double total_ms = 0;
  int tokens = 0;
  std::string error;
};

std::vector<int> Prompt(int n, int salt) {
  std::vector<int> ids;
  for (int64_t i = 0; i < n; ++i) {
    ids.push_back(static_cast<int>(1000 + (i * 7919 + int64_t{salt} * 104729) % 20000));
  }
  return ids;
}

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

class Paths {
 public:
  explicit Paths(const Options& o) : o_(o) {
    decode_ = tandem::v1::DecodeNode::NewStub(
        grpc::CreateChannel(o.decode, grpc::InsecureChannelCredentials()));
    router_ = tandem::v1::Generation::NewStub(
        grpc::CreateChannel(o.router, grpc::InsecureChannelCredentials()));
    if (!o.relay.empty()) {
      relay_ = tandem::v1::Generation::NewStub(
          grpc::CreateChannel(o.relay, grpc::InsecureChannelCredentials()));
    }
  }

  Result Run(Path path, const std::vector<int>& prompt, int max_tokens, const std::string& id) {
    switch (path) {
      case kDirect:
        return Direct(prompt, max_tokens, id);
      case kGrpc:
        return Router(*router_, prompt, max_tokens, id);
      case kRelay:
        return Router(*relay_, prompt, max_tokens, id);
      case kHttp:
        return Http(prompt, max_tokens);
    }
    return {};
  }

 private:
  Result Direct(const std::vector<int>& prompt, int max_tokens, const std::string& id) {
    tandem::v1::NodeGenerateRequest req;
    req.mutable_prompt_token_ids()->Assign(prompt.begin(), prompt.end());
    Sampling(req.mutable_sampling(), max_tokens);
    req.set_request_id(id);
    grpc::ClientContext ctx;
    const absl::Time start = absl::Now();
    auto reader = decode_->Generate(&ctx, req);
    return ReadStream(*reader, start,
                      [](const tandem::v1::DecodeEvent& e) { return e.tokens_size(); });
  }

  // Generation.Generate on `stub`: the router's gRPC API, or the relay's.
  Result Router(tandem::v1::Generation::Stub& stub, const std::vector<int>& prompt, int max_tokens,
                const std::string& id) {
    tandem::v1::GenerateRequest req;
    req.mutable_token_ids()->mutable_ids()->Assign(prompt.begin(), prompt.end());
    Sampling(req.mutable_sampling(), max_tokens);
    req.set_request_id(id);
    grpc::ClientContext ctx;
    const absl::Time start = absl::Now();
    auto reader = stub.Generate(&ctx, req);
    return ReadStream(*reader, start,
                      [](const tandem::v1::GenerateResponse& r) { return r.tokens_size(); });
  }

  Result Http(const std::vector<int>& prompt, int max_tokens) {
    nlohmann::json body = {{"prompt", prompt}, {"max_tokens", max_tokens},
                           {"temperature", 0}, {"ignore_eos", true},
                           {"stream", true},   {"return_token_ids", true}};
    if (!o_.model.empty()) body["model"] = o_.model;
    Result r;
    absl::Time start = absl::Now();
    absl::Time first = absl::InfinitePast();
    int tokens = 0;
    absl::Status s = tandem::bench::PostSse(
        o_.router_http, "/v1/completions", body.dump(),
        [&](const std::string& data) {
          if (data == "[DONE]") return;
          nlohmann::json chunk = nlohmann::json::parse(data, nullptr, false);
          if (chunk.is_discarded() || !chunk.contains("choices") || chunk["choices"].empty()) {
            return;
          }
          // return_token_ids: each chunk names the tokens it carries.
          const auto& choice = chunk["choices"][0];
          const int n = choice.contains("token_ids") && choice["token_ids"].is_array()
                            ? static_cast<int>(choice["token_ids"].size())
                            : 0;
          if (n > 0 && tokens == 0) first = absl::Now();
          tokens += n;
        },
        &start);  // TTFT from the request's first byte: connection setup is left out
    r.total_ms = Ms(absl::Now() - start);
    if (!s.ok()) {
      r.error = std::string(s.message());
      return r;
    }
    r.ok = tokens > 0;
    r.tokens = tokens;
    r.ttft_ms = Ms(first - start);
    if (!r.ok) r.error = "no tokens in the stream";
    return r;
  }

  static void Sampling(tandem::v1::SamplingParams* s, int max_tokens) {
    s->set_temperature(0);
    s->set_max_tokens(max_tokens);
    s->set_ignore_eos(true);
  }

  template <typename Message, typename CountTokens>
  static Result ReadStream(grpc::ClientReader<Message>& reader, absl::Time start,
                           CountTokens count) {
    Result r;
    Message m;
    absl::Time first = absl::InfinitePast();
    while (reader.Read(&m)) {
      const int n = count(m);
      if (n > 0 && r.tokens == 0) first = absl::Now();
      r.tokens += n;
    }
    grpc::Status status = reader.Finish();
    r.total_ms = Ms(absl::Now() - start);
    if (!status.ok()) {
      r.error = status.error_message();
      return r;
    }
    r.ok = r.tokens > 0;
    r.ttft_ms = Ms(first - start);
    if (!r.ok) r.error = "no tokens in the stream";
    return r;
  }

  const Options& o_;
  std::unique_ptr<tandem::v1::DecodeNode::Stub> decode_;
  std::unique_ptr<tandem::v1::Generation::Stub> router_;
  std::unique_ptr<tandem::v1::Generation::Stub> relay_;
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = p / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(rank);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - static_cast<double>(lo));
}

struct TtftStats {
  std::vector<double> ttft_ms;
  int failed = 0;
  std::string first_error;
};

// Phase 1: requests at a fixed rate, taking the paths in turn, each on its own thread (open loop:
// a slow request does not delay the next one's start).
std::vector<TtftStats> MeasureTtft(const Options& o, Paths& paths) {
  const std::vector<Path> active = ActivePaths(o);
  std::vector<TtftStats> stats(4);
  absl::Mutex mu;
  std::vector<std::thread> threads;
  const absl::Duration interval = absl::Seconds(1.0 / o.rate);
  const absl::Time start = absl::Now();
  for (int i = 0; i < o.requests; ++i) {
    absl::SleepFor(start + interval * i - absl::Now());
    threads.emplace_back([&, i] {
      const Path path = active[static_cast<size_t>(i) % active.size()];
      Result r =
          paths.Run(path, Prompt(o.prompt_tokens, i), o.max_tokens, absl::StrCat("bench-ttft-", i));
      absl::MutexLock lock(&mu);
      if (r.ok) {
        stats[path].ttft_ms.push_back(r.ttft_ms);
      } else {
        if (stats[path].failed++ == 0) stats[path].first_error = r.error;
      }
    });
  }
  for (auto& t : threads) t.join();
  return stats;
}

struct StreamStats {
  double tokens_per_s = 0;
  double seconds = 0;
  int64_t tokens = 0;
  int failed = 0;
  std::string first_error;
};

// Phase 2: `streams` concurrent requests of `stream_tokens` each through one path.
StreamStats MeasureStreams(const Options& o, Paths& paths, Path path) {
  StreamStats s;
  absl::Mutex mu;
  std::vector<std::thread> threads;
  const absl::Time start = absl::Now();
  for (int i = 0; i < o.streams; ++i) {
    threads.emplace_back([&, i] {
      Result r = paths.Run(path, Prompt(16, 100000 + i + 1000 * path), o.stream_tokens,
                           absl::StrCat("bench-stream-", kPathNames[path], "-", i));
      absl::MutexLock lock(&mu);
      s.tokens += r.tokens;
      if (!r.ok && s.failed++ == 0) s.first_error = r.error;
    });
  }
  for (auto& t : threads) t.join();
  s.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  s.tokens_per_s = static_cast<double>(s.tokens) / s.seconds;
  return s;
}

constexpr char kIntro[] =
    R"(Usage: tandem-bench-router-overhead --decode ADDR --router ADDR --router-http ADDR [options]

Time to first token directly on a decode node, through the router's gRPC API and through its HTTP
API (and through tandem-grpc-relay with --relay), interleaved at a fixed rate; then tokens per
second of concurrent streams through each.
)";

// Declares every flag against `o` with its --help line.
void AddBenchFlags(tandem::FlagSet& flags, Options* o) {
  flags.String("decode", &o->decode, {"ADDR", "the decode node's gRPC address (required)"});
  flags.String("router", &o->router, {"ADDR", "the router's gRPC address (required)"});
  flags.String("router-http", &o->router_http, {"ADDR", "the router's HTTP address (required)"});
  flags.String("relay", &o->relay,
               {"ADDR",
                "also time tandem-grpc-relay in front of the same decode node: the floor "
                "of a gRPC hop (row relay)"});
  flags.Number("rate", &o->rate, {"R", "requests per second, all paths together (default 8)"});
  flags.Number("requests", &o->requests, {"N", "requests of the first phase (default 300)"});
  flags.Number("prompt-tokens", &o->prompt_tokens, {"N", "tokens per prompt (default 64)"});
  flags.Number("max-tokens", &o->max_tokens,
               {"N", "tokens per request of the first phase (default 8)"});
  flags.Number("streams", &o->streams,
               {"N", "concurrent streams per path in the second phase (default 64)"});
  flags.Number("stream-tokens", &o->stream_tokens, {"N", "tokens per stream (default 64)"});
  flags.String("model", &o->model,
               {"NAME", "model name (default: the first of the router's GET /v1/models)"});
  flags.String("json", &o->json, {"PATH", "write the results as JSON"});
}

// Checks the flags' values; "" when they are usable.
std::string ValidateOptions(const Options& o) {
  if (o.decode.empty() || o.router.empty() || o.router_http.empty()) {
    return "--decode, --router and --router-http are required";
  }
  if (o.rate <= 0 || o.requests < 3 || o.prompt_tokens < 1 || o.max_tokens < 1 || o.streams < 1 ||
      o.stream_tokens < 2) {
    return "--rate > 0, --requests >= 3, --prompt-tokens/--max-tokens/--streams >= 1, "
           "--stream-tokens >= 2";
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  tandem::FlagSet flags;
  AddBenchFlags(flags, &o);
  bool help = false;
  std::string error = flags.Parse(argc, argv, &help);
  if (help) {
    std::fputs(flags.Help(kIntro).c_str(), stdout);
    return 0;
  }
  if (error.empty()) error = ValidateOptions(o);
  if (!error.empty()) {
    std::fprintf(stderr, "tandem-bench-router-overhead: %s\n", error.c_str());
    return 2;
  }
  Paths paths(o);
  // Warm up every path (connections, first-request costs).
  for (int i = 0; i < 3; ++i) {
    for (Path p : ActivePaths(o)) {
      Result r = paths.Run(p, Prompt(o.prompt_tokens, 900000 + i), 2, absl::StrCat("warm-", p, i));
      if (!r.ok) {
        std::fprintf(stderr, "warm-up on %s failed: %s\n", kPathNames[p], r.error.c_str());
        return 1;
      }
    }
  }

  std::vector<TtftStats> ttft = MeasureTtft(o, paths);
  std::printf("TTFT at %.1f req/s (%d requests, %d prompt tokens, %d output tokens), ms\n", o.rate,
              o.requests, o.prompt_tokens, o.max_tokens);
  std::printf("%-8s %6s %8s %8s %8s %10s %10s\n", "path", "n", "p50", "p90", "p99", "+p50", "+p99");
  nlohmann::json out;
  out["rate"] = o.rate;
  out["requests"] = o.requests;
  out["prompt_tokens"] = o.prompt_tokens;
  out["max_tokens"] = o.max_tokens;
  const double direct_p50 = Percentile(ttft[kDirect].ttft_ms, 50);
  const double direct_p99 = Percentile(ttft[kDirect].ttft_ms, 99);
  for (Path p : ActivePaths(o)) {
    const auto& v = ttft[p].ttft_ms;
    const double p50 = Percentile(v, 50), p90 = Percentile(v, 90), p99 = Percentile(v, 99);
    std::printf("%-8s %6zu %8.2f %8.2f %8.2f %10.2f %10.2f\n", kPathNames[p], v.size(), p50, p90,
                p99, p50 - direct_p50, p99 - direct_p99);
    if (ttft[p].failed > 0) {
      std::printf("  %d failed, first: %s\n", ttft[p].failed, ttft[p].first_error.c_str());
    }
    out["ttft_ms"][kPathNames[p]] = {
        {"n", v.size()}, {"p50", p50}, {"p90", p90}, {"p99", p99}, {"failed", ttft[p].failed}};
    out["added_ms"][kPathNames[p]] = {{"p50", p50 - direct_p50}, {"p99", p99 - direct_p99}};
  }

  std::printf("\n%d concurrent streams of %d tokens\n", o.streams, o.stream_tokens);
  std::printf("%-8s %10s %10s %8s\n", "path", "tokens/s", "seconds", "failed");
  for (Path p : ActivePaths(o)) {
    StreamStats s = MeasureStreams(o, paths, p);
    std::printf("%-8s %10.1f %10.2f %8d\n", kPathNames[p], s.tokens_per_s, s.seconds, s.failed);
    if (s.failed > 0) std::printf("  first failure: %s\n", s.first_error.c_str());
    out["streams"][kPathNames[p]] = {{"streams", o.streams},
                                     {"tokens", s.tokens},
                                     {"seconds", s.seconds},
                                     {"tokens_per_s", s.tokens_per_s},
                                     {"failed", s.failed}};
  }
  if (!o.json.empty()) {
    std::ofstream(o.json) << out.dump(2) << "\n";
  }
  return 0;
}
