#include "kernels/rope_kv_write.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "kernels/cuda_status.h"
#include "kernels/rope_kv_write_launch.h"

namespace tandem::kernels {
namespace {

absl::Status Invalid(const absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("RopeKvWrite: ", what));
}

absl::Status CheckArgs(const RopeKvWriteArgs& args) {
  const KvLayout& layout = args.layout;
  if (args.qkv == nullptr) return Invalid("qkv is null");
  if (args.inv_freq == nullptr) return Invalid("inv_freq is null");
  if (args.positions == nullptr) return Invalid("positions is null");
  if (args.slot_mapping == nullptr) return Invalid("slot_mapping is null");
  if (args.kv_pool == nullptr) return Invalid("kv_pool is null");
  if (args.q_out == nullptr) return Invalid("q_out is null");
  if ((args.q_norm == nullptr) != (args.k_norm == nullptr)) {
    return Invalid("q_norm and k_norm must be set together");
  }
  if (args.q_norm != nullptr && !(args.eps > 0.0f)) return Invalid(absl::StrCat("eps ", args.eps));
  if (args.n < 0) return Invalid(absl::StrCat("n ", args.n));
  if (layout.dtype != DType::kBF16 && layout.dtype != DType::kFP8E4M3) {
    return Invalid(absl::StrCat("layout.dtype ", std::string(DTypeName(layout.dtype)),
                                ", want BF16 or F8_E4M3"));
  }
  if (layout.dtype == DType::kFP8E4M3 && args.kv_scales == nullptr) {
    return Invalid("kv_scales is null (an fp8 pool needs its scales)");
  }
  if (layout.head_dim <= 0 || layout.head_dim % 2 != 0) {
    return Invalid(absl::StrCat("layout.head_dim ", layout.head_dim, " (must be even and > 0)"));
  }
  if (layout.num_kv_heads <= 0) {
    return Invalid(absl::StrCat("layout.num_kv_heads ", layout.num_kv_heads));
  }
  if (args.num_heads <= 0 || args.num_heads % layout.num_kv_heads != 0) {
    return Invalid(absl::StrCat("num_heads ", args.num_heads, " (must be a positive multiple of ",
                                "layout.num_kv_heads ", layout.num_kv_heads, ")"));
  }
  if (args.layer < 0 || args.layer >= layout.num_layers) {
    return Invalid(
        absl::StrCat("layer ", args.layer, " (layout.num_layers ", layout.num_layers, ")"));
  }
  if (layout.block_size <= 0) return Invalid(absl::StrCat("layout.block_size ", layout.block_size));
  if (layout.num_blocks < 0) return Invalid(absl::StrCat("layout.num_blocks ", layout.num_blocks));
  return absl::OkStatus();
}

}  // namespace

absl::Status RopeKvWrite(const RopeKvWriteArgs& args, cudaStream_t stream) {
  if (absl::Status status = CheckArgs(args); !status.ok()) return status;
  if (args.n == 0) return absl::OkStatus();
  const KvLayout& layout = args.layout;
  internal::RopeKvWriteLaunchArgs launch;
  launch.qkv = args.qkv;
  launch.qkv_bias = args.qkv_bias;
  launch.q_norm = args.q_norm;
  launch.k_norm = args.k_norm;
  launch.eps = args.eps;
  launch.inv_freq = args.inv_freq;
  launch.positions = args.positions;
  launch.slot_mapping = args.slot_mapping;
  launch.n = args.n;
  launch.num_heads = args.num_heads;
  launch.num_kv_heads = layout.num_kv_heads;
  launch.head_dim = layout.head_dim;
  launch.block_size = layout.block_size;
  launch.pool_slots = int64_t{layout.num_blocks} * layout.block_size;
  launch.layer_offset = layout.Offset(args.layer, 0, 0, 0, 0);
  launch.kv_stride = layout.kv_stride();
  launch.block_stride = layout.block_stride();
  launch.head_stride = layout.head_stride();
  launch.kv_pool = args.kv_pool;
  launch.kv_fp8 = layout.dtype == DType::kFP8E4M3;
  if (launch.kv_fp8) launch.layer_scales = args.kv_scales + 2 * args.layer * layout.num_kv_heads;
  launch.q_out = args.q_out;
  return CudaStatus(internal::LaunchRopeKvWrite(launch, stream), "RopeKvWrite kernel launch");
}

}  // namespace tandem::kernels
