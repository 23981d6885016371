#include "router/http/http_connection.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "router/http/openai_response.h"
#include "router/request_builder.h"
#include "spdlog/spdlog.h"

namespace tandem {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;

constexpr char kServerName[] = "tandem-router";
// A connection that sends no (complete) request for this long is closed.
constexpr std::chrono::seconds kIdleTimeout(120);
// A response write (other than a running stream's) that makes no progress for this long closes
// the connection. Running streams are bounded by the request's deadline instead.
constexpr std::chrono::seconds kWriteTimeout(60);
constexpr uint32_t kMaxHeaderBytes = 64 << 10;
// Streaming: the request thread blocks while this much is queued unwritten.
constexpr int64_t kMaxQueuedStreamBytes = 1 << 20;
// Bytes of pipelined requests kept while a generation runs; beyond this the connection stops
// watching its socket until the response is done.
constexpr size_t kMaxPipelinedBytes = 1 << 20;
constexpr size_t kWatchReadBytes = 4096;
constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
// Closing after an error: how long and how much of the client's remaining input is read and
// dropped first.
constexpr std::chrono::seconds kLingerTimeout(2);
constexpr int64_t kMaxLingerBytes = 64 << 20;

std::string_view View(beast::string_view s) { return std::string_view(s.data(), s.size()); }

// A request Beast could not parse (as opposed to a client that closed or timed out).
bool IsMalformedRequest(const beast::error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_target).category() &&
         ec != http::error::end_of_stream && ec != http::error::partial_message;
}

}  // namespace

namespace {

std::shared_ptr<net::ssl::context> CurrentTls(HttpServerContext* context) {
  absl::MutexLock lock(&context->tls_mu);
  return context->tls;
}

}  // namespace

HttpConnection::HttpConnection(net::ip::tcp::socket socket, HttpServerContext* context)
    : context_(context), stream_(std::move(socket), CurrentTls(context)) {
  beast::error_code ec;
  // Tokens go out as they come: no Nagle delay on small SSE events.
  stream_.tcp().socket().set_option(net::ip::tcp::no_delay(true), ec);
}

HttpConnection::~HttpConnection() {
  absl::MutexLock lock(&context_->connections_mu);
  context_->connections.erase(this);
}

void HttpConnection::Start() {
  {
    absl::MutexLock lock(&context_->connections_mu);
    context_->connections[this] = weak_from_this();
  }
  // A client that does not finish its TLS handshake is closed like an idle one.
  stream_.tcp().expires_after(kIdleTimeout);
  net::dispatch(stream_.get_executor(), [self = shared_from_this()] {
    self->stream_.async_handshake(beast::bind_front_handler(&HttpConnection::OnHandshake, self));
  });
}

void HttpConnection::OnHandshake(beast::error_code ec) {
  if (closed_) return;
  if (ec) {
    spdlog::debug("HTTPS handshake failed: {}", ec.message());
    Close();
    return;
  }
  ReadRequest();
}

void HttpConnection::ReadRequest() {
  if (closed_) return;
  parser_.emplace();
  parser_->body_limit(static_cast<uint64_t>(context_->options.max_body_bytes));
  parser_->header_limit(kMaxHeaderBytes);
  stream_.tcp().expires_after(kIdleTimeout);
  http::async_read_header(
      stream_, buffer_, *parser_,
      beast::bind_front_handler(&HttpConnection::OnHeaderRead, shared_from_this()));
}

void HttpConnection::OnHeaderRead(beast::error_code ec, size_t) {
  if (closed_) return;
  if (ec) {
    OnRequestRead(ec, 0);
    return;
  }
  auto read_body = [self = shared_from_this()] {
    http::async_read(self->stream_, self->buffer_, *self->parser_,
                     beast::bind_front_handler(&HttpConnection::OnRequestRead, self));
  };
  if (parser_->is_done()) {
    OnRequestRead(ec, 0);
    return;
  }
  // curl and others wait (about a second) for "100 Continue" before sending a body that is
  // larger than a few KiB.
  auto expect = parser_->get().find(http::field::expect);
  if (expect != parser_->get().end() && beast::iequals(expect->value(), "100-continue") &&
      parser_->get().version() >= 11) {
    net::async_write(stream_, net::buffer(kContinue, sizeof(kContinue) - 1),
                     [self = shared_from_this(), read_body](beast::error_code ec, size_t) {
                       if (self->closed_) return;
                       if (ec) {
                         self->Close();
                         return;
                       }
                       read_body();
                     });
    return;
  }
  read_body();
}

