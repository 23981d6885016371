// CPU reference of kernels/prefill_attention.h and kernels/decode_attention.h on host memory:
// the same arguments (bf16 as its bits, fp8 as its codes), computed per query row and head with a
// plain two-pass softmax in f32 over K/V widened to f32 (fp8 codes times their scale), output
// rounded once to bf16.
#ifndef TANDEM_KERNELS_ATTENTION_REFERENCE_H_
#define TANDEM_KERNELS_ATTENTION_REFERENCE_H_

#include <cstdint>

#include "common/kv/kv_layout.h"
#include "kernels/bf16_reference.h"

namespace tandem::kernels {

struct PrefillAttentionReferenceArgs {
  const Bf16Bits* q = nullptr;
  Bf16Bits* out = nullptr;
  // layout.dtype kBF16 (Bf16Bits elements) or kFP8E4M3 (uint8_t codes, each worth its code's
  // value times kv_scales[(layer * 2 + kv) * num_kv_heads + kv_head]).
  const void* kv_pool = nullptr;
  const float* kv_scales = nullptr;
  KvLayout layout;
  int layer = 0;
  int num_heads = 0;
  int num_items = 0;
  const int32_t* q_starts = nullptr;
  const int32_t* q_lens = nullptr;
  const int32_t* start_positions = nullptr;
  const int32_t* block_tables = nullptr;
  int max_blocks_per_seq = 0;
  int sliding_window = 0;
  float scale = 0.0f;
};

struct DecodeAttentionReferenceArgs {
  const Bf16Bits* q = nullptr;
  Bf16Bits* out = nullptr;
  // layout.dtype kBF16 (Bf16Bits elements) or kFP8E4M3 (uint8_t codes, each worth its code's
  // value times kv_scales[(layer * 2 + kv) * num_kv_heads + kv_head]).
  const void* kv_pool = nullptr;
  const float* kv_scales = nullptr;
  KvLayout layout;
  int layer = 0;
  int num_heads = 0;
  int num_seqs = 0;
  const int32_t* token_rows = nullptr;
  const int32_t* context_lens = nullptr;
  const int32_t* block_tables = nullptr;
  int max_blocks_per_seq = 0;
  int sliding_window = 0;
  float scale = 0.0f;
};

void PrefillAttentionReference(const PrefillAttentionReferenceArgs& args);
void DecodeAttentionReference(const DecodeAttentionReferenceArgs& args);

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_ATTENTION_REFERENCE_H_
