#include "bench/serve/http_bench_client.h"

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench/serve/completion_stream.h"
#include "bench/serve/deadline_stream.h"

namespace tandem::bench {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using SteadyTime = std::chrono::steady_clock::time_point;
using json = nlohmann::json;

// Error bodies are cut to this in failure messages.
constexpr size_t kMaxErrorBody = 2000;

// One kept-alive connection and what has been read from it beyond the last response.
struct Connection {
  explicit Connection(asio::io_context& io) : stream(io) {}
  DeadlineStream stream;
  beast::flat_buffer buffer;
};

// HOST:PORT (HOST may be [v6]).
absl::StatusOr<std::pair<std::string, std::string>> SplitHostPort(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    return absl::InvalidArgumentError(absl::StrCat("address '", address, "' is not HOST:PORT"));
  }
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return std::make_pair(host, address.substr(colon + 1));
}

class HttpBenchClient final : public BenchClient {
 public:
  HttpBenchClient(ClientOptions options, std::vector<tcp::endpoint> endpoints)
      : options_(std::move(options)), endpoints_(std::move(endpoints)) {}

  RequestResult Send(const BenchRequest& request) override;

  // GET `target`: the status and body.
  absl::StatusOr<std::pair<int, std::string>> Get(const std::string& target);

  void set_model(std::string model) { options_.model = std::move(model); }

 private:
  SteadyTime Deadline() const {
    return std::chrono::steady_clock::now() +
           std::chrono::nanoseconds(absl::ToInt64Nanoseconds(options_.timeout));
  }
  // A new connection (error: why not).
  absl::StatusOr<std::unique_ptr<Connection>> Connect(SteadyTime deadline);
  // An idle connection, or null.
  std::unique_ptr<Connection> TakeIdle();
  void ReturnIdle(std::unique_ptr<Connection> c);
  http::request<http::string_body> MakeRequest(http::verb verb, const std::string& target,
                                               std::string body) const;

  ClientOptions options_;
  const std::vector<tcp::endpoint> endpoints_;
  asio::io_context io_;  // owns the sockets' registrations; never run
  absl::Mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<std::unique_ptr<Connection>> HttpBenchClient::Connect(SteadyTime deadline) {
  auto c = std::make_unique<Connection>(io_);
  c->stream.set_deadline(deadline);
  beast::error_code ec = c->stream.Connect(endpoints_);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("connect to ", options_.address, ": ", ec.message()));
  }
  c->stream.socket().set_option(tcp::no_delay(true), ec);
  return c;
}

std::unique_ptr<Connection> HttpBenchClient::TakeIdle() {
  absl::MutexLock lock(&mu_);
  if (idle_.empty()) return nullptr;
  std::unique_ptr<Connection> c = std::move(idle_.back());
  idle_.pop_back();
  return c;
}

void HttpBenchClient::ReturnIdle(std::unique_ptr<Connection> c) {
  c->buffer.clear();
  absl::MutexLock lock(&mu_);
  idle_.push_back(std::move(c));
}

http::request<http::string_body> HttpBenchClient::MakeRequest(http::verb verb,
                                                              const std::string& target,
                                                              std::string body) const {
  http::request<http::string_body> req(verb, target, 11);
  req.set(http::field::host, options_.address);
  req.set(http::field::user_agent, "tandem-bench");
  if (!options_.api_key.empty()) {
    req.set(http::field::authorization, absl::StrCat("Bearer ", options_.api_key));
  }
  if (verb == http::verb::post) {
    req.set(http::field::content_type, "application/json");
    req.set(http::field::accept, "text/event-stream");
    req.body() = std::move(body);
  }
  req.keep_alive(true);
  req.prepare_payload();
  return req;
}