void HttpConnection::OnRequestRead(beast::error_code ec, size_t) {
  if (closed_) return;
  if (ec == http::error::body_limit) {
    SendError(BodyTooLargeError(context_->options.max_body_bytes), /*keep_alive=*/false);
    return;
  }
  if (ec == http::error::header_limit) {
    SendError(BadRequestError(
                  absl::StrCat("the request header is larger than ", kMaxHeaderBytes, " bytes")),
              false);
    return;
  }
  if (ec) {
    // The client closed, timed out or reset: nothing to answer. A malformed request: 400.
    if (IsMalformedRequest(ec)) {
      SendError(BadRequestError(absl::StrCat("malformed HTTP request: ", ec.message())), false);
      return;
    }
    Close();
    return;
  }
  stream_.tcp().expires_never();
  Request request = parser_->release();
  Handle(request);
}

void HttpConnection::Handle(Request& request) {
  version_ = request.version();
  const bool keep_alive = request.keep_alive() && !context_->shutting_down.load();
  const std::string_view target = View(request.target());
  const RouteInfo route = MatchRoute(target);
  const std::string_view method = View(request.method_string());
  if (route.route == Route::kUnknown) {
    SendError(NotFoundError(method, target), keep_alive);
    return;
  }
  const ApiKeys* keys = context_->options.api_keys.get();
  if (route.needs_api_key && keys != nullptr && keys->enabled()) {
    auto auth = request.find(http::field::authorization);
    const std::string_view value = auth == request.end() ? std::string_view() : View(auth->value());
    if (!keys->Authorizes(value)) {
      SendError(UnauthorizedError(), keep_alive);
      return;
    }
  }
  if (method != route.method) {
    auto response = MakeResponse(
        405, DumpJson(MethodNotAllowedError(method, target, route.method).ToJson()), keep_alive);
    response->set(http::field::allow, std::string(route.method));
    SendResponse(std::move(response), keep_alive);
    return;
  }
  switch (route.route) {
    case Route::kHealth:
      SendResponse(MakeResponse(200, DumpJson(HealthJson()), keep_alive), keep_alive);
      return;
    case Route::kReady: {
      const Readiness ready = context_->ready ? context_->ready() : Readiness();
      SendResponse(
          MakeResponse(ready.status.ok() ? 200 : 503, DumpJson(ReadyJson(ready)), keep_alive),
          keep_alive);
      return;
    }
    case Route::kModels:
      SendResponse(
          MakeResponse(
              200, DumpJson(ModelsJson(context_->runner->model(), context_->started_unix_seconds)),
              keep_alive),
          keep_alive);
      return;
    case Route::kCompletions:
      StartGeneration(OpenAiEndpoint::kCompletions, request);
      return;
    case Route::kChatCompletions:
      StartGeneration(OpenAiEndpoint::kChatCompletions, request);
      return;
    case Route::kUnknown:
      break;
  }
}

void HttpConnection::StartGeneration(OpenAiEndpoint endpoint, Request& request) {
  const bool keep_alive = request.keep_alive() && !context_->shutting_down.load();
  absl::StatusOr<OpenAiRequest> parsed = ParseOpenAiRequest(endpoint, request.body());
  if (!parsed.ok()) {
    spdlog::debug("HTTP {}: 400: {}", View(request.target()),
                  std::string(parsed.status().message()));
    context_->runner->CountRefused(endpoint == OpenAiEndpoint::kCompletions
                                       ? RequestApi::kCompletions
                                       : RequestApi::kChatCompletions,
                                   grpc::StatusCode::INVALID_ARGUMENT);
    SendError(ErrorFromParseStatus(parsed.status()), keep_alive);
    return;
  }
  if (context_->shutting_down.load()) {
    SendError(ShuttingDownError(), false);
    return;
  }
  if (parsed->output.stream && request.version() < 11) {
    SendError(BadRequestError("streaming needs HTTP/1.1 (chunked transfer encoding)", "stream"),
              false);
    return;
  }
  const ServedModel& model = context_->runner->model();
  // The router's own id (sent back in X-Request-Id): node calls and Cancel RPCs go by it, so a
  // client's id, which need not be unique, is not used.
  std::string request_id = MakeRequestId();
  parsed->run_options.request_id = request_id;
  const std::string id =
      absl::StrCat(endpoint == OpenAiEndpoint::kCompletions ? "cmpl-" : "chatcmpl-", request_id);
  auto sink = std::make_shared<HttpResponseSink>(
      parsed->output, *model.tokenizer, id, model.name, absl::ToUnixSeconds(absl::Now()),
      std::weak_ptr<StreamOutput>(shared_from_this()), kMaxQueuedStreamBytes);
  generation_ = {
      .sink = sink, .open = true, .keep_alive = keep_alive, .request_id = std::move(request_id)};
  ++context_->open_responses;

  auto self = shared_from_this();
  uint64_t running_id = 0;
  const bool launched = context_->requests.Begin(sink, &running_id);
  if (launched) {
    HttpServerContext* context = context_;
    // End(running_id) lets the server's Shutdown finish and free `context`, so the callback
    // gives up its references first: the connection's last one, dropped after End, would run
    // ~HttpConnection against a freed context (seen in CI as a freed mutex).
    context_->runner->Start(
        parsed->request, parsed->run_options, sink.get(),
        [self, sink, context, running_id](grpc::Status status) mutable {
          FinalResponse final = sink->Finish(status);
          sink.reset();
          auto executor = self->stream_.get_executor();
          net::post(executor, [self = std::move(self), final = std::move(final)]() mutable {
            self->OnGenerationDone(std::move(final));
          });
          context->requests.End(running_id);
        });
  }
  if (!launched) {
    generation_ = {};
    --context_->open_responses;
    SendError(ShuttingDownError(), false);
    return;
  }
  WatchForClose();
}

