//===- CudaRuntime.h - CUDA runtime internals -------------------*- C++ -*-===//
//
// The state behind `memopt_context` on the GPU and the helpers every kernel
// file uses: the sticky error (argument errors from the checks of
// memopt/runtime/Validate.h, checked CUDA and cuBLASLt calls, and errors
// that kernels find on the device, such as an embedding index out of range),
// launch helpers, and dtype dispatch.
//
// Every kernel runs on the context's one stream; nothing in a step waits for
// the device. Device-side errors are written into a small record at the end
// of the workspace (WorkspaceLayout.h) and turned into the context's error by
// memopt_get_status,
// which reads it back (a synchronous copy) and which the driver calls once
// per step, after the loss read-back that waits for the step anyway.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_CUDA_CUDARUNTIME_H
#define MEMOPT_RUNTIME_CUDA_CUDARUNTIME_H

#include "memopt/runtime.h"
#include "memopt/runtime/Collectives.h"
#include "memopt/runtime/Validate.h"

#include "WorkspaceLayout.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

#include <bitset>
#include <cstdint>
#include <string>
#include <vector>

namespace memopt {
namespace cuda {
/// The context's cached cuBLASLt and cuDNN plans (Gemm.cpp, Conv.cu).
struct GemmPlans;
struct ConvPlans;
} // namespace cuda
} // namespace memopt

/// What a kernel found wrong on the device. Written once (the first kernel
/// that claims `code` wins), read by the host after the step.
struct memopt_device_error {
  int code;
  /// A memopt::cuda::DeviceErrorSite.
  int site;
  long long value;
  long long row;
  long long limit;
};

struct memopt_context {
  int device = 0;
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  cudnnHandle_t dnn = nullptr;
  /// Made at the first product or convolution of each shape (PlanCache.h),
  /// released before the handles.
  memopt::cuda::GemmPlans *gemmPlans = nullptr;
  memopt::cuda::ConvPlans *convPlans = nullptr;
  cudaEvent_t stepStart = nullptr;
  cudaEvent_t stepStop = nullptr;
  /// The arena: one cudaMalloc.
  void *arena = nullptr;
  uint64_t arenaBytes = 0;
  /// The host arena of optimizer offload: one cudaHostAlloc (page-locked),
  /// not device memory, so counted in neither the high-water mark nor the
  /// measured bytes.
  void *hostArena = nullptr;
  uint64_t hostArenaBytes = 0;
  /// The workspace: one cudaMalloc of MEMOPT_CUDA_WORKSPACE_BYTES, in the
  /// slices of WorkspaceLayout.h: `library` for cuBLASLt and cuDNN,
  /// `scratch` for the kernels' own f32 scratch, then the error record.
  void *workspace = nullptr;
  uint64_t workspaceAllocated = 0;
  void *library = nullptr;
  uint64_t libraryBytes = 0;
  void *scratch = nullptr;
  uint64_t scratchBytes = 0;
  uint64_t highWater = 0;
  /// What the device reports each of the two allocations took: the growth
  /// of cudaMemGetInfo's used bytes across its cudaMalloc.
  uint64_t measuredArena = 0;
  uint64_t measuredWorkspace = 0;
  uint64_t step = 0;
  /// memopt_set_lr_scale's factor.
  double lrScale = 1.0;
  double lastStepSeconds = 0.0;
  /// Pinned host staging for host-to-device copies of up to
  /// kStagingBytes (the generated step's constants), so that they never wait
  /// for the device: a ring whose wrap-around waits for the last staged copy.
  char *staging = nullptr;
  uint64_t stagingCursor = 0;
  cudaEvent_t stagingDone = nullptr;
  bool stagingPending = false;
  /// Asynchronous copies between the memories (memopt_transfer_start): a
  /// second stream, made at the first copy, that waits for `copyReady`
  /// (recorded on `stream` at each start) and records each slot's
  /// `copyDone`, which memopt_transfer_wait makes `stream` wait for.
  cudaStream_t copyStream = nullptr;
  cudaEvent_t copyReady = nullptr;
  std::vector<cudaEvent_t> copyDone;
  std::bitset<MEMOPT_MAX_TRANSFER_SLOTS> transfersInFlight;
  /// The device-side error record: the workspace's last slice.
  memopt_device_error *deviceError = nullptr;
  /// Sticky: memopt_get_status may fill them from the device record.
  mutable memopt_status status = MEMOPT_OK;
  mutable std::string message;
  /// The entry currently running (for errors found after a launch) and the
  /// module scope of the generated step's current op (memopt_set_scope).
  const char *currentEntry = "";
  const char *scope = "";
  /// MEMOPT_CUDA_SYNC=1: wait after each entry so that an asynchronous
  /// fault names the entry that caused it.
  bool syncEachEntry = false;
  /// The ranks of data parallelism (memopt_set_collectives), and the NCCL
  /// communicator made from them at the first all-reduce.
  memopt_collectives collectives = memopt::runtime::kSingleRank;
  ncclComm_t nccl = nullptr;
};

