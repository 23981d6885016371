#include "tests/conformance/openai/curl_http.h"

#include <atomic>
#include <cstdlib>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "tests/integration/process_launcher.h"

namespace tandem::testing {
namespace {

// Parses curl -i output: header blocks ("HTTP/x y reason\r\n" + headers + "\r\n"), interim 1xx
// ones first, then the body.
void ParseResponse(const std::string& out, CurlReply* reply) {
  size_t pos = 0;
  while (absl::StartsWith(absl::string_view(out).substr(pos), "HTTP/")) {
    const size_t end = out.find("\r\n\r\n", pos);
    if (end == std::string::npos) return;
    const std::vector<std::string> lines =
        absl::StrSplit(out.substr(pos, end - pos), "\r\n", absl::SkipEmpty());
    pos = end + 4;
    if (lines.empty()) return;
    const std::vector<std::string> status_line = absl::StrSplit(lines[0], absl::MaxSplits(' ', 2));
    int status = 0;
    if (status_line.size() < 2 || !absl::SimpleAtoi(status_line[1], &status)) return;
    reply->status = status;
    reply->headers.clear();
    for (size_t i = 1; i < lines.size(); ++i) {
      const size_t colon = lines[i].find(':');
      if (colon == std::string::npos) continue;
      reply->headers.emplace_back(
          std::string(absl::StripAsciiWhitespace(lines[i].substr(0, colon))),
          std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1))));
    }
    if (status >= 200) break;
  }
  reply->body = out.substr(pos);
}

}  // namespace

std::string CurlReply::Header(const std::string& name) const {
  for (const auto& [key, value] : headers) {
    if (absl::EqualsIgnoreCase(key, name)) return value;
  }
  return "";
}

std::string CurlReply::Describe() const {
  return absl::StrCat("HTTP ", status, ", curl exit ", curl_exit,
                      curl_stderr.empty() ? "" : absl::StrCat(" (", curl_stderr, ")"),
                      ", body: ", body.substr(0, 600));
}

CurlReply CurlHttp(const CurlRequest& request) {
  static std::atomic<int> next_body{0};
  std::vector<std::string> args = {
      "-sS", "-i",           "-N",       "--max-time", std::to_string(request.max_time_s),
      "-X",  request.method, request.url};
  for (const std::string& h : request.headers) {
    args.push_back("-H");
    args.push_back(h);
  }
  if (request.body.has_value()) {
    const std::string path =
        absl::StrCat(request.scratch_dir, "/body-", next_body.fetch_add(1), ".bin");
    std::ofstream(path, std::ios::binary) << *request.body;
    args.push_back("--data-binary");
    args.push_back("@" + path);
  }
  CommandResult r = RunCommand(kCurl, args, {}, absl::Seconds(request.max_time_s + 30));
  CurlReply reply;
  reply.curl_exit = r.exit_code;
  reply.curl_stderr = std::string(absl::StripTrailingAsciiWhitespace(r.stderr_text));
  ParseResponse(r.stdout_text, &reply);
  return reply;
}

std::vector<std::string> SplitSseEvents(const std::string& body, std::string* framing_error) {
  std::vector<std::string> events;
  size_t pos = 0;
  while (pos < body.size()) {
    const size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) {
      *framing_error = absl::StrCat(
          "the body does not end with a blank line after its last event: ", body.substr(pos, 200));
      break;
    }
    events.push_back(body.substr(pos, end - pos));
    pos = end + 2;
  }
  return events;
}

std::optional<double> PrometheusSample(const std::string& exposition, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (!absl::StartsWith(line, series) || line.size() <= series.size() ||
        line[series.size()] != ' ') {
      continue;
    }
    double value = 0;
    absl::string_view rest = absl::StripAsciiWhitespace(line.substr(series.size() + 1));
    // A timestamp may follow the value.
    rest = rest.substr(0, rest.find(' '));
    if (absl::SimpleAtod(rest, &value)) return value;
  }
  return std::nullopt;
}

}  // namespace tandem::testing