void HttpConnection::OnGenerationDone(FinalResponse final) {
  generation_.finished = true;
  if (closed_) return;
  switch (final.kind) {
    case FinalResponse::Kind::kNothing:
      Close();
      return;
    case FinalResponse::Kind::kStreamTail:
      QueueStreamData(std::move(final.body), /*report_to_sink=*/false);
      Enqueue({.kind = WriteItem::Kind::kChunkLast});
      Enqueue({.kind = WriteItem::Kind::kEndOfResponse, .keep_alive = generation_.keep_alive});
      return;
    case FinalResponse::Kind::kComplete: {
      auto response = MakeResponse(final.status, std::move(final.body), generation_.keep_alive);
      if (final.retry_after) {
        response->set(http::field::retry_after,
                      std::to_string(context_->options.retry_after_seconds));
      }
      SendResponse(std::move(response), generation_.keep_alive);
      return;
    }
  }
}

std::shared_ptr<HttpConnection::Response> HttpConnection::MakeResponse(int status, std::string body,
                                                                       bool keep_alive) const {
  auto response = std::make_shared<Response>();
  response->version(version_);
  response->result(static_cast<unsigned>(status));
  response->set(http::field::server, kServerName);
  response->set(http::field::content_type, "application/json");
  if (generation_.open && !generation_.request_id.empty()) {
    response->set("X-Request-Id", generation_.request_id);
  }
  response->keep_alive(keep_alive);
  response->body() = std::move(body);
  response->prepare_payload();
  return response;
}

void HttpConnection::SendResponse(std::shared_ptr<Response> response, bool keep_alive) {
  Enqueue({.kind = WriteItem::Kind::kMessage, .message = std::move(response)});
  Enqueue({.kind = WriteItem::Kind::kEndOfResponse, .keep_alive = keep_alive});
}

void HttpConnection::SendError(const OpenAiError& error, bool keep_alive) {
  auto response = MakeResponse(error.http_status, DumpJson(error.ToJson()), keep_alive);
  if (error.retry_later()) {
    response->set(http::field::retry_after, std::to_string(context_->options.retry_after_seconds));
  }
  SendResponse(std::move(response), keep_alive);
}

void HttpConnection::SendStreamData(std::string data) {
  net::post(stream_.get_executor(), [self = shared_from_this(), data = std::move(data)]() mutable {
    self->QueueStreamData(std::move(data), /*report_to_sink=*/true);
  });
}

void HttpConnection::CloseConnection() {
  net::post(stream_.get_executor(),
            beast::bind_front_handler(&HttpConnection::Close, shared_from_this()));
}

void HttpConnection::QueueStreamData(std::string data, bool report_to_sink) {
  if (closed_) return;
  if (!generation_.stream_header_queued) {
    generation_.stream_header_queued = true;
    Enqueue({.kind = WriteItem::Kind::kStreamHeader});
  }
  if (data.empty()) return;
  Enqueue(
      {.kind = WriteItem::Kind::kChunk, .data = std::move(data), .report_to_sink = report_to_sink});
}

void HttpConnection::Enqueue(WriteItem item) {
  if (closed_) return;
  queue_.push_back(std::move(item));
  if (!writing_) WriteNext();
}

