// The router's OpenAI-compatible HTTP API against real clients, on ONE tandem-cluster (1 prefill
// + 1 decode + router started with --api-key and a small --max-body-bytes, tiny random-weight
// Llama):
//   - openai_sdk.mjs: the official `openai` npm SDK (and @grpc/grpc-js for the gRPC reference);
//   - curl: SSE framing, a client that disconnects mid-stream (the decode node's KV blocks and
//     running sequences return to zero, the router sent Cancel, the node stopped generating),
//     malformed and invalid requests (OpenAI error JSON with the right 4xx, then a valid request
//     still succeeds), 401 without the key, /health, /ready and /v1/models.
// Fails (never skips) when node, curl, the npm packages or a server binary is missing.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tandem/v1/node.grpc.pb.h"
#include "tests/conformance/openai/curl_http.h"
#include "tests/integration/process_launcher.h"
#include "tests/integration/test_model_dir.h"

namespace tandem::testing {
namespace {

using json = nlohmann::json;

constexpr char kApiKey[] = "sk-tandem-conformance";
constexpr int kMaxBodyBytes = 64 << 10;

// Where the cluster's parts listen, from tandem-cluster's ready file.
struct Endpoints {
  std::string http;            // router HTTP API
  std::string grpc;            // router gRPC
  std::string router_metrics;  // router /metrics
  std::string decode_grpc;     // decode-0
  std::string decode_metrics;  // decode-0 /metrics
};

absl::StatusOr<Endpoints> ParseEndpoints(const std::string& ready_json) {
  json doc = json::parse(ready_json, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return absl::InternalError("ready file is not JSON: " + ready_json);
  Endpoints e;
  e.http = doc.value("http", "");
  e.grpc = doc.value("grpc", "");
  for (const json& p : doc.value("processes", json::array())) {
    if (p.value("role", "") == "router") e.router_metrics = p.value("metrics", "");
    if (p.value("name", "") == "decode-0") {
      e.decode_grpc = p.value("grpc", "");
      e.decode_metrics = p.value("metrics", "");
    }
  }
  if (e.http.empty() || e.grpc.empty() || e.router_metrics.empty() || e.decode_grpc.empty() ||
      e.decode_metrics.empty()) {
    return absl::InternalError("ready file lacks an endpoint: " + ready_json);
  }
  return e;
}

class OpenAiConformanceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_dir_ = MakeTestTempDir("openai_conformance_");
    scratch_dir_ = tmp_dir_ + "/scratch";
    std::filesystem::create_directories(scratch_dir_);
  }

