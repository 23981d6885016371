// The byte stream under one HTTP connection: plain TCP, or TLS over it (HTTPS). Beast's HTTP
// reads and writes take either through this one type, which forwards each operation to the
// layer in use; timeouts and socket options stay on the TCP layer (tcp()).
#ifndef TANDEM_ROUTER_HTTP_HTTP_STREAM_H_
#define TANDEM_ROUTER_HTTP_HTTP_STREAM_H_

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/ssl/context.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/ssl.hpp"

namespace tandem {

class HttpStream {
 public:
  using executor_type = boost::beast::tcp_stream::executor_type;

  // `tls` null: plain TCP. The connection holds the context it was accepted with, so a reload
  // (a new context) does not affect connections already open.
  HttpStream(boost::asio::ip::tcp::socket socket, std::shared_ptr<boost::asio::ssl::context> tls)
      : tls_context_(std::move(tls)) {
    if (tls_context_ != nullptr) {
      tls_.emplace(std::move(socket), *tls_context_);
    } else {
      tcp_.emplace(std::move(socket));
    }
  }

  executor_type get_executor() { return tcp().get_executor(); }
  boost::beast::tcp_stream& tcp() { return tls_ ? tls_->next_layer() : *tcp_; }
  bool is_tls() const { return tls_.has_value(); }

  // The server side of the TLS handshake; completes at once for plain TCP.
  template <class Handler>
  void async_handshake(Handler&& handler) {
    if (tls_) {
      tls_->async_handshake(boost::asio::ssl::stream_base::server, std::forward<Handler>(handler));
    } else {
      boost::asio::post(get_executor(), [h = std::forward<Handler>(handler)]() mutable {
        h(boost::beast::error_code());
      });
    }
  }

  template <class MutableBuffers, class Handler>
  void async_read_some(const MutableBuffers& buffers, Handler&& handler) {
    if (tls_) {
      tls_->async_read_some(buffers, std::forward<Handler>(handler));
    } else {
      tcp_->async_read_some(buffers, std::forward<Handler>(handler));
    }
  }

  template <class ConstBuffers, class Handler>
  void async_write_some(const ConstBuffers& buffers, Handler&& handler) {
    if (tls_) {
      tls_->async_write_some(buffers, std::forward<Handler>(handler));
    } else {
      tcp_->async_write_some(buffers, std::forward<Handler>(handler));
    }
  }

 private:
  std::shared_ptr<boost::asio::ssl::context> tls_context_;
  std::optional<boost::beast::tcp_stream> tcp_;
  std::optional<boost::beast::ssl_stream<boost::beast::tcp_stream>> tls_;
};

// A TLS server context from PEM files (TLS 1.2+; with `client_ca`, client certificates are
// required and verified against it). InvalidArgument naming the file that fails.
absl::StatusOr<std::shared_ptr<boost::asio::ssl::context>> MakeHttpsContext(
    const std::string& cert, const std::string& key, const std::string& client_ca);

}  // namespace tandem

#endif  // TANDEM_ROUTER_HTTP_HTTP_STREAM_H_
