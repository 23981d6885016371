// One client connection of the HTTP API (Boost.Beast, all socket work on the connection's
// strand): reads requests (HTTP/1.1 keep-alive, pipelining tolerated), answers /health, /ready,
// /v1/models and errors directly, and starts generation requests on the RequestRunner with an
// HttpResponseSink (no thread waits on them; running_requests tracks them for shutdown).
//
// While a generation runs, a read stays pending on the socket: EOF or an error means the client
// went away, the sink's ClientGone() turns true and the runner cancels the request on its nodes.
// Streams go out as chunked `text/event-stream`; the header is written with the first event.
#ifndef TANDEM_ROUTER_HTTP_HTTP_CONNECTION_H_
#define TANDEM_ROUTER_HTTP_HTTP_CONNECTION_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "boost/asio/dispatch.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/post.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "router/http/http_response_sink.h"
#include "router/http/http_routes.h"
#include "router/http/http_server.h"
#include "router/http/http_stream.h"
#include "router/http/openai_error.h"
#include "router/http/openai_request.h"
#include "router/http/running_requests.h"
#include "router/request_runner.h"

namespace tandem {

// What connections share with their server.
class HttpConnection;

struct HttpServerContext {
  HttpServerOptions options;
  RequestRunner* runner = nullptr;
  std::function<Readiness()> ready;
  RunningRequests requests;
  int64_t started_unix_seconds = 0;  // /v1/models' `created`
  std::atomic<bool> shutting_down{false};
  // Generation responses not yet written to the end (Shutdown lets them flush).
  std::atomic<int64_t> open_responses{0};

  // The HTTPS context new connections are accepted with (null: plain HTTP); ReloadTls swaps it.
  absl::Mutex tls_mu;
  std::shared_ptr<boost::asio::ssl::context> tls ABSL_GUARDED_BY(tls_mu);

  // Open connections, for Shutdown to close the idle ones.
  absl::Mutex connections_mu;
  absl::flat_hash_map<const HttpConnection*, std::weak_ptr<HttpConnection>> connections
      ABSL_GUARDED_BY(connections_mu);
};

class HttpConnection : public std::enable_shared_from_this<HttpConnection>, public StreamOutput {
 public:
  HttpConnection(boost::asio::ip::tcp::socket socket, HttpServerContext* context);
  ~HttpConnection() override;

  // Starts reading requests.
  void Start();

  // StreamOutput (the request thread).
  void SendStreamData(std::string data) override;
  void CloseConnection() override;

 private:
  using Request = boost::beast::http::request<boost::beast::http::string_body>;
  using Response = boost::beast::http::response<boost::beast::http::string_body>;

  struct WriteItem {
    enum class Kind { kMessage, kStreamHeader, kChunk, kChunkLast, kEndOfResponse };
    Kind kind = Kind::kMessage;
    std::shared_ptr<Response> message;  // kMessage
    std::string data;                   // kChunk
    bool report_to_sink = false;        // kChunk: the sink counts these bytes as queued
    bool keep_alive = false;            // kEndOfResponse
  };

  void OnHandshake(boost::beast::error_code ec);
  void ReadRequest();
  // The header is in: answer "Expect: 100-continue", then read the body.
  void OnHeaderRead(boost::beast::error_code ec, size_t bytes);
  void OnRequestRead(boost::beast::error_code ec, size_t bytes);
  void Handle(Request& request);
  void StartGeneration(OpenAiEndpoint endpoint, Request& request);
  void OnGenerationDone(FinalResponse final);

  // A whole JSON response.
  std::shared_ptr<Response> MakeResponse(int status, std::string body, bool keep_alive) const;
  void SendResponse(std::shared_ptr<Response> response, bool keep_alive);
  void SendError(const OpenAiError& error, bool keep_alive);

  void QueueStreamData(std::string data, bool report_to_sink);
  void Enqueue(WriteItem item);
  void WriteNext();
  void OnWritten(boost::beast::error_code ec, size_t bytes);
  // The last write of a response went out: read the next request, or close.
  void EndOfResponse(bool keep_alive);

  // A read kept pending while a generation runs, to see the client go away.
  void WatchForClose();
  void OnWatchRead(boost::beast::error_code ec, size_t bytes);

  // Ends the connection after a response: shuts down sending, drops what the client still
  // sends for a while (Linger), then closes.
  void GracefulClose();
  void Linger();
  void Close();

  HttpServerContext* const context_;
  HttpStream stream_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  bool closed_ = false;

  unsigned version_ = 11;  // the HTTP version of the request being answered

  // A stream's header, kept with its serializer (which points into it) until the response ends.
  struct StreamHeader {
    boost::beast::http::response<boost::beast::http::empty_body> header;
    std::optional<boost::beast::http::response_serializer<boost::beast::http::empty_body>>
        serializer;
  };
  // The generation response in progress: set in one assignment when it starts, reset in one when
  // its response ends (no write is in flight at either point).
  struct Generation {
    std::shared_ptr<HttpResponseSink> sink;
    bool open = false;      // counted in context_->open_responses
    bool finished = false;  // the runner returned
    bool keep_alive = false;
    std::string request_id;
    bool stream_header_queued = false;
    std::unique_ptr<StreamHeader> stream_header;
  };
  Generation generation_;

  bool watching_ = false;
  bool read_after_watch_ = false;

  std::deque<WriteItem> queue_;
  bool writing_ = false;

  std::array<char, 16384> linger_buffer_;
  int64_t lingered_bytes_ = 0;
};

}  // namespace tandem

#endif  // TANDEM_ROUTER_HTTP_HTTP_CONNECTION_H_
