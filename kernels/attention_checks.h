// The argument checks prefill and decode attention share: a bf16 or fp8 (E4M3, with its scales)
// pool of head_dim 64 or 128, query heads a multiple of KV heads within the grid limit, the layer
// in range, a sane layout and window, and 16-byte aligned q/out/pool (the kernels load 16 bytes at
// a time).
#ifndef TANDEM_KERNELS_ATTENTION_CHECKS_H_
#define TANDEM_KERNELS_ATTENTION_CHECKS_H_

#include <string>

#include "absl/status/status.h"
#include "common/kv/kv_layout.h"

namespace tandem::kernels {

// InvalidArgument starting with "`kernel`: " and naming the bad argument, else OK.
// `kv_scales` must be set for an fp8 pool (and is not read here).
absl::Status CheckAttentionShape(const std::string& kernel, const KvLayout& layout, int num_heads,
                                 int layer, int sliding_window, const float* kv_scales);
absl::Status CheckAttentionPointers(const std::string& kernel, const void* q, const void* out,
                                    const void* kv_pool);

// Where one layer's K and V start in a pool of `layout`, and for an fp8 pool the layer's K and V
// scales ([num_kv_heads] each, within `kv_scales`); what both launchers hand their kernels.
struct LayerKv {
  const void* k = nullptr;
  const void* v = nullptr;
  bool fp8 = false;
  const float* k_scales = nullptr;
  const float* v_scales = nullptr;
};
LayerKv LayerKvOf(const KvLayout& layout, const void* kv_pool, const float* kv_scales, int layer);

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_ATTENTION_CHECKS_H_
