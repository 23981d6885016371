// Fuzzes the router's HTTP request path with raw bytes from a client, without sockets:
// Boost.Beast's request parser with the limits router/http/http_connection.cc sets, pipelined
// requests one after the other as on a keep-alive connection, then what HttpConnection::Handle does
// with each: route matching, the API key check, the error bodies (which quote the method and
// target), the OpenAI parser and the request builder (chat template, tokenizer, context checks)
// with the real Llama 3 tokenizer and chat template.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "common/tokenizer/chat_template.h"
#include "common/tokenizer/tokenizer.h"
#include "common/tokenizer/tokenizer_config.h"
#include "router/api_keys.h"
#include "router/http/http_routes.h"
#include "router/http/openai_error.h"
#include "router/http/openai_request.h"
#include "router/http/openai_response.h"
#include "router/request_builder.h"
#include "router/served_model.h"
#include "tests/fuzz/fuzz_common.h"

namespace tandem {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;

// http_connection.cc's limits (the body limit is HttpServerOptions' default).
constexpr uint32_t kMaxHeaderBytes = 64 << 10;
constexpr uint64_t kMaxBodyBytes = 8 << 20;
// Pipelined requests handled from one input at most.
constexpr int kMaxRequests = 8;

std::string_view View(beast::string_view s) { return std::string_view(s.data(), s.size()); }

struct Router {
  std::shared_ptr<ApiKeys> keys;
  ServedModel model;
};

const Router& GetRouter() {
  static const Router* router = [] {
    auto* r = new Router();
    auto keys = ApiKeys::Create({"sk-fuzz-0123456789"}, "");
    FUZZ_CHECK(keys.ok());
    r->keys = *std::move(keys);
    const std::string dir = fuzz::SourceDir() + fuzz::kLlama3Models;
    auto tokenizer = Tokenizer::FromJson(fuzz::ReadFileOrDie(dir + "/tokenizer.json"), dir);
    FUZZ_CHECK(tokenizer.ok());
    r->model.name = "llama3";
    r->model.dir = dir;
    r->model.tokenizer = *std::move(tokenizer);
    r->model.config.vocab_size = r->model.tokenizer->vocab_size();
    r->model.config.max_position_embeddings = 4096;
    auto config = ParseTokenizerConfig(fuzz::ReadFileOrDie(dir + "/tokenizer_config.json"), dir);
    FUZZ_CHECK(config.ok());
    r->model.tokenizer_config = *config;
    auto chat = ChatTemplate::Parse(config->chat_template);
    FUZZ_CHECK(chat.ok());
    r->model.chat_template = *std::move(chat);
    return r;
  }();
  return *router;
}

// What the connection would answer; each error body must serialize.
void Answer(const OpenAiError& error) {
  FUZZ_CHECK(error.http_status >= 400 && error.http_status < 600);
  FUZZ_CHECK(!DumpJson(error.ToJson()).empty());
}

void Handle(const Router& router, const http::request<http::string_body>& request) {
  const std::string_view target = View(request.target());
  const std::string_view method = View(request.method_string());
  const RouteInfo route = MatchRoute(target);
  if (route.route == Route::kUnknown) {
    Answer(NotFoundError(method, target));
    return;
  }
  if (route.needs_api_key) {
    auto auth = request.find(http::field::authorization);
    const std::string_view value = auth == request.end() ? std::string_view() : View(auth->value());
    if (!router.keys->Authorizes(value)) Answer(UnauthorizedError());
    // Go on either way: what follows is what an authorized client reaches.
  }
  if (method != route.method) {
    Answer(MethodNotAllowedError(method, target, route.method));
    return;
  }
  OpenAiEndpoint endpoint;
  switch (route.route) {
    case Route::kCompletions:
      endpoint = OpenAiEndpoint::kCompletions;
      break;
    case Route::kChatCompletions:
      endpoint = OpenAiEndpoint::kChatCompletions;
      break;
    case Route::kModels:
      FUZZ_CHECK(!DumpJson(ModelsJson(router.model, 0)).empty());
      return;
    default:
      return;
  }
  absl::StatusOr<OpenAiRequest> parsed = ParseOpenAiRequest(endpoint, request.body());
  if (!parsed.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(parsed.status()));
    Answer(ErrorFromParseStatus(parsed.status()));
    return;
  }
  absl::StatusOr<RouterRequest> built = BuildRequest(
      parsed->request, router.model, parsed->run_options.unset_max_tokens_fills_context);
  if (!built.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(built.status()) || absl::IsNotFound(built.status()));
    return;
  }
  FUZZ_CHECK(!built->prompt.empty());
  FUZZ_CHECK(static_cast<int64_t>(built->prompt.size()) + built->sampling.max_tokens <=
             router.model.max_context_tokens());
  for (TokenId id : built->prompt) FUZZ_CHECK(id >= 0 && id < router.model.vocab_size());
}

}  // namespace
}  // namespace tandem

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace beast = boost::beast;
  namespace http = beast::http;
  const tandem::Router& router = tandem::GetRouter();
  boost::asio::const_buffer input(data, size);
  for (int n = 0; n < tandem::kMaxRequests; ++n) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(tandem::kMaxBodyBytes);
    parser.header_limit(tandem::kMaxHeaderBytes);
    parser.eager(true);
    beast::error_code ec;
    while (!parser.is_done()) {
      if (input.size() > 0) {
        input += parser.put(input, ec);
      } else {
        ec = http::error::need_more;
      }
      if (ec == http::error::need_more) {
        // Like http::read_some: after need_more the parser must be given more bytes than
        // before (Beast asserts it), never the same ones again. All the client sent is in
        // `input`, so the next read is end of stream.
        ec = {};
        if (parser.got_some()) {
          parser.put_eof(ec);
        } else {
          ec = http::error::end_of_stream;
        }
        break;
      }
      if (ec) break;
    }
    if (ec == http::error::end_of_stream || ec == http::error::partial_message) return 0;
    if (ec == http::error::body_limit) {
      tandem::Answer(tandem::BodyTooLargeError(static_cast<int64_t>(tandem::kMaxBodyBytes)));
      return 0;
    }
    if (ec) {
      // The connection answers 400 and closes.
      tandem::Answer(
          tandem::BadRequestError(absl::StrCat("malformed HTTP request: ", ec.message())));
      return 0;
    }
    if (!parser.is_done()) return 0;
    http::request<http::string_body> request = parser.release();
    tandem::Handle(router, request);
    if (!request.keep_alive()) return 0;
  }
  return 0;
}
