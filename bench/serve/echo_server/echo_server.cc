// tandem-bench-echo-server: answers POST /v1/completions with exactly max_tokens streamed chunks
// in the router's SSE format (one chunk per token, the last with finish_reason "length", then the
// usage chunk and [DONE]) as fast as it can, or one every --token-interval-us. No model, no
// batching: what tandem-bench measures against it is tandem-bench's own overhead. A thread per
// connection; connections are kept alive.
#include <unistd.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdio>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/util/cli_flags.h"
#include "common/util/ready_file.h"
#include "nlohmann/json.hpp"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using json = nlohmann::json;

constexpr char kIntro[] =
    R"(Usage: tandem-bench-echo-server [options]

A stand-in OpenAI-compatible server for measuring tandem-bench itself: POST /v1/completions
streams exactly max_tokens chunks (stream: true) or returns them at once; GET /v1/models lists
one model. Runs until killed.
)";
struct Options {
  std::string listen = "127.0.0.1:0";
  std::string ready_file;
  int64_t token_interval_us = 0;
  std::string model = "echo";
};

std::atomic<int64_t> next_id{0};

http::response<http::string_body> JsonResponse(http::status status, const json& body,
                                               bool keep_alive) {
  http::response<http::string_body> res(status, 11);
  res.set(http::field::content_type, "application/json");
  res.keep_alive(keep_alive);
  res.body() = body.dump();
  res.prepare_payload();
  return res;
}

json ErrorJson(const std::string& message) {
  return {{"error", {{"message", message}, {"type", "BadRequestError"}, {"code", 400}}}};
}

// One streamed chunk, formatted by hand (this loop is what the server spends its time on).
std::string TokenChunk(const std::string& head, int i, bool last) {
  return absl::StrCat(head, "\"choices\":[{\"index\":0,\"text\":\" t", i,
                      "\",\"logprobs\":null,\"finish_reason\":", last ? "\"length\"" : "null",
                      "}]}\n\n");
}

// Streams the completion; false when the connection broke.
bool StreamCompletion(tcp::socket& socket, const Options& options, bool keep_alive, int max_tokens,
                      int prompt_tokens, bool include_usage) {
  http::response<http::empty_body> res(http::status::ok, 11);
  res.set(http::field::content_type, "text/event-stream");
  res.set(http::field::cache_control, "no-cache");
  res.keep_alive(keep_alive);
  res.chunked(true);
  http::response_serializer<http::empty_body> serializer(res);
  beast::error_code ec;
  http::write_header(socket, serializer, ec);
  if (ec) return false;
  const std::string head = absl::StrCat(
      "data: {\"id\":\"cmpl-echo-", next_id.fetch_add(1),
      "\",\"object\":\"text_completion\",\"created\":", absl::ToUnixSeconds(absl::Now()),
      ",\"model\":", json(options.model).dump(), ",", include_usage ? "\"usage\":null," : "");
  for (int i = 0; i < max_tokens; ++i) {
    if (options.token_interval_us > 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(options.token_interval_us));
    }
    const std::string chunk = TokenChunk(head, i, i + 1 == max_tokens);
    asio::write(socket, http::make_chunk(asio::buffer(chunk)), ec);
    if (ec) return false;
  }
  std::string tail;
  if (include_usage) {
    tail = absl::StrCat("data: ",
                        json{{"object", "text_completion"},
                             {"model", options.model},
                             {"choices", json::array()},
                             {"usage",
                              {{"prompt_tokens", prompt_tokens},
                               {"completion_tokens", max_tokens},
                               {"total_tokens", prompt_tokens + max_tokens}}}}
                            .dump(),
                        "\n\n");
  }
  tail += "data: [DONE]\n\n";
  asio::write(socket, http::make_chunk(asio::buffer(tail)), ec);
  if (!ec) asio::write(socket, http::make_chunk_last(), ec);
  return !ec;
}