namespace memopt {
namespace cuda {

/// The argument checks shared with the host runtime.
using namespace runtime;

/// Where a device-side error was found.
enum DeviceErrorSite {
  SiteEmbedding = 1,
  SiteEmbeddingGrad = 2,
  SiteCrossEntropy = 3,
  SiteCrossEntropyGrad = 4,
  SiteAdamWStep = 5,
  SiteAdamW8bitStep = 6,
};

inline bool isLive(const memopt_context *ctx) {
  return ctx && ctx->status == MEMOPT_OK;
}

/// Release the context's plans (null: nothing).
void destroyPlans(GemmPlans *plans);
void destroyPlans(ConvPlans *plans);

/// Whether f32 products and convolutions may use TF32 tensor cores
/// (MEMOPT_CUDA_ALLOW_TF32=1 in the environment; off by default).
bool allowTf32();

/// Whether MEMOPT_CUDA_ALLOW_NONDETERMINISTIC=1 lets a convolution take a
/// nondeterministic algorithm (runs then differ in their last bits).
bool allowNondeterministic();

/// Checks a CUDA runtime call: records "<entry>: <call> failed: <error>" and
/// returns false on failure.
bool checkCuda(memopt_context *ctx, const char *entry, const char *call,
               cudaError_t error);

/// Checks a cuBLASLt call likewise.
bool checkCublas(memopt_context *ctx, const char *entry, const char *call,
                 cublasStatus_t status);

/// Checks a cuDNN call likewise.
bool checkCudnn(memopt_context *ctx, const char *entry, const char *call,
                cudnnStatus_t status);

/// Checks the launch of `kernel` (cudaGetLastError) and, with
/// MEMOPT_CUDA_SYNC=1, its completion.
bool checkLaunch(memopt_context *ctx, const char *entry, const char *kernel);

/// cudaStreamSynchronize of the context's stream (cudaEventSynchronize of
/// `event` when given). With an NCCL communicator it polls instead of
/// blocking: an asynchronous NCCL error (a peer that died, a network
/// failure) aborts the communicator and is recorded as an error naming this
/// rank, and so is a wait longer than MEMOPT_COLLECTIVE_TIMEOUT seconds
/// (default 1800), so that a failed collective ends the run instead of
/// hanging it; the answer is then cudaErrorLaunchFailure.
cudaError_t synchronize(memopt_context *ctx, const char *entry,
                        cudaEvent_t event = nullptr);

#define MEMOPT_CUDA_CHECK(ctx, entry, call)                                    \
  ::memopt::cuda::checkCuda(ctx, entry, #call, call)
#define MEMOPT_CUBLAS_CHECK(ctx, entry, call)                                  \
  ::memopt::cuda::checkCublas(ctx, entry, #call, call)
#define MEMOPT_CUDNN_CHECK(ctx, entry, call)                                   \
  ::memopt::cuda::checkCudnn(ctx, entry, #call, call)

/// Bytes of the pinned staging ring of host-to-device copies.
constexpr uint64_t kStagingBytes = 8u << 20;

/// Threads per block of the elementwise kernels.
constexpr int kBlock = 256;

/// Blocks for `n` elements with a grid-stride loop (capped).
inline unsigned gridFor(int64_t n, int block = kBlock) {
  int64_t blocks = (n + block - 1) / block;
  if (blocks < 1)
    blocks = 1;
  if (blocks > 65535 * 8)
    blocks = 65535 * 8;
  return static_cast<unsigned>(blocks);
}

/// The workspace's scratch slice as `n` floats, or null after recording an
/// error when it is too small.
float *scratchFloats(memopt_context *ctx, const char *entry, int64_t n);

/// Row-major c[m, n] = op(a) op(b) + beta c through cuBLASLt (Gemm.cpp):
/// operands `dtype`, result `outDtype` (`dtype` or F32), f32 compute; the
/// product uses the workspace's library slice, so data a caller keeps in the
/// scratch slice survives it. c's rows are `ldc` elements apart (0: n).
/// Errors name `entry`. m, n, k > 0.
void gemm(memopt_context *ctx, const char *entry, memopt_dtype dtype,
          memopt_dtype outDtype, const void *a, const void *b, void *c,
          int64_t m, int64_t n, int64_t k, bool transA, bool transB, float beta,
          int64_t ldc = 0);

} // namespace cuda
} // namespace memopt

#endif // MEMOPT_RUNTIME_CUDA_CUDARUNTIME_H
