// A TCP stream for Boost.Beast's synchronous algorithms (http::write, http::read_some, ...) with
// a deadline: the socket is non-blocking, and a read or write that would block waits in poll(2)
// for at most the time left, then fails with beast::error::timeout. No event loop and no timers:
// a read of data that is already there is one recv, which keeps the client's cost per streamed
// chunk low (tandem-bench reads each response on a thread of its own).
#ifndef TANDEM_BENCH_SERVE_DEADLINE_STREAM_H_
#define TANDEM_BENCH_SERVE_DEADLINE_STREAM_H_

#include <poll.h>
#include <sys/socket.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/system/system_error.hpp>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <vector>

namespace tandem::bench {

class DeadlineStream {
 public:
  using Clock = std::chrono::steady_clock;
  using tcp = boost::asio::ip::tcp;
  using error_code = boost::system::error_code;

  // `io` only owns the socket's registration; nothing here runs it.
  explicit DeadlineStream(boost::asio::io_context& io) : socket_(io) {}

  void set_deadline(Clock::time_point deadline) { deadline_ = deadline; }

  // Connects to the first endpoint that accepts, by the deadline.
  error_code Connect(const std::vector<tcp::endpoint>& endpoints) {
    error_code ec = boost::asio::error::host_not_found;
    for (const tcp::endpoint& endpoint : endpoints) {
      ec = ConnectOne(endpoint);
      if (!ec || ec == boost::beast::error::timeout) return ec;
    }
    return ec;
  }

  tcp::socket& socket() { return socket_; }

  // Beast's SyncReadStream and SyncWriteStream.
  template <class MutableBuffers>
  size_t read_some(const MutableBuffers& buffers, error_code& ec) {
    return Retry(POLLIN, ec, [&] { return socket_.read_some(buffers, ec); });
  }
  template <class MutableBuffers>
  size_t read_some(const MutableBuffers& buffers) {
    error_code ec;
    const size_t n = read_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }
  template <class ConstBuffers>
  size_t write_some(const ConstBuffers& buffers, error_code& ec) {
    return Retry(POLLOUT, ec, [&] { return socket_.write_some(buffers, ec); });
  }
  template <class ConstBuffers>
  size_t write_some(const ConstBuffers& buffers) {
    error_code ec;
    const size_t n = write_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }

 private:
  // Runs `op` (which sets ec) until it does not report would_block, waiting for `events` between.
  template <class Op>
  size_t Retry(short events, error_code& ec, Op op) {
    while (true) {
      ec = {};
      const size_t n = op();
      if (ec != boost::asio::error::would_block && ec != boost::asio::error::try_again) return n;
      if (!Wait(events, ec)) return 0;
    }
  }

  // Waits until the socket is ready for `events`; false with `ec` set on timeout or error.
  bool Wait(short events, error_code& ec) {
    while (true) {
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
      if (left <= 0) {
        ec = boost::beast::error::timeout;
        return false;
      }
      pollfd p{socket_.native_handle(), events, 0};
      const int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1 << 30)));
      if (r > 0) return true;  // ready, or an error the next call reports
      if (r < 0 && errno != EINTR) {
        ec = error_code(errno, boost::system::system_category());
        return false;
      }
    }
  }

  error_code ConnectOne(const tcp::endpoint& endpoint) {
    error_code ec;
    if (socket_.is_open()) socket_.close(ec);
    socket_.open(endpoint.protocol(), ec);
    if (!ec) socket_.non_blocking(true, ec);
    if (ec) return ec;
    if (::connect(socket_.native_handle(), endpoint.data(), endpoint.size()) == 0) return ec;
    if (errno != EINPROGRESS) return error_code(errno, boost::system::system_category());
    if (!Wait(POLLOUT, ec)) return ec;
    int error = 0;
    socklen_t len = sizeof(error);
    if (::getsockopt(socket_.native_handle(), SOL_SOCKET, SO_ERROR, &error, &len) != 0) {
      error = errno;
    }
    return error_code(error, boost::system::system_category());
  }

  tcp::socket socket_;
  Clock::time_point deadline_ = Clock::time_point::max();
};

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_SERVE_DEADLINE_STREAM_H_
