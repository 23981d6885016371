// Admission by KV room: whether any decode node can hold a prompt's KV blocks, judged from the
// nodes' last load reports. A request for which none can waits at the router, in a bounded queue
// and for a bounded time (RequestRunner), instead of queueing without end on a node; a node whose
// pool is exhausted shows in /ready. Pure functions over snapshots.
#ifndef TANDEM_ROUTER_KV_ADMISSION_H_
#define TANDEM_ROUTER_KV_ADMISSION_H_

#include <cstdint>
#include <vector>

#include "tandem/v1/node.pb.h"

namespace tandem {

enum class KvRoom {
  kFits,       // some decode node reported enough free blocks (or has not reported a pool yet)
  kFull,       // every decode node's free blocks are too few right now
  kNeverFits,  // the prompt needs more blocks than any decode node's whole pool: the node refuses
};

// `decode_loads`: the last load reports of the decode nodes that are up.
KvRoom DecodeKvRoom(const std::vector<v1::NodeLoad>& decode_loads, int64_t prompt_tokens);

// Fewer than 1% of the node's blocks (at least one) are free: a typical prompt cannot be reserved.
bool KvExhausted(const v1::NodeLoad& load);

}  // namespace tandem

#endif  // TANDEM_ROUTER_KV_ADMISSION_H_
