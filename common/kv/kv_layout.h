// The one descriptor of a paged KV pool that kernels, transports and the wire all read.
//
// Pool memory is one array indexed [layer][k=0|v=1][block][kv_head][slot][head_dim]:
// a block's K (or V) for one layer is one contiguous run of block_stride() elements, and a run of
// consecutive block ids is contiguous per layer and per K/V, so transfers coalesce.
#ifndef TANDEM_COMMON_KV_KV_LAYOUT_H_
#define TANDEM_COMMON_KV_KV_LAYOUT_H_

#include <cstddef>
#include <cstdint>

#include "common/types/dtype.h"

namespace tandem {

struct KvLayout {
  DType dtype = DType::kF32;
  int32_t num_layers = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t block_size = 16;  // tokens per block
  int32_t num_blocks = 0;
  // kFP8E4M3 only: the fingerprint of the per-(layer, K|V, kv head) scales the codes are stored
  // against (common/kv/kv_scales.h), so that two pools agree on what a byte means; 0 otherwise.
  uint64_t scale_fingerprint = 0;

  // Strides in elements.
  int64_t slot_stride() const { return head_dim; }
  int64_t head_stride() const { return int64_t{block_size} * head_dim; }
  int64_t block_stride() const { return head_stride() * num_kv_heads; }
  int64_t kv_stride() const { return block_stride() * num_blocks; }
  int64_t layer_stride() const { return 2 * kv_stride(); }
  int64_t total_elements() const { return layer_stride() * num_layers; }
  size_t total_bytes() const { return static_cast<size_t>(total_elements()) * DTypeSize(dtype); }
  // KV bytes one token occupies across all layers (K and V).
  size_t bytes_per_token() const {
    return size_t{2} * num_layers * num_kv_heads * head_dim * DTypeSize(dtype);
  }

  // Element offset of (layer, kv, block, head, slot, 0).
  int64_t Offset(int layer, int kv, int block, int head, int slot) const {
    return layer * layer_stride() + kv * kv_stride() + block * block_stride() +
           head * head_stride() + int64_t{slot} * slot_stride();
  }

  bool operator==(const KvLayout&) const = default;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_KV_KV_LAYOUT_H_
