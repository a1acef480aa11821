//===- Collectives.h - the rank facts shared by the runtimes --------------===//
//
// memopt_set_collectives, memopt_rank and memopt_world_size read and write a
// context's `collectives` member alike on the host and the CUDA runtime;
// only the reductions differ (MPI through the installed callbacks, NCCL).
// Without installed collectives a context is the only rank of a world of
// one.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_COLLECTIVES_H
#define MEMOPT_RUNTIME_COLLECTIVES_H

#include "memopt/runtime.h"

namespace memopt {
namespace runtime {

/// The collectives of a world of one rank.
constexpr memopt_collectives kSingleRank = {0,       1,       nullptr, nullptr,
                                            nullptr, nullptr, nullptr};

template <typename Context>
void setCollectives(Context *ctx, const memopt_collectives *collectives) {
  if (ctx)
    ctx->collectives = collectives ? *collectives : kSingleRank;
}

template <typename Context> int64_t getRank(const Context *ctx) {
  return ctx ? ctx->collectives.rank : 0;
}

template <typename Context> int64_t getWorldSize(const Context *ctx) {
  return ctx ? ctx->collectives.size : 1;
}

} // namespace runtime
} // namespace memopt

#endif // MEMOPT_RUNTIME_COLLECTIVES_H
