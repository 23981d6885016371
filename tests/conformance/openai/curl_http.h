// HTTP requests from tests through /usr/bin/curl (an independent HTTP client): the status line,
// the headers and the body exactly as the server sent them (chunked encoding undone), and
// server-sent-event bodies split into their events. Also reads one sample out of a Prometheus
// text exposition.
#ifndef TANDEM_TESTS_CONFORMANCE_OPENAI_CURL_HTTP_H_
#define TANDEM_TESTS_CONFORMANCE_OPENAI_CURL_HTTP_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tandem::testing {

inline constexpr char kCurl[] = "/usr/bin/curl";

struct CurlRequest {
  std::string method = "GET";
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  // Sent with --data-binary from a file in `scratch_dir` (any bytes, any size); nullopt: none.
  std::optional<std::string> body;
  std::string scratch_dir;
  int max_time_s = 60;
};

struct CurlReply {
  int curl_exit = -1;  // curl's exit status; 0 when a response was read completely
  std::string curl_stderr;
  int status = 0;  // the final response's status (interim 1xx responses skipped)
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  // The first header named `name` (case-insensitive); "" when absent.
  std::string Header(const std::string& name) const;
  // One line for failure messages: status, curl exit, the start of the body.
  std::string Describe() const;
};

// Runs curl -sS -i (-N) for `request`.
CurlReply CurlHttp(const CurlRequest& request);

// Splits an SSE body into its events (the text between blank lines "\n\n"). `framing_error` is
// set to what is wrong when the body does not end with a blank line.
std::vector<std::string> SplitSseEvents(const std::string& body, std::string* framing_error);

// The value of the sample `series` ("name" or "name{label=\"v\",...}", written exactly as the
// exposition writes it) in a Prometheus text exposition; nullopt when absent.
std::optional<double> PrometheusSample(const std::string& exposition, const std::string& series);

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_CONFORMANCE_OPENAI_CURL_HTTP_H_