  void TearDown() override {
    if (cluster_ != nullptr && cluster_->Running()) {
      cluster_->Signal(SIGINT);
      std::optional<int> status = cluster_->WaitExit(absl::Seconds(60));
      EXPECT_TRUE(status.has_value() && WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
          << "tandem-cluster did not stop cleanly: " << cluster_->DescribeExit() << "\n"
          << cluster_->LogTail();
    }
    if (HasFailure()) {
      for (const char* name : {"router", "prefill-0", "decode-0"}) {
        std::string log = tmp_dir_ + "/logs/" + name + ".log";
        std::printf("--- %s ---\n%s\n", log.c_str(), ReadFileTail(log, 40).c_str());
      }
    }
    cluster_.reset();
    std::error_code ec;
    if (std::getenv("TANDEM_KEEP_TEST_DIRS") == nullptr) std::filesystem::remove_all(tmp_dir_, ec);
  }

  void StartCluster() {
    std::string missing =
        MissingBinaries({"tandem-cluster", "tandem-router", "tandem-prefill", "tandem-decode"});
    ASSERT_EQ(missing, "") << missing;
    // The router gets the API key and a small body limit (the 413 check) through
    // tandem-cluster's pass-through flag.
    std::vector<std::string> args = {"--model",
                                     TestModelDir("llama"),
                                     "--prefill",
                                     "1",
                                     "--decode",
                                     "1",
                                     "--threads-per-node",
                                     "1",
                                     "--startup-timeout-s",
                                     "120",
                                     "--log-dir",
                                     tmp_dir_ + "/logs",
                                     "--router-arg=--api-key",
                                     absl::StrCat("--router-arg=", kApiKey),
                                     "--router-arg=--max-body-bytes",
                                     absl::StrCat("--router-arg=", kMaxBodyBytes)};
    LaunchedProcess::Options options;
    options.env = {{"TMPDIR", tmp_dir_}};
    auto cluster = LaunchedProcess::Start(BinaryPath("tandem-cluster"), args, options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = std::move(*cluster);
    absl::StatusOr<std::string> router = cluster_->WaitReady(absl::Seconds(150));
    ASSERT_TRUE(router.ok()) << router.status();
    absl::StatusOr<Endpoints> endpoints = ParseEndpoints(cluster_->ReadyFileText());
    ASSERT_TRUE(endpoints.ok()) << endpoints.status();
    endpoints_ = *endpoints;
  }

  CurlReply Call(const std::string& method, const std::string& path,
                 std::optional<std::string> body, bool with_key = true, int max_time_s = 60) {
    CurlRequest request;
    request.method = method;
    request.url = absl::StrCat("http://", endpoints_.http, path);
    if (with_key) request.headers.push_back(absl::StrCat("Authorization: Bearer ", kApiKey));
    if (body.has_value()) request.headers.push_back("Content-Type: application/json");
    request.body = std::move(body);
    request.scratch_dir = scratch_dir_;
    request.max_time_s = max_time_s;
    return CurlHttp(request);
  }

  absl::StatusOr<v1::NodeLoad> DecodeLoad() {
    if (decode_stub_ == nullptr) {
      decode_stub_ = v1::DecodeNode::NewStub(
          grpc::CreateChannel(endpoints_.decode_grpc, grpc::InsecureChannelCredentials()));
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    v1::LoadRequest request;
    v1::NodeLoad load;
    grpc::Status status = decode_stub_->GetLoad(&ctx, request, &load);
    if (!status.ok()) return absl::UnavailableError(status.error_message());
    return load;
  }

  // Polls the decode node until it holds nothing: no running, waiting or reserved sequences and
  // every KV block free. Returns the last load seen (or the error) for the failure message.
  bool WaitDecodeIdle(absl::Duration timeout, std::string* last) {
    const absl::Time deadline = absl::Now() + timeout;
    while (true) {
      absl::StatusOr<v1::NodeLoad> load = DecodeLoad();
      if (load.ok()) {
        *last = load->ShortDebugString();
        if (load->num_running() == 0 && load->num_waiting() == 0 && load->num_awaiting_kv() == 0 &&
            load->num_held_kv_blocks() == 0 &&
            load->num_free_kv_blocks() == load->num_kv_blocks()) {
          return true;
        }
      } else {
        *last = load.status().ToString();
      }
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(50));
    }
  }

  std::optional<double> Metric(const std::string& address, const std::string& series) {
    CommandResult r = RunCommand(
        kCurl, {"-sS", "--fail", "--max-time", "10", absl::StrCat("http://", address, "/metrics")},
        {}, absl::Seconds(20));
    if (r.exit_code != 0) {
      ADD_FAILURE() << "scraping " << address << ": curl exit " << r.exit_code << ": "
                    << r.stderr_text;
      return std::nullopt;
    }
    return PrometheusSample(r.stdout_text, series);
  }

  // Expects an OpenAI error: `status`, a JSON {"error": {"message", "type", "param", "code"}}
  // body, and `param` when given.
  void ExpectOpenAiError(const CurlReply& reply, int status, const std::string& param = "") {
    EXPECT_EQ(reply.status, status) << reply.Describe();
    EXPECT_TRUE(absl::StartsWith(reply.Header("Content-Type"), "application/json"))
        << reply.Header("Content-Type");
    json doc = json::parse(reply.body, nullptr, false);
    ASSERT_TRUE(doc.is_object()) << "not JSON: " << reply.body;
    ASSERT_TRUE(doc.contains("error") && doc["error"].is_object()) << reply.body;
    const json& error = doc["error"];
    ASSERT_TRUE(error.contains("message") && error["message"].is_string()) << reply.body;
    EXPECT_FALSE(error["message"].get<std::string>().empty()) << reply.body;
    EXPECT_TRUE(error.contains("type") && error["type"].is_string()) << reply.body;
    EXPECT_TRUE(error.contains("param") && error.contains("code")) << reply.body;
    if (!param.empty()) {
      EXPECT_TRUE(error["param"].is_string() && error["param"] == param)
          << "param: expected " << param << ", body " << reply.body;
    }
  }

  void RunSdkScript();
  void CheckEndpointsAndAuth();
  void CheckSseFraming();
  // A client that goes away in the middle of a long request (streamed or not).
  void CheckClientDisconnect(bool stream);
  void CheckBadRequests();

  std::string tmp_dir_;
  std::string scratch_dir_;
  std::unique_ptr<LaunchedProcess> cluster_;
  Endpoints endpoints_;
  std::unique_ptr<v1::DecodeNode::Stub> decode_stub_;
};

void OpenAiConformanceTest::RunSdkScript() {
  const std::string node = TANDEM_NODE_EXECUTABLE;
  ASSERT_FALSE(node.empty()) << "node was not found at configure time: run "
                                "scripts/install-deps.sh and re-run cmake";
  ASSERT_EQ(::access(node.c_str(), X_OK), 0) << node << " is not executable";
  const std::string modules = std::string(TANDEM_SOURCE_DIR) + "/tests/conformance/node_modules";
  for (const char* package : {"openai", "@grpc/grpc-js", "@grpc/proto-loader"}) {
    ASSERT_EQ(::access((modules + "/" + package).c_str(), R_OK), 0)
        << modules << "/" << package << " is missing: run scripts/install-deps.sh";
  }
  CommandResult r =
      RunCommand(node,
                 {std::string(TANDEM_SOURCE_DIR) + "/tests/conformance/openai/openai_sdk.mjs",
                  "--http", endpoints_.http, "--grpc", endpoints_.grpc, "--api-key", kApiKey},
                 {}, absl::Seconds(240));
  std::printf("%s", r.stdout_text.c_str());
  EXPECT_EQ(r.exit_code, 0) << "openai_sdk.mjs failed:\n" << r.stdout_text << r.stderr_text;
  EXPECT_NE(r.stdout_text.find(R"({"check":"all","ok":true})"), std::string::npos);
}

void OpenAiConformanceTest::CheckEndpointsAndAuth() {
  CurlReply health = Call("GET", "/health", std::nullopt, /*with_key=*/false);
  EXPECT_EQ(health.status, 200) << health.Describe();
  EXPECT_EQ(json::parse(health.body, nullptr, false), json({{"status", "ok"}})) << health.body;

  CurlReply ready = Call("GET", "/ready", std::nullopt, /*with_key=*/false);
  EXPECT_EQ(ready.status, 200) << ready.Describe();
  EXPECT_EQ(json::parse(ready.body, nullptr, false), json({{"status", "ready"}})) << ready.body;

  CurlReply models = Call("GET", "/v1/models", std::nullopt);
  EXPECT_EQ(models.status, 200) << models.Describe();
  json list = json::parse(models.body, nullptr, false);
  ASSERT_TRUE(list.is_object() && list.value("object", "") == "list") << models.body;
  ASSERT_EQ(list["data"].size(), 1u) << models.body;
  // tandem-cluster serves the model under its directory's name.
  EXPECT_EQ(list["data"][0].value("id", ""), "generate-llama") << models.body;
  EXPECT_EQ(list["data"][0].value("object", ""), "model") << models.body;

  // /v1/* needs the key; /health and /ready do not.
  ExpectOpenAiError(Call("GET", "/v1/models", std::nullopt, /*with_key=*/false), 401);
  const std::string body = R"({"model": "generate-llama", "prompt": "Hi", "max_tokens": 2})";
  ExpectOpenAiError(Call("POST", "/v1/completions", body, /*with_key=*/false), 401);
  CurlRequest wrong_key;
  wrong_key.method = "POST";
  wrong_key.url = absl::StrCat("http://", endpoints_.http, "/v1/chat/completions");
  wrong_key.headers = {"Authorization: Bearer not-the-key", "Content-Type: application/json"};
  wrong_key.body = R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2})";
  wrong_key.scratch_dir = scratch_dir_;
  ExpectOpenAiError(CurlHttp(wrong_key), 401);
}

void OpenAiConformanceTest::CheckSseFraming() {
  struct Case {
    const char* path;
    const char* body;
    const char* object;
  };
  const Case cases[] = {
      {"/v1/completions",
       R"({"model": "generate-llama", "prompt": "Hello", "max_tokens": 6, "temperature": 0,
           "ignore_eos": true, "stream": true, "stream_options": {"include_usage": true}})",
       "text_completion"},
      {"/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 6,
           "temperature": 0, "ignore_eos": true, "stream": true,
           "stream_options": {"include_usage": true}})",
       "chat.completion.chunk"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.path);
    CurlReply reply = Call("POST", c.path, std::string(c.body));
    ASSERT_EQ(reply.curl_exit, 0) << reply.Describe();
    ASSERT_EQ(reply.status, 200) << reply.Describe();
    EXPECT_EQ(reply.Header("Content-Type"), "text/event-stream");
    EXPECT_EQ(reply.Header("Transfer-Encoding"), "chunked");
    EXPECT_FALSE(reply.Header("X-Request-Id").empty());
    std::string framing_error;
    std::vector<std::string> events = SplitSseEvents(reply.body, &framing_error);
    EXPECT_EQ(framing_error, "");
    ASSERT_GE(events.size(), 3u) << reply.body;
    EXPECT_EQ(events.back(), "data: [DONE]") << reply.body;
    int content_tokens = 0;
    std::string finish_reason;
    for (size_t i = 0; i + 1 < events.size(); ++i) {
      const std::string& event = events[i];
      ASSERT_TRUE(absl::StartsWith(event, "data: ")) << "event " << i << ": " << event;
      ASSERT_EQ(event.find('\n'), std::string::npos) << "event " << i << " spans lines: " << event;
      json chunk = json::parse(event.substr(6), nullptr, false);
      ASSERT_TRUE(chunk.is_object()) << "event " << i << " is not JSON: " << event;
      EXPECT_EQ(chunk.value("object", ""), c.object) << event;
      const json& choices = chunk["choices"];
      if (i + 2 == events.size()) {
        // include_usage: the last data event before [DONE] carries usage and no choices.
        EXPECT_TRUE(choices.is_array() && choices.empty()) << event;
        EXPECT_EQ(chunk["usage"].value("completion_tokens", -1), 6) << event;
        continue;
      }
      ASSERT_TRUE(choices.is_array() && choices.size() == 1) << event;
      if (choices[0]["finish_reason"].is_string()) {
        EXPECT_EQ(finish_reason, "") << "two finish reasons";
        finish_reason = choices[0]["finish_reason"];
      }
      const json& text = choices[0].contains("delta") ? choices[0]["delta"].value("content", json())
                                                      : choices[0]["text"];
      if (text.is_string() && !text.get<std::string>().empty()) ++content_tokens;
    }
    EXPECT_EQ(finish_reason, "length");
    EXPECT_GE(content_tokens, 1);
  }

  // A non-streaming request is one JSON body.
  CurlReply whole = Call("POST", "/v1/completions",
                         std::string(R"({"prompt": "Hello", "max_tokens": 3, "temperature": 0})"));
  EXPECT_EQ(whole.status, 200) << whole.Describe();
  EXPECT_TRUE(absl::StartsWith(whole.Header("Content-Type"), "application/json"));
  json doc = json::parse(whole.body, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << whole.body;
  EXPECT_EQ(doc["usage"].value("completion_tokens", -1), 3) << whole.body;
}