// Handles POST /v1/completions; false when the connection is to be closed.
bool Completions(tcp::socket& socket, const Options& options,
                 const http::request<http::string_body>& req) {
  const bool keep_alive = req.keep_alive();
  beast::error_code ec;
  json body = json::parse(req.body(), nullptr, /*allow_exceptions=*/false);
  auto reply_error = [&](const std::string& message) {
    http::write(socket, JsonResponse(http::status::bad_request, ErrorJson(message), keep_alive),
                ec);
    return !ec && keep_alive;
  };
  if (!body.is_object()) return reply_error("the body is not a JSON object");
  const json& prompt = body.value("prompt", json());
  int prompt_tokens = 0;
  if (prompt.is_array()) {
    prompt_tokens = static_cast<int>(prompt.size());
  } else if (prompt.is_string()) {
    // No tokenizer: about four bytes a token.
    prompt_tokens = static_cast<int>((prompt.get_ref<const std::string&>().size() + 3) / 4);
  } else {
    return reply_error("prompt must be a string or an array of token ids");
  }
  const json& max_tokens_json = body.value("max_tokens", json(16));
  if (!max_tokens_json.is_number_integer() || max_tokens_json.get<int64_t>() < 1 ||
      max_tokens_json.get<int64_t>() > 1000000) {
    return reply_error("max_tokens must be an integer in [1, 1000000]");
  }
  const int max_tokens = max_tokens_json.get<int>();
  const bool stream = body.value("stream", false);
  bool include_usage = false;
  if (auto it = body.find("stream_options"); it != body.end() && it->is_object()) {
    include_usage = it->value("include_usage", false);
  }
  if (stream) {
    return StreamCompletion(socket, options, keep_alive, max_tokens, prompt_tokens,
                            include_usage) &&
           keep_alive;
  }
  std::string text;
  for (int i = 0; i < max_tokens; ++i) absl::StrAppend(&text, " t", i);
  json out = {
      {"id", absl::StrCat("cmpl-echo-", next_id.fetch_add(1))},
      {"object", "text_completion"},
      {"created", absl::ToUnixSeconds(absl::Now())},
      {"model", options.model},
      {"choices",
       json::array(
           {{{"index", 0}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", "length"}}})},
      {"usage",
       {{"prompt_tokens", prompt_tokens},
        {"completion_tokens", max_tokens},
        {"total_tokens", prompt_tokens + max_tokens}}}};
  http::write(socket, JsonResponse(http::status::ok, out, keep_alive), ec);
  return !ec && keep_alive;
}

void Serve(tcp::socket socket, const Options& options) {
  beast::error_code ec;
  socket.set_option(tcp::no_delay(true), ec);
  beast::flat_buffer buffer;
  while (true) {
    http::request<http::string_body> req;
    http::read(socket, buffer, req, ec);
    if (ec) break;
    const bool keep_alive = req.keep_alive();
    bool keep_open = keep_alive;
    if (req.target() == "/v1/completions" && req.method() == http::verb::post) {
      keep_open = Completions(socket, options, req);
    } else if (req.target() == "/v1/models" && req.method() == http::verb::get) {
      json models = {{"object", "list"},
                     {"data", json::array({{{"id", options.model},
                                            {"object", "model"},
                                            {"created", 0},
                                            {"owned_by", "tandem-bench-echo-server"}}})}};
      http::write(socket, JsonResponse(http::status::ok, models, keep_alive), ec);
    } else if (req.target() == "/health") {
      http::write(socket, JsonResponse(http::status::ok, json::object(), keep_alive), ec);
    } else {
      http::write(
          socket,
          JsonResponse(http::status::not_found,
                       ErrorJson(absl::StrCat("no route ", std::string(req.target()))), keep_alive),
          ec);
    }
    if (ec || !keep_open) break;
  }
  socket.shutdown(tcp::socket::shutdown_send, ec);
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  tandem::FlagSet flags;
  flags.String("listen", &options.listen,
               {"HOST:PORT", "where to listen (default 127.0.0.1:0 = any free port, printed)"});
  flags.String("ready-file", &options.ready_file,
               {"PATH", "once listening, write {\"http\": \"HOST:PORT\", \"pid\": N} here"});
  flags.Number("token-interval-us", &options.token_interval_us,
               {"N", "wait N microseconds between tokens (default 0: as fast as possible)"});
  flags.String("model", &options.model, {"NAME", "the model name to report (default \"echo\")"});
  bool help = false;
  const std::string error = flags.Parse(argc, argv, &help);
  if (help) {
    std::fputs(flags.Help(kIntro).c_str(), stdout);
    return 0;
  }
  if (!error.empty()) {
    std::fprintf(stderr, "tandem-bench-echo-server: %s\n", error.c_str());
    return 2;
  }
  const size_t colon = options.listen.rfind(':');
  if (colon == std::string::npos || options.token_interval_us < 0) {
    std::fprintf(stderr, "tandem-bench-echo-server: --listen must be HOST:PORT%s\n",
                 options.token_interval_us < 0 ? " and --token-interval-us >= 0" : "");
    return 2;
  }
  try {
    asio::io_context io;
    tcp::resolver resolver(io);
    const tcp::endpoint endpoint =
        resolver.resolve(options.listen.substr(0, colon), options.listen.substr(colon + 1))
            .begin()
            ->endpoint();
    tcp::acceptor acceptor(io, endpoint, /*reuse_addr=*/true);
    acceptor.listen(asio::socket_base::max_listen_connections);
    const tcp::endpoint bound = acceptor.local_endpoint();
    const std::string address = absl::StrCat(bound.address().to_string(), ":", bound.port());
    std::printf("tandem-bench-echo-server: listening on http://%s\n", address.c_str());
    std::fflush(stdout);
    if (!options.ready_file.empty()) {
      tandem::ReadyEndpoints endpoints;
      endpoints.http = address;
      if (absl::Status s = tandem::WriteReadyFile(options.ready_file, endpoints); !s.ok()) {
        std::fprintf(stderr, "tandem-bench-echo-server: %s\n", s.ToString().c_str());
        return 1;
      }
    }
    while (true) {
      tcp::socket socket(io);
      beast::error_code ec;
      acceptor.accept(socket, ec);
      if (ec) continue;
      std::thread(Serve, std::move(socket), std::cref(options)).detach();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tandem-bench-echo-server: %s\n", e.what());
    return 1;
  }
}
