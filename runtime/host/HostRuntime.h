//===- HostRuntime.h - host runtime internals -------------------*- C++ -*-===//
//
// The state behind `memopt_context` and the helpers every kernel file uses:
// the sticky error (argument checks are in memopt/runtime/Validate.h), and
// f32 staging of f16/bf16 operands
// (kernels compute in f32 and round once on the way out).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_HOST_HOSTRUNTIME_H
#define MEMOPT_RUNTIME_HOST_HOSTRUNTIME_H

#include "memopt/runtime.h"
#include "memopt/runtime/Collectives.h"
#include "memopt/runtime/Validate.h"

#include <bitset>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace memopt {
namespace host {
/// The context's oneDNN convolution primitives (OneDnnConv.cpp).
struct ConvPrimitives;
void destroyConvPrimitives(ConvPrimitives *primitives);
} // namespace host
} // namespace memopt

struct memopt_context {
  /// The arena: one 256-byte aligned block.
  void *arena = nullptr;
  uint64_t arenaBytes = 0;
  /// The host arena of optimizer offload (memopt_host_arena_allocate): one
  /// 256-byte aligned block, not counted in the high-water mark.
  void *hostArena = nullptr;
  uint64_t hostArenaBytes = 0;
  /// The slots of memopt_transfer_start whose copy was not waited for.
  std::bitset<MEMOPT_MAX_TRANSFER_SLOTS> transfersInFlight;
  /// Bytes of workspace currently held by kernels, and the peak of arena plus
  /// workspace.
  uint64_t workspaceBytes = 0;
  uint64_t highWater = 0;
  uint64_t step = 0;
  /// memopt_set_lr_scale's factor.
  double lrScale = 1.0;
  std::chrono::steady_clock::time_point stepStart;
  double lastStepSeconds = 0.0;
  memopt_status status = MEMOPT_OK;
  std::string message;
  /// The ranks of data parallelism (memopt_set_collectives): one by default.
  memopt_collectives collectives = memopt::runtime::kSingleRank;
  /// Made at the first convolution (OneDnnConv.cpp).
  memopt::host::ConvPrimitives *convPrimitives = nullptr;
};

/// Compiles a function once for each x86-64 level (v4: AVX-512, v3: AVX2,
/// the baseline) and runs the widest the CPU has, chosen when the program
/// loads: a loop of arithmetic then runs 8 or 16 lanes wide where the
/// baseline has 4. The runtime is built with -ffp-contract=off, so each
/// copy performs the same roundings in the same order and the results do
/// not depend on the CPU. What the function calls must be inlined into it
/// (MEMOPT_ALWAYS_INLINE) to be compiled with it.
#if defined(__x86_64__) && defined(__ELF__) && defined(__GNUC__)
#define MEMOPT_X86_LEVELS                                                      \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define MEMOPT_X86_LEVELS
#endif
#define MEMOPT_ALWAYS_INLINE __attribute__((always_inline))

namespace memopt {
namespace host {

/// The argument checks shared with the CUDA runtime.
using namespace runtime;

/// True when the entry should run: the context exists and holds no error.
inline bool isLive(const memopt_context *ctx) {
  return ctx && ctx->status == MEMOPT_OK;
}

/// Converts `n` elements of float `dtype` at `src` to f32.
void loadF32(memopt_dtype dtype, const void *src, float *dst, int64_t n);

/// Rounds `n` f32 values into float `dtype` at `dst`.
void storeF32(memopt_dtype dtype, const float *src, void *dst, int64_t n);

/// Accounts `bytes` of workspace held from now on (for the high-water mark).
void acquireWorkspace(memopt_context *ctx, uint64_t bytes);

/// Accounts `bytes` of workspace released.
void releaseWorkspace(memopt_context *ctx, uint64_t bytes);

/// Workspace of `n` floats, counted in the context's high-water mark while
/// alive.
class Workspace {
public:
  /// `n` floats, zero unless `zeroed` is false (for a caller that writes
  /// every float before reading it).
  Workspace(memopt_context *ctx, int64_t n, bool zeroed = true)
      : ctx(ctx), size(static_cast<size_t>(n > 0 ? n : 0)),
        data(zeroed ? new float[size]() : new float[size]) {
    acquireWorkspace(ctx, size * sizeof(float));
  }
  ~Workspace() { releaseWorkspace(ctx, size * sizeof(float)); }
  Workspace(const Workspace &) = delete;
  Workspace &operator=(const Workspace &) = delete;