void OpenAiConformanceTest::CheckClientDisconnect(bool stream) {
  constexpr int kMaxTokens = 6000;
  std::string last_load;
  ASSERT_TRUE(WaitDecodeIdle(absl::Seconds(30), &last_load)) << "not idle before: " << last_load;
  std::optional<double> cancels_before =
      Metric(endpoints_.router_metrics, "tandem_router_cancels_sent_total");
  std::optional<double> generated_before =
      Metric(endpoints_.decode_metrics, "tandem_decode_generated_tokens_total");
  ASSERT_TRUE(cancels_before.has_value() && generated_before.has_value());

  // A long greedy request; curl is killed halfway (its socket closes without reading the rest).
  const std::string body_file = absl::StrCat(scratch_dir_, "/long-", stream, ".json");
  std::ofstream(body_file) << absl::StrCat(
      R"({"prompt": "Tell me a very long story.", "max_tokens": )", kMaxTokens,
      R"(, "temperature": 0, "ignore_eos": true, "stream": )", stream ? "true" : "false", "}");
  LaunchedProcess::Options options;
  options.add_ready_file_flag = false;
  auto curl = LaunchedProcess::Start(
      kCurl,
      {"-sS", "-N", "-H", absl::StrCat("Authorization: Bearer ", kApiKey), "-H",
       "Content-Type: application/json", "--data-binary", "@" + body_file,
       absl::StrCat("http://", endpoints_.http, "/v1/completions")},
      options);
  ASSERT_TRUE(curl.ok()) << curl.status();
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  int events = 0;
  std::string seen;
  bool running_on_decode = false;
  while (absl::Now() < deadline && (*curl)->Running()) {
    if (stream) {
      // curl -N hands the events on as they come: some must arrive long before the end.
      seen = (*curl)->Log();
      events = 0;
      for (size_t pos = seen.find("data: "); pos != std::string::npos;
           pos = seen.find("data: ", pos + 1)) {
        ++events;
      }
      if (events >= 8) break;
    } else {
      absl::StatusOr<v1::NodeLoad> load = DecodeLoad();
      if (load.ok() && load->num_running() >= 1) {
        running_on_decode = true;
        break;
      }
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  if (stream) {
    ASSERT_GE(events, 8) << "curl: " << (*curl)->DescribeExit() << "\n" << seen.substr(0, 2000);
  } else {
    ASSERT_TRUE(running_on_decode)
        << "the request never ran on the decode node; curl: " << (*curl)->DescribeExit() << "\n"
        << (*curl)->Log();
    // Some tokens into the request.
    absl::SleepFor(absl::Milliseconds(200));
  }
  (*curl)->Kill();
  seen = (*curl)->Log();
  if (stream) {
    EXPECT_EQ(seen.find("[DONE]"), std::string::npos) << "the stream ended before the disconnect";
  } else {
    EXPECT_EQ(seen.find("text_completion"), std::string::npos)
        << "the response came before the disconnect: " << seen.substr(0, 300);
  }

  // The router notices, cancels on the decode node, which frees everything the request held.
  EXPECT_TRUE(WaitDecodeIdle(absl::Seconds(30), &last_load))
      << "the decode node still holds the disconnected request: " << last_load;
  std::optional<double> cancels_after =
      Metric(endpoints_.router_metrics, "tandem_router_cancels_sent_total");
  std::optional<double> generated_after =
      Metric(endpoints_.decode_metrics, "tandem_decode_generated_tokens_total");
  ASSERT_TRUE(cancels_after.has_value() && generated_after.has_value());
  EXPECT_GE(*cancels_after - *cancels_before, 1) << "the router sent no Cancel";
  // The node stopped generating: far fewer tokens than the request asked for.
  EXPECT_LT(*generated_after - *generated_before, kMaxTokens)
      << "the decode node generated the whole request";
  std::printf("disconnect (%s): %d events read, decode generated %.0f of %d tokens, %.0f Cancel\n",
              stream ? "streaming" : "non-streaming", events, *generated_after - *generated_before,
              kMaxTokens, *cancels_after - *cancels_before);
}

void OpenAiConformanceTest::CheckBadRequests() {
  struct Case {
    const char* name;
    const char* path;
    std::string body;
    int status;
    const char* param;
  };
  const std::string big_prompt(kMaxBodyBytes + 1024, 'a');
  const std::vector<Case> cases = {
      {"malformed JSON", "/v1/completions", R"({"prompt": "Hi", "max_tokens": )", 400, ""},
      {"not an object", "/v1/completions", R"(["prompt"])", 400, ""},
      {"max_tokens a string", "/v1/completions", R"({"prompt": "Hi", "max_tokens": "ten"})", 400,
       "max_tokens"},
      {"negative max_tokens", "/v1/completions", R"({"prompt": "Hi", "max_tokens": -1})", 400,
       "max_tokens"},
      {"temperature < 0", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "Hi"}], "temperature": -0.5})", 400,
       "temperature"},
      {"messages not an array", "/v1/chat/completions", R"({"messages": "Hi"})", 400, "messages"},
      {"stream not a boolean", "/v1/completions", R"({"prompt": "Hi", "stream": "yes"})", 400,
       "stream"},
      {"invalid UTF-8 in a string", "/v1/completions",
       "{\"prompt\": \"caf\xC3\x28 \xFF\", \"max_tokens\": 2}", 400, ""},
      {"unknown field", "/v1/completions", R"({"prompt": "Hi", "max_tokens": 2, "foo": 1})", 400,
       "foo"},
      {"n > 1", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "Hi"}], "n": 2})", 400, "n"},
      {"missing prompt", "/v1/completions", R"({"max_tokens": 2})", 400, "prompt"},
      {"body over --max-body-bytes", "/v1/completions",
       absl::StrCat(R"({"prompt": ")", big_prompt, R"(", "max_tokens": 2})"), 413, ""},
      {"unknown model", "/v1/completions",
       R"({"model": "no-such-model", "prompt": "Hi", "max_tokens": 2})", 404, ""},
  };
  // Every refused generation request is counted by API and status, including the ones the HTTP
  // layer refuses before the request runner sees them.
  auto refused = [&](const std::string& api) {
    return Metric(endpoints_.router_metrics, absl::StrCat("tandem_router_requests_total{api=\"",
                                                          api, "\",status=\"invalid_argument\"}"))
        .value_or(0);
  };
  const double completions_before = refused("completions");
  const double chat_before = refused("chat_completions");
  int completions_400 = 0;
  int chat_400 = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ExpectOpenAiError(Call("POST", c.path, c.body), c.status, c.param);
    if (c.status == 400) ++(std::string(c.path) == "/v1/completions" ? completions_400 : chat_400);
  }
  EXPECT_EQ(refused("completions") - completions_before, completions_400);
  EXPECT_EQ(refused("chat_completions") - chat_before, chat_400);
  {
    SCOPED_TRACE("unknown path");
    ExpectOpenAiError(Call("GET", "/v1/nothing-here", std::nullopt), 404);
  }
  {
    SCOPED_TRACE("wrong method");
    CurlReply reply = Call("GET", "/v1/completions", std::nullopt);
    ExpectOpenAiError(reply, 405);
    EXPECT_EQ(reply.Header("Allow"), "POST");
  }

  // The server keeps serving.
  CurlReply ok = Call("POST", "/v1/chat/completions",
                      std::string(R"({"messages": [{"role": "user", "content": "Hi"}],
                                      "max_tokens": 4, "temperature": 0, "ignore_eos": true})"));
  EXPECT_EQ(ok.status, 200) << ok.Describe();
  json doc = json::parse(ok.body, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << ok.body;
  EXPECT_EQ(doc["usage"].value("completion_tokens", -1), 4) << ok.body;
  EXPECT_EQ(doc["choices"][0].value("finish_reason", ""), "length") << ok.body;
}

TEST_F(OpenAiConformanceTest, SdkAndCurlAgainstOneCluster) {
  ASSERT_EQ(::access(kCurl, X_OK), 0) << kCurl << " is missing (apt-get install curl)";
  ASSERT_NO_FATAL_FAILURE(StartCluster());
  {
    SCOPED_TRACE("endpoints and auth");
    CheckEndpointsAndAuth();
  }
  {
    SCOPED_TRACE("openai SDK");
    RunSdkScript();
  }
  {
    SCOPED_TRACE("SSE framing");
    CheckSseFraming();
  }
  {
    SCOPED_TRACE("client disconnect, streaming");
    CheckClientDisconnect(/*stream=*/true);
  }
  {
    SCOPED_TRACE("client disconnect, not streaming");
    CheckClientDisconnect(/*stream=*/false);
  }
  {
    SCOPED_TRACE("bad requests");
    CheckBadRequests();
  }
  EXPECT_TRUE(cluster_->Running()) << cluster_->LogTail();
}

}  // namespace
}  // namespace tandem::testing
