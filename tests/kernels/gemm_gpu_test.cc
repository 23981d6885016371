#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/gemm.h"
#include "kernels/gemm_reference.h"
#include "tests/kernels/gpu_test_util.h"

namespace tandem::kernels {
namespace {

using testing::Download;
using testing::Poisoned;
using testing::Upload;

// Euclidean norm of each of `count` rows of `width` bf16 values.
std::vector<double> RowNorms(const std::vector<Bf16Bits>& m, int count, int width) {
  std::vector<double> norms(count);
  for (int r = 0; r < count; ++r) {
    double sum = 0;
    for (int i = 0; i < width; ++i) {
      const double v = Bf16ToFloat(m[int64_t{r} * width + i]);
      sum += v * v;
    }
    norms[r] = std::sqrt(sum);
  }
  return norms;
}

// got (f32, or bf16 bits widened) against the near-exact reference. An f32 accumulation in any
// order stays far within 5e-5 * |x_r| * |w_j| (Cauchy-Schwarz bounds sum_i |x_ri w_ji| by the
// norms) for these sizes; a bf16 output adds one rounding of the value.
::testing::AssertionResult LinearClose(const std::vector<float>& got,
                                       const std::vector<float>& want,
                                       const std::vector<double>& x_norms,
                                       const std::vector<double>& w_norms, int rows, int n,
                                       bool bf16_output) {
  for (int r = 0; r < rows; ++r) {
    for (int j = 0; j < n; ++j) {
      const int64_t at = int64_t{r} * n + j;
      const double tolerance =
          5e-5 * x_norms[r] * w_norms[j] + (bf16_output ? kBf16Epsilon * std::fabs(want[at]) : 0.0);
      if (!(std::fabs(double{got[at]} - double{want[at]}) <= tolerance)) {
        return ::testing::AssertionFailure()
               << "y[" << r << ", " << j << "]: got " << got[at] << " want " << want[at]
               << " (tolerance " << tolerance << ")";
      }
    }
  }
  return ::testing::AssertionSuccess();
}

std::vector<float> RunLinear(GemmRunner& runner, const DeviceBuffer& x, const DeviceBuffer& w,
                             int rows, int k, int n, GemmOutput output) {
  const size_t size = size_t(rows) * n;
  const DeviceBuffer y =
      output == GemmOutput::kF32 ? Poisoned<float>(size) : Poisoned<Bf16Bits>(size);
  LinearArgs args;
  args.x = x.as<__nv_bfloat16>();
  args.w = w.as<__nv_bfloat16>();
  args.y = y.data();
  args.rows = rows;
  args.k = k;
  args.n = n;
  args.output = output;
  const absl::Status status = runner.Linear(args, nullptr);
  EXPECT_TRUE(status.ok()) << status;
  if (output == GemmOutput::kF32) return Download<float>(y, size);
  return FromBf16(Download<Bf16Bits>(y, size));
}

struct Shape {
  int rows;
  int k;
  int n;
};

TEST(GemmRunnerGpuTest, LinearMatchesReferenceOverShapes) {
  TANDEM_REQUIRE_GPU();
  auto runner = GemmRunner::Create();
  ASSERT_TRUE(runner.ok()) << runner.status();
  uint64_t seed = 1;
  for (const Shape& s :
       {Shape{1, 64, 64}, Shape{7, 64, 4100}, Shape{128, 64, 4096}, Shape{333, 64, 64},
        Shape{1, 4096, 4096}, Shape{7, 4100, 4100}, Shape{128, 4096, 64}, Shape{333, 4100, 64},
        Shape{1, 4100, 128}, Shape{333, 4096, 256}, Shape{5, 72, 24}}) {
    SCOPED_TRACE(::testing::Message() << "rows=" << s.rows << " k=" << s.k << " n=" << s.n);
    const std::vector<Bf16Bits> x = ToBf16(RandomUniform(size_t(s.rows) * s.k, -1, 1, seed++));
    const std::vector<Bf16Bits> w = ToBf16(RandomUniform(size_t(s.n) * s.k, -1, 1, seed++));
    const DeviceBuffer x_dev = Upload(x);
    const DeviceBuffer w_dev = Upload(w);
    std::vector<float> want(size_t(s.rows) * s.n);
    LinearReference(x.data(), s.rows, s.k, w.data(), s.n, want.data());
    const std::vector<double> x_norms = RowNorms(x, s.rows, s.k);
    const std::vector<double> w_norms = RowNorms(w, s.n, s.k);
    for (GemmOutput output : {GemmOutput::kF32, GemmOutput::kBf16}) {
      const bool bf16 = output == GemmOutput::kBf16;
      SCOPED_TRACE(bf16 ? "bf16 output" : "f32 output");
      const std::vector<float> got = RunLinear(**runner, x_dev, w_dev, s.rows, s.k, s.n, output);
      EXPECT_TRUE(LinearClose(got, want, x_norms, w_norms, s.rows, s.n, bf16));
    }
  }
}

TEST(GemmRunnerGpuTest, LinearWorksDuringStreamCapture) {
  TANDEM_REQUIRE_GPU();
  auto runner = GemmRunner::Create();
  ASSERT_TRUE(runner.ok()) << runner.status();
  const int rows = 7;
  const int k = 4100;
  const int n = 256;
  const size_t size = size_t(rows) * n;
  const std::vector<Bf16Bits> x = ToBf16(RandomUniform(size_t(rows) * k, -1, 1, 51));
  const std::vector<Bf16Bits> w = ToBf16(RandomUniform(size_t(n) * k, -1, 1, 52));
  const DeviceBuffer x_dev = Upload(x);
  const DeviceBuffer w_dev = Upload(w);
  const DeviceBuffer y_graph = Poisoned<float>(size);
  LinearArgs args;
  args.x = x_dev.as<__nv_bfloat16>();
  args.w = w_dev.as<__nv_bfloat16>();
  args.y = y_graph.data();
  args.rows = rows;
  args.k = k;
  args.n = n;
  args.output = GemmOutput::kF32;

  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  // The shape is new to the runner: its plan is made during the capture too.
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  const absl::Status captured = (*runner)->Linear(args, stream);
  cudaGraph_t graph = nullptr;
  const cudaError_t end_capture = cudaStreamEndCapture(stream, &graph);
  ASSERT_TRUE(captured.ok()) << captured;
  ASSERT_EQ(end_capture, cudaSuccess) << cudaGetErrorString(end_capture);
  // Capturing runs nothing: y is still all poison.
  for (float v : Download<float>(y_graph, size)) ASSERT_TRUE(std::isnan(v));

  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  const std::vector<float> from_graph = Download<float>(y_graph, size);

  std::vector<float> want(size);
  LinearReference(x.data(), rows, k, w.data(), n, want.data());
  EXPECT_TRUE(
      LinearClose(from_graph, want, RowNorms(x, rows, k), RowNorms(w, n, k), rows, n, false));
  // The same call outside the capture, with the same plan, gives the same bits.
  const std::vector<float> direct = RunLinear(**runner, x_dev, w_dev, rows, k, n, GemmOutput::kF32);
  EXPECT_EQ(std::memcmp(from_graph.data(), direct.data(), sizeof(float) * size), 0);

  // The graph reads x when it runs: new inputs, new result.
  const std::vector<Bf16Bits> x2 = ToBf16(RandomUniform(size_t(rows) * k, -1, 1, 53));
  ASSERT_EQ(
      cudaMemcpy(x_dev.data(), x2.data(), sizeof(Bf16Bits) * x2.size(), cudaMemcpyHostToDevice),
      cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  LinearReference(x2.data(), rows, k, w.data(), n, want.data());
  EXPECT_TRUE(LinearClose(Download<float>(y_graph, size), want, RowNorms(x2, rows, k),
                          RowNorms(w, n, k), rows, n, false));

  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

// Autotune keeps the fastest of the heuristic's candidates; whichever it keeps computes the same
// product within the same bound, bf16 output included (whose split-K partials must be summed in
// f32), and it refuses to run inside a capture.
TEST(GemmRunnerGpuTest, AutotunedPlansMatchTheReference) {
  TANDEM_REQUIRE_GPU();
  auto runner = GemmRunner::Create();
  ASSERT_TRUE(runner.ok()) << runner.status();
  uint64_t seed = 71;
  for (const Shape& s : {Shape{1, 4096, 4096}, Shape{7, 4100, 4100}, Shape{32, 4096, 1024}}) {
    SCOPED_TRACE(::testing::Message() << "rows=" << s.rows << " k=" << s.k << " n=" << s.n);
    const std::vector<Bf16Bits> x = ToBf16(RandomUniform(size_t(s.rows) * s.k, -1, 1, seed++));
    const std::vector<Bf16Bits> w = ToBf16(RandomUniform(size_t(s.n) * s.k, -1, 1, seed++));
    const DeviceBuffer x_dev = Upload(x);
    const DeviceBuffer w_dev = Upload(w);
    std::vector<float> want(size_t(s.rows) * s.n);
    LinearReference(x.data(), s.rows, s.k, w.data(), s.n, want.data());
    for (GemmOutput output : {GemmOutput::kF32, GemmOutput::kBf16}) {
      const bool bf16 = output == GemmOutput::kBf16;
      SCOPED_TRACE(bf16 ? "bf16 output" : "f32 output");
      const DeviceBuffer y = bf16 ? Poisoned<Bf16Bits>(want.size()) : Poisoned<float>(want.size());
      LinearArgs args;
      args.x = x_dev.as<__nv_bfloat16>();
      args.w = w_dev.as<__nv_bfloat16>();
      args.y = y.data();
      args.rows = s.rows;
      args.k = s.k;
      args.n = s.n;
      args.output = output;
      absl::StatusOr<GemmTuning> tuning = (*runner)->Autotune(args, nullptr, 8, 3);
      ASSERT_TRUE(tuning.ok()) << tuning.status();
      EXPECT_GE(tuning->candidates, 1);
      EXPECT_LT(tuning->chosen, tuning->candidates);
      EXPECT_GT(tuning->heuristic_seconds, 0);
      EXPECT_GT(tuning->best_seconds, 0);
      EXPECT_LE(tuning->best_seconds, tuning->heuristic_seconds);
      const std::vector<float> got = RunLinear(**runner, x_dev, w_dev, s.rows, s.k, s.n, output);
      EXPECT_TRUE(LinearClose(got, want, RowNorms(x, s.rows, s.k), RowNorms(w, s.n, s.k), s.rows,
                              s.n, bf16));
    }
  }
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  const DeviceBuffer x = Poisoned<Bf16Bits>(64 * 64);
  const DeviceBuffer y = Poisoned<float>(64 * 64);
  LinearArgs args;
  args.x = x.as<__nv_bfloat16>();
  args.w = x.as<__nv_bfloat16>();
  args.y = y.data();
  args.rows = 64;
  args.k = 64;
  args.n = 64;
  args.output = GemmOutput::kF32;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  const absl::StatusOr<GemmTuning> during_capture = (*runner)->Autotune(args, stream);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  EXPECT_EQ(during_capture.status().code(), absl::StatusCode::kFailedPrecondition)
      << during_capture.status();
  if (graph != nullptr) {
    EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  }
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

TEST(GemmRunnerGpuTest, ChecksArguments) {
  TANDEM_REQUIRE_GPU();
  auto runner = GemmRunner::Create();
  ASSERT_TRUE(runner.ok()) << runner.status();
  const DeviceBuffer x = Poisoned<Bf16Bits>(64 * 64);
  const DeviceBuffer w = Poisoned<Bf16Bits>(64 * 64);
  const DeviceBuffer y = Poisoned<float>(64 * 64);
  LinearArgs good;
  good.x = x.as<__nv_bfloat16>();
  good.w = w.as<__nv_bfloat16>();
  good.y = y.data();
  good.rows = 0;  // a no-op
  good.k = 64;
  good.n = 64;
  EXPECT_TRUE((*runner)->Linear(good, nullptr).ok());
  good.x = nullptr;  // never read when there are no rows
  EXPECT_TRUE((*runner)->Linear(good, nullptr).ok());
  good.x = x.as<__nv_bfloat16>();
  good.rows = 4;
  auto expect_invalid = [&](const LinearArgs& args, const char* what) {
    const absl::Status status = (*runner)->Linear(args, nullptr);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << what;
    EXPECT_NE(status.message().find(what), absl::string_view::npos) << status;
  };
  LinearArgs bad = good;
  bad.rows = -1;
  expect_invalid(bad, "rows");
  bad = good;
  bad.k = 0;
  expect_invalid(bad, "k 0");
  bad = good;
  bad.n = -3;
  expect_invalid(bad, "n -3");
  bad = good;
  bad.w = nullptr;
  expect_invalid(bad, "w is null");
  bad = good;
  bad.y = nullptr;
  expect_invalid(bad, "y is null");
  bad = good;
  bad.x = x.as<__nv_bfloat16>() + 1;  // 2-byte aligned only
  expect_invalid(bad, "aligned");
  // The poison in y is untouched by the calls that were refused.
  for (float v : Download<float>(y, 64 * 64)) ASSERT_TRUE(std::isnan(v));
}

}  // namespace
}  // namespace tandem::kernels