void HttpConnection::WriteNext() {
  while (!closed_ && !writing_ && !queue_.empty()) {
    WriteItem& item = queue_.front();
    if (item.kind == WriteItem::Kind::kEndOfResponse) {
      const bool keep_alive = item.keep_alive;
      queue_.pop_front();
      EndOfResponse(keep_alive);
      continue;
    }
    writing_ = true;
    // A running stream is bounded by the request's deadline (the sink's Abort); everything else
    // must make progress.
    if (!generation_.open || generation_.finished) stream_.tcp().expires_after(kWriteTimeout);
    auto done = beast::bind_front_handler(&HttpConnection::OnWritten, shared_from_this());
    switch (item.kind) {
      case WriteItem::Kind::kMessage:
        http::async_write(stream_, *item.message, std::move(done));
        break;
      case WriteItem::Kind::kStreamHeader: {
        generation_.stream_header.reset(new StreamHeader{.header{http::status::ok, version_}});
        StreamHeader& stream_header = *generation_.stream_header;
        auto& header = stream_header.header;
        header.set(http::field::server, kServerName);
        header.set(http::field::content_type, "text/event-stream");
        header.set(http::field::cache_control, "no-cache");
        if (!generation_.request_id.empty()) header.set("X-Request-Id", generation_.request_id);
        header.keep_alive(generation_.keep_alive);
        header.chunked(true);
        stream_header.serializer.emplace(header);
        http::async_write_header(stream_, *stream_header.serializer, std::move(done));
        break;
      }
      case WriteItem::Kind::kChunk:
        net::async_write(stream_, http::make_chunk(net::buffer(item.data)), std::move(done));
        break;
      case WriteItem::Kind::kChunkLast:
        net::async_write(stream_, http::make_chunk_last(), std::move(done));
        break;
      case WriteItem::Kind::kEndOfResponse:
        break;
    }
  }
}

void HttpConnection::OnWritten(beast::error_code ec, size_t) {
  writing_ = false;
  if (closed_) return;
  if (ec) {
    spdlog::debug("HTTP write failed: {}", ec.message());
    Close();
    return;
  }
  WriteItem item = std::move(queue_.front());
  queue_.pop_front();
  if (item.kind == WriteItem::Kind::kChunk && item.report_to_sink && generation_.sink != nullptr) {
    generation_.sink->BytesWritten(static_cast<int64_t>(item.data.size()));
  }
  WriteNext();
}

void HttpConnection::EndOfResponse(bool keep_alive) {
  if (generation_.open) --context_->open_responses;
  generation_ = {};
  if (!keep_alive || context_->shutting_down.load()) {
    GracefulClose();
    return;
  }
  if (watching_) {
    // The watch read is still pending: cancel it; its handler starts the next request's read.
    read_after_watch_ = true;
    beast::error_code ec;
    stream_.tcp().socket().cancel(ec);
    return;
  }
  ReadRequest();
}

void HttpConnection::WatchForClose() {
  if (closed_ || watching_ || buffer_.size() >= kMaxPipelinedBytes) return;
  watching_ = true;
  stream_.async_read_some(
      buffer_.prepare(kWatchReadBytes),
      beast::bind_front_handler(&HttpConnection::OnWatchRead, shared_from_this()));
}

void HttpConnection::OnWatchRead(beast::error_code ec, size_t bytes) {
  watching_ = false;
  if (closed_) return;
  if (!ec) {
    // The client sent more (a pipelined request): keep it for the next read.
    buffer_.commit(bytes);
  } else if (ec != net::error::operation_aborted) {
    // EOF or a reset: the client is gone; the runner sees ClientGone() and cancels.
    Close();
    return;
  }
  if (read_after_watch_) {
    read_after_watch_ = false;
    ReadRequest();
    return;
  }
  if (generation_.open && !ec) WatchForClose();
}

void HttpConnection::GracefulClose() {
  if (closed_) return;
  beast::error_code ec;
  stream_.tcp().socket().shutdown(net::ip::tcp::socket::shutdown_send, ec);
  if (watching_) {
    Close();
    return;
  }
  // Closing with unread input (the rest of a body that was too large) would reset the
  // connection and could destroy the response before the client read it: read and drop what
  // the client still sends, for a while, first.
  lingered_bytes_ = 0;
  stream_.tcp().expires_after(kLingerTimeout);
  Linger();
}

void HttpConnection::Linger() {
  stream_.async_read_some(net::buffer(linger_buffer_),
                          [self = shared_from_this()](beast::error_code ec, size_t bytes) {
                            if (self->closed_) return;
                            self->lingered_bytes_ += bytes;
                            if (ec || self->lingered_bytes_ > kMaxLingerBytes) {
                              self->Close();
                              return;
                            }
                            self->Linger();
                          });
}

void HttpConnection::Close() {
  if (closed_) return;
  closed_ = true;
  if (generation_.sink != nullptr) generation_.sink->ClientClosed();
  if (generation_.open) {
    generation_.open = false;
    --context_->open_responses;
  }
  // A write in progress still owns its buffers: keep it until its handler runs.
  while (queue_.size() > (writing_ ? 1u : 0u)) queue_.pop_back();
  beast::error_code ec;
  stream_.tcp().socket().close(ec);
}

}  // namespace tandem
