// The `auto` cluster mode (ServingMode::kAuto; tandem-router --mode auto, tandem-sim --mode auto):
// every node serves both roles on one engine and one KV pool (tandem-decode --serve-prefill), so
// the decode nodes are the prefill candidates too.
//
// A node's pool then holds two kinds of blocks: those reserved for prompts other nodes prefill
// (held, awaiting KV, until their writer is done) and those of the prompts it prefills for others
// (held until written). A node whose free blocks are all reserved cannot prefill for another, and
// two such nodes wait on each other (the engine fails the prefill that cannot be scheduled, the
// router retries the request elsewhere: requests fail under KV pressure that colocated or
// disaggregated clusters of the same pools carry). So a node is a prefill candidate only while
// its free blocks, less what this router placed there since its last load report, hold the
// prompt's uncached part; and a prefill placed there counts those blocks as in flight until the
// node's report shows them.
//
// Pure functions; RequestRunner::Place and tandem-sim's router both use them.
#ifndef TANDEM_ROUTER_AUTO_MODE_H_
#define TANDEM_ROUTER_AUTO_MODE_H_

#include <cstdint>

#include "router/placement.h"

namespace tandem {

// The blocks a prefill of `prompt_tokens` holds on `node` while it computes and writes them: the
// prompt's, less the full blocks of its prefix the node's cache holds (cached_prefix_tokens).
// `default_block_size` when the node has not reported its own.
int64_t PrefillHeldBlocks(const NodeCandidate& node, int64_t prompt_tokens,
                          int32_t default_block_size);

// Whether `node`'s free blocks (free_kv_blocks: its report less what was placed since) hold them.
bool HasRoomToPrefill(const NodeCandidate& node, int64_t prompt_tokens, int32_t default_block_size);

}  // namespace tandem

#endif  // TANDEM_ROUTER_AUTO_MODE_H_