RequestResult HttpBenchClient::Send(const BenchRequest& request) {
  const std::string body =
      CompletionsRequestBody(request, options_.model, options_.temperature).dump();
  const absl::Time sent = absl::Now();
  const SteadyTime deadline = Deadline();
  auto fail = [&](std::string error) {
    RequestResult r;
    r.error = std::move(error);
    r.e2e_s = absl::ToDoubleSeconds(absl::Now() - sent);
    return r;
  };
  const http::request<http::string_body> req =
      MakeRequest(http::verb::post, "/v1/completions", body);

  // A reused connection may have been closed by the server while idle: when it fails before any
  // response arrives, the request goes again on a new connection (once).
  std::unique_ptr<Connection> c = TakeIdle();
  std::optional<http::response_parser<http::buffer_body>> parser;
  for (int attempt = 0;; ++attempt) {
    const bool reused = c != nullptr;
    if (c == nullptr) {
      absl::StatusOr<std::unique_ptr<Connection>> fresh = Connect(deadline);
      if (!fresh.ok()) return fail(std::string(fresh.status().message()));
      c = *std::move(fresh);
    }
    c->stream.set_deadline(deadline);
    beast::error_code ec;
    http::write(c->stream, req, ec);
    if (!ec) {
      parser.emplace();
      // Not boost::none: Boost 1.74 compares a Content-Length against an empty limit as exceeded.
      parser->body_limit(std::numeric_limits<std::uint64_t>::max());
      http::read_header(c->stream, c->buffer, *parser, ec);
    }
    if (!ec) break;
    c.reset();
    if (!reused || attempt > 0 || ec == beast::error::timeout) {
      return fail(absl::StrCat("HTTP request to ", options_.address, ": ", ec.message()));
    }
  }

  const int status = parser->get().result_int();
  auto fail_with_status = [&](std::string error) {
    RequestResult r = fail(std::move(error));
    r.http_status = status;
    return r;
  };
  CompletionStreamReader reader(sent);
  std::string error_body;
  char chunk[16384];
  while (!parser->is_done()) {
    parser->get().body().data = chunk;
    parser->get().body().size = sizeof(chunk);
    beast::error_code ec;
    http::read_some(c->stream, c->buffer, *parser, ec);
    if (ec == http::error::need_buffer) ec = {};
    if (ec) {
      return fail_with_status(status == 200 ? absl::StrCat("reading the stream: ", ec.message())
                                            : absl::StrCat("HTTP ", status, ": ", error_body));
    }
    const size_t n = sizeof(chunk) - parser->get().body().size;
    if (status != 200) {
      error_body.append(chunk,
                        std::min(n, kMaxErrorBody - std::min(kMaxErrorBody, error_body.size())));
      continue;
    }
    absl::Status fed = reader.Feed(std::string_view(chunk, n), absl::Now());
    if (!fed.ok()) return fail_with_status(std::string(fed.message()));  // connection dropped
  }
  const absl::Time end = absl::Now();
  if (parser->keep_alive()) ReturnIdle(std::move(c));
  if (status != 200) return fail_with_status(absl::StrCat("HTTP ", status, ": ", error_body));
  RequestResult r = reader.Finish(end, request);
  if (!r.success) r.e2e_s = absl::ToDoubleSeconds(end - sent);
  r.http_status = status;
  return r;
}

absl::StatusOr<std::pair<int, std::string>> HttpBenchClient::Get(const std::string& target) {
  const SteadyTime deadline = Deadline();
  absl::StatusOr<std::unique_ptr<Connection>> c = Connect(deadline);
  if (!c.ok()) return c.status();
  Connection& conn = **c;
  const http::request<http::string_body> req = MakeRequest(http::verb::get, target, "");
  beast::error_code ec;
  http::write(conn.stream, req, ec);
  http::response<http::string_body> response;
  if (!ec) http::read(conn.stream, conn.buffer, response, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("GET ", target, " from ", options_.address, ": ", ec.message()));
  }
  return std::make_pair(static_cast<int>(response.result_int()), std::move(response.body()));
}

// The first model GET /v1/models lists.
absl::StatusOr<std::string> AskModel(HttpBenchClient& client, const std::string& address) {
  absl::StatusOr<std::pair<int, std::string>> got = client.Get("/v1/models");
  if (!got.ok()) return got.status();
  if (got->first != 200) {
    return absl::FailedPreconditionError(absl::StrCat("GET /v1/models from ", address, ": HTTP ",
                                                      got->first, ": ",
                                                      got->second.substr(0, kMaxErrorBody)));
  }
  json doc = json::parse(got->second, nullptr, /*allow_exceptions=*/false);
  if (doc.is_object() && doc.contains("data") && doc["data"].is_array() && !doc["data"].empty() &&
      doc["data"][0].is_object() && doc["data"][0].contains("id") &&
      doc["data"][0]["id"].is_string()) {
    return doc["data"][0]["id"].get<std::string>();
  }
  return absl::FailedPreconditionError(
      absl::StrCat("GET /v1/models from ", address,
                   " lists no model (pass --model): ", got->second.substr(0, kMaxErrorBody)));
}

}  // namespace

json CompletionsRequestBody(const BenchRequest& request, const std::string& model,
                            const std::optional<float>& temperature) {
  json body = json::object();
  if (!model.empty()) body["model"] = model;
  if (!request.prompt_ids.empty()) {
    body["prompt"] = request.prompt_ids;
  } else {
    body["prompt"] = request.prompt_text;
  }
  body["max_tokens"] = request.output_len;
  body["ignore_eos"] = true;
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  if (temperature.has_value()) body["temperature"] = *temperature;
  return body;
}

absl::StatusOr<std::unique_ptr<BenchClient>> CreateHttpBenchClient(const ClientOptions& options) {
  absl::StatusOr<std::pair<std::string, std::string>> host_port = SplitHostPort(options.address);
  if (!host_port.ok()) return host_port.status();
  asio::io_context io;
  tcp::resolver resolver(io);
  beast::error_code ec;
  auto results = resolver.resolve(host_port->first, host_port->second, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve '", options.address, "': ", ec.message()));
  }
  std::vector<tcp::endpoint> endpoints;
  for (const auto& entry : results) endpoints.push_back(entry.endpoint());
  auto client = std::make_unique<HttpBenchClient>(options, std::move(endpoints));
  if (options.model.empty()) {
    absl::StatusOr<std::string> model = AskModel(*client, options.address);
    if (!model.ok()) return model.status();
    client->set_model(*model);
  }
  return client;
}

}  // namespace tandem::bench
