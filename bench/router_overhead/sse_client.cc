#include "bench/router_overhead/sse_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace tandem::bench {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

absl::Status PostSse(const std::string& address, const std::string& target,
                     const std::string& json_body,
                     const std::function<void(const std::string& data)>& on_event,
                     absl::Time* connected) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return absl::InvalidArgumentError("address is not HOST:PORT");
  const std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  asio::io_context io;
  asio::ip::tcp::resolver resolver(io);
  beast::tcp_stream stream(io);
  beast::error_code ec;
  auto endpoints = resolver.resolve(host, port, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("resolve ", address, ": ", ec.message()));
  stream.connect(endpoints, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("connect ", address, ": ", ec.message()));
  stream.socket().set_option(asio::ip::tcp::no_delay(true));

  http::request<http::string_body> req(http::verb::post, target, 11);
  req.set(http::field::host, host);
  req.set(http::field::content_type, "application/json");
  req.set(http::field::accept, "text/event-stream");
  req.body() = json_body;
  req.prepare_payload();
  if (connected != nullptr) *connected = absl::Now();
  http::write(stream, req, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("write: ", ec.message()));

  beast::flat_buffer buffer;
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(boost::none);
  http::read_header(stream, buffer, parser, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("read header: ", ec.message()));
  const int status = parser.get().result_int();
  std::string pending;  // SSE text not yet split into events
  std::string body;     // for errors
  char chunk[16384];
  while (!parser.is_done()) {
    parser.get().body().data = chunk;
    parser.get().body().size = sizeof(chunk);
    http::read_some(stream, buffer, parser, ec);
    if (ec == http::error::need_buffer) ec = {};
    if (ec) return absl::UnavailableError(absl::StrCat("read body: ", ec.message()));
    const size_t n = sizeof(chunk) - parser.get().body().size;
    if (status != 200) {
      body.append(chunk, n);
      continue;
    }
    pending.append(chunk, n);
    size_t end;
    while ((end = pending.find("\n\n")) != std::string::npos) {
      const std::string event = pending.substr(0, end);
      pending.erase(0, end + 2);
      if (event.rfind("data: ", 0) == 0) on_event(event.substr(6));
    }
  }
  stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
  if (status != 200) return absl::InternalError(absl::StrCat("HTTP ", status, ": ", body));
  return absl::OkStatus();
}

}  // namespace tandem::bench