  float *get() { return data.get(); }

private:
  memopt_context *ctx;
  size_t size;
  std::unique_ptr<float[]> data;
};

/// A read-only f32 view of a float tensor: the tensor itself when it is f32,
/// otherwise an f32 copy in workspace.
class F32Input {
public:
  F32Input(memopt_context *ctx, memopt_dtype dtype, const void *src, int64_t n)
      : copy(ctx, dtype == MEMOPT_F32 ? 0 : n, /*zeroed=*/false) {
    if (dtype == MEMOPT_F32) {
      ptr = static_cast<const float *>(src);
    } else {
      loadF32(dtype, src, copy.get(), n);
      ptr = copy.get();
    }
  }
  const float *get() const { return ptr; }
  float operator[](int64_t i) const { return ptr[i]; }

private:
  Workspace copy;
  const float *ptr;
};

/// A writable f32 view of a float output: the tensor itself when it is f32,
/// otherwise f32 workspace rounded into the tensor by commit().
class F32Output {
public:
  F32Output(memopt_context *ctx, memopt_dtype dtype, void *dst, int64_t n)
      : copy(ctx, dtype == MEMOPT_F32 ? 0 : n), dtype(dtype), dst(dst), n(n) {
    ptr = dtype == MEMOPT_F32 ? static_cast<float *>(dst) : copy.get();
  }
  float *get() { return ptr; }
  float &operator[](int64_t i) { return ptr[i]; }
  /// Writes the values back when the tensor is not f32.
  void commit() {
    if (dtype != MEMOPT_F32)
      storeF32(dtype, ptr, dst, n);
  }

private:
  Workspace copy;
  memopt_dtype dtype;
  void *dst;
  int64_t n;
  float *ptr;
};

/// sum(term(i) for i in [0, n)) in double, in an order that vectorizes and
/// depends on n alone: eight running sums, sum k over the i = k (mod 8),
/// added pairwise at the end. A single running sum would wait on each
/// add's latency; eight independent ones fill the vector units.
template <typename Term>
inline double laneSum(int64_t n, Term &&term) {
  constexpr int64_t kLanes = 8;
  double lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t k = 0; k < kLanes; ++k)
      lanes[k] += term(i + k);
  for (int64_t k = 0; i < n; ++i, ++k)
    lanes[k] += term(i);
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
         ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

/// Reads index `i` of an I32 or I64 tensor.
inline int64_t loadIndex(memopt_dtype dtype, const void *src, int64_t i) {
  if (dtype == MEMOPT_I32)
    return static_cast<const int32_t *>(src)[i];
  return static_cast<const int64_t *>(src)[i];
}

/// Checks the `rows` labels (I32 or I64) of a cross-entropy against
/// [0, classes) and returns how many differ from `ignoreIndex`, or -1 after
/// recording the error that names `entry`, the label and its row.
int64_t countLabels(memopt_context *ctx, const char *entry,
                    memopt_dtype labelDtype, const void *labels, int64_t rows,
                    int64_t classes, int64_t ignoreIndex);

/// Dequantizes columns [first, first + cols) of op(w), w the NF4-packed
/// [n, k] (transB) or [k, n] weight, into `out` in w's layout ([cols, k]
/// under transB, else [k, cols]), each value rounded to `dtype` and widened
/// back (Nf4Matmul.cpp).
void nf4DequantizeColumns(memopt_dtype dtype, const uint8_t *w, int64_t n,
                          int64_t k, bool transB, int64_t first, int64_t cols,
                          float *out);

} // namespace host
} // namespace memopt

#endif // MEMOPT_RUNTIME_HOST_HOSTRUNTIME_H
