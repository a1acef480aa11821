//===- Context.cu - CUDA runtime context and memory -----------------------===//
//
// The context (device, stream, cuBLASLt and cuDNN handles, events, the arena
// and the workspace, each one cudaMalloc, and offload's page-locked host
// arena), the sticky error with device-side errors, memory entries (with
// memopt_transfer between device and host memory), casts and selection.
//
//===----------------------------------------------------------------------===//

#include "ConvPlan.h"
#include "Device.cuh"
#include "DeviceSelection.h"
#include "GemmPlan.h"
#include "memopt/runtime/ActivationMath.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

using namespace memopt::cuda;

namespace {

/// Why the last memopt_context_create returned NULL.
thread_local std::string createError;
/// Whether the last failure of memopt_context_create was "no device".
thread_local bool createFoundNoDevice = false;

void updateHighWater(memopt_context *ctx) {
  uint64_t total = ctx->arenaBytes + ctx->workspaceAllocated;
  if (total > ctx->highWater)
    ctx->highWater = total;
}

/// The growth of the device's used bytes from `before`; 0 when they did
/// not grow (another process freed memory meanwhile: never a wrapped
/// difference).
uint64_t growthSince(uint64_t before, uint64_t after) {
  return after > before ? after - before : 0;
}

/// cudaMemGetInfo's used bytes (0 if it fails). Device-wide: another
/// process's allocations move it too, so it only informs (the measured
/// bytes of --stats); the memory checks use the context's own counts.
uint64_t deviceUsedBytes() {
  size_t freeBytes = 0, totalBytes = 0;
  if (cudaMemGetInfo(&freeBytes, &totalBytes) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return totalBytes - freeBytes;
}

const char *siteName(int site) {
  switch (site) {
  case SiteEmbedding:
    return "memopt_embedding";
  case SiteEmbeddingGrad:
    return "memopt_embedding_grad";
  case SiteCrossEntropy:
    return "memopt_cross_entropy";
  case SiteCrossEntropyGrad:
    return "memopt_cross_entropy_grad";
  case SiteAdamWStep:
    return "memopt_adamw_update";
  case SiteAdamW8bitStep:
    return "memopt_adamw8bit_update";
  }
  return "a kernel";
}

void report(const memopt_context *ctx, memopt_status status, bool withScope,
            const char *entry, const char *format, ...);

/// Turns a device-side error record, or an asynchronous CUDA error, into the
/// context's error.
void pollDevice(const memopt_context *ctx) {
  if (!ctx || ctx->status != MEMOPT_OK || !ctx->stream)
    return;
  memopt_device_error record{};
  cudaError_t error =
      cudaMemcpyAsync(&record, ctx->deviceError, sizeof(record),
                      cudaMemcpyDeviceToHost, ctx->stream);
  if (error == cudaSuccess)
    error = synchronize(const_cast<memopt_context *>(ctx), "memopt_get_status");
  if (ctx->status != MEMOPT_OK)
    return;
  if (error != cudaSuccess) {
    report(ctx, MEMOPT_ERROR_DEVICE, /*withScope=*/true, "memopt_get_status",
           "asynchronous CUDA error after %s: %s (%s); rerun with "
           "MEMOPT_CUDA_SYNC=1 to name the failing entry",
           ctx->currentEntry, cudaGetErrorName(error),
           cudaGetErrorString(error));
    return;
  }
  if (record.code <= 0)
    return;
  // The current scope is not the faulting op's: the message names the entry.
  int site = record.site;
  memopt_status status = static_cast<memopt_status>(record.code);
  long long value = record.value, row = record.row, limit = record.limit;
  if (site == SiteAdamWStep || site == SiteAdamW8bitStep)
    report(ctx, status, false, siteName(site),
           "step %lld is not a 1-based update count", value);
  else if (site == SiteCrossEntropy || site == SiteCrossEntropyGrad)
    report(ctx, status, false, siteName(site),
           "label %lld of row %lld out of range [0, %lld)", value, row, limit);
  else
    report(ctx, status, false, siteName(site),
           "index %lld at position %lld out of range [0, %lld)", value, row,
           limit);
}

} // namespace

//===----------------------------------------------------------------------===//
// Internal helpers
//===----------------------------------------------------------------------===//

namespace {

void storeError(const memopt_context *ctx, memopt_status status, bool withScope,
                const char *entry, const char *format, va_list args) {
  if (!ctx || ctx->status != MEMOPT_OK)
    return;
  ctx->status = status;
  ctx->message = formatError(entry, format, args);
  if (withScope && ctx->scope && *ctx->scope)
    ctx->message += std::string(" [scope ") + ctx->scope + "]";
}

/// Records an error of a const context (memopt_get_status finds errors; the
/// error fields are mutable). `withScope` appends the current module scope.
void report(const memopt_context *ctx, memopt_status status, bool withScope,
            const char *entry, const char *format, ...) {
  va_list args;
  va_start(args, format);
  storeError(ctx, status, withScope, entry, format, args);
  va_end(args);
}

} // namespace

void memopt::runtime::recordError(memopt_context *ctx, memopt_status status,
                                  const char *entry, const char *format,
                                  va_list args) {
  storeError(ctx, status, /*withScope=*/true, entry, format, args);
}

bool memopt::runtime::enterEntry(memopt_context *ctx, const char *entry) {
  if (!isLive(ctx))
    return false;
  ctx->currentEntry = entry;
  return true;
}

bool memopt::cuda::checkCuda(memopt_context *ctx, const char *entry,
                             const char *call, cudaError_t error) {
  if (error == cudaSuccess)
    return true;
  setError(ctx, error == cudaErrorMemoryAllocation ? MEMOPT_ERROR_OUT_OF_MEMORY
                                                   : MEMOPT_ERROR_DEVICE,
           entry, "%s failed: %s (%s)", call, cudaGetErrorName(error),
           cudaGetErrorString(error));
  return false;
}

bool memopt::cuda::checkCublas(memopt_context *ctx, const char *entry,
                               const char *call, cublasStatus_t status) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return true;
  setError(ctx, MEMOPT_ERROR_DEVICE, entry, "%s failed: %s (%s)", call,
           cublasLtGetStatusName(status), cublasLtGetStatusString(status));
  return false;
}

bool memopt::cuda::checkCudnn(memopt_context *ctx, const char *entry,
                              const char *call, cudnnStatus_t status) {
  if (status == CUDNN_STATUS_SUCCESS)
    return true;
  setError(ctx, MEMOPT_ERROR_DEVICE, entry, "%s failed: %s", call,
           cudnnGetErrorString(status));
  return false;
}

bool memopt::cuda::checkLaunch(memopt_context *ctx, const char *entry,
                               const char *kernel) {
  cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) {
    setError(ctx, MEMOPT_ERROR_DEVICE, entry, "launch of %s failed: %s (%s)",
             kernel, cudaGetErrorName(error), cudaGetErrorString(error));
    return false;
  }
  if (ctx->syncEachEntry) {
    error = cudaStreamSynchronize(ctx->stream);
    if (error != cudaSuccess) {
      setError(ctx, MEMOPT_ERROR_DEVICE, entry, "kernel %s failed: %s (%s)",
               kernel, cudaGetErrorName(error), cudaGetErrorString(error));
      return false;
    }
    pollDevice(ctx);
    return ctx->status == MEMOPT_OK;
  }
  return true;
}

bool memopt::cuda::allowTf32() {
  static const bool allow = [] {
    const char *value = std::getenv("MEMOPT_CUDA_ALLOW_TF32");
    return value && *value && std::strcmp(value, "0") != 0;
  }();
  return allow;
}

bool memopt::cuda::allowNondeterministic() {
  static const bool allow = [] {
    const char *value = std::getenv("MEMOPT_CUDA_ALLOW_NONDETERMINISTIC");
    return value && *value && std::strcmp(value, "0") != 0;
  }();
  return allow;
}

float *memopt::cuda::scratchFloats(memopt_context *ctx, const char *entry,
                                   int64_t n) {
  if (static_cast<uint64_t>(n) * sizeof(float) <= ctx->scratchBytes)
    return static_cast<float *>(ctx->scratch);
  setError(ctx, MEMOPT_ERROR_INVALID_ARGUMENT, entry,
           "needs %lld bytes of scratch, the runtime's workspace has %llu",
           static_cast<long long>(n * sizeof(float)),
           static_cast<unsigned long long>(ctx->scratchBytes));
  return nullptr;
}

//===----------------------------------------------------------------------===//
// Context
//===----------------------------------------------------------------------===//

const char *memopt_runtime_name(void) { return "cuda"; }

void memopt_set_scope(memopt_context *ctx, const char *scope) {
  if (ctx)
    ctx->scope = scope ? scope : "";
}

const char *memopt_context_create_error(void) { return createError.c_str(); }

int memopt_context_create_found_no_device(void) { return createFoundNoDevice; }

int memopt_kernel_paths(const memopt_context *ctx, char *out, size_t size) {
  GemmPathCounts gemm = gemmPathCounts(ctx);
  return std::snprintf(out, size,
                       "gemm_cublaslt=%zu gemm_per_element=%zu "
                       "gemm_fallback=%zu conv_cudnn=%zu",
                       gemm.library, gemm.perElement, gemm.fallback,
                       convPlanCount(ctx));
}

memopt_context *memopt_context_create(void) {
  int count = 0, driver = 0;
  createFoundNoDevice = false;
  cudaError_t error = cudaGetDeviceCount(&count);
  cudaDriverGetVersion(&driver);
  // No device: none counted, or no NVIDIA driver at all (version 0, which
  // cudaGetDeviceCount reports as an insufficient driver).
  if (error == cudaErrorNoDevice || (error == cudaSuccess && count == 0) ||
      (error == cudaErrorInsufficientDriver && driver == 0)) {
    createFoundNoDevice = true;
    createError = std::string("no CUDA device (cudaGetDeviceCount: ") +
                  (error != cudaSuccess ? cudaGetErrorString(error)
                                        : "0 devices") +
                  ")";
    cudaGetLastError();
    return nullptr;
  }
  if (error == cudaErrorInsufficientDriver) {
    // A driver older than the runtime memopt was built with.
    createError = "the CUDA driver supports CUDA " +
                  std::to_string(driver / 1000) + "." +
                  std::to_string(driver % 1000 / 10) +
                  ", older than the CUDA " + std::to_string(CUDART_VERSION / 1000) +
                  "." + std::to_string(CUDART_VERSION % 1000 / 10) +
                  " runtime memopt was built with: update the NVIDIA driver";
    cudaGetLastError();
    return nullptr;
  }
  if (error != cudaSuccess) {
    createError = std::string("cudaGetDeviceCount failed: ") +
                  cudaGetErrorString(error);
    cudaGetLastError();
    return nullptr;
  }
  memopt_context *ctx = new (std::nothrow) memopt_context();
  if (!ctx) {
    createError = "out of host memory";
    return nullptr;
  }
  const char *sync = std::getenv("MEMOPT_CUDA_SYNC");
  ctx->syncEachEntry = sync && *sync && std::strcmp(sync, "0") != 0;
  auto failed = [&](const char *call, const char *what) {
    createError = std::string(call) + " failed: " + what;
    memopt_context_destroy(ctx);
    return nullptr;
  };
  // One rank per GPU: the local rank's device, before anything is made on
  // one (DeviceSelection.h).
  if (std::optional<int> device = chooseDevice(findLocalRank(), count))
    if ((error = cudaSetDevice(*device)) != cudaSuccess)
      return failed("cudaSetDevice", cudaGetErrorString(error));
  if ((error = cudaGetDevice(&ctx->device)) != cudaSuccess ||
      (error = cudaFree(nullptr)) != cudaSuccess)
    return failed("cudaGetDevice/cudaFree(0)", cudaGetErrorString(error));
  if ((error = cudaStreamCreateWithFlags(&ctx->stream,
                                         cudaStreamNonBlocking)) != cudaSuccess)
    return failed("cudaStreamCreateWithFlags", cudaGetErrorString(error));
  if ((error = cudaEventCreate(&ctx->stepStart)) != cudaSuccess ||
      (error = cudaEventCreate(&ctx->stepStop)) != cudaSuccess)
    return failed("cudaEventCreate", cudaGetErrorString(error));
  if ((error = cudaEventCreateWithFlags(&ctx->stagingDone,
                                        cudaEventDisableTiming)) !=
      cudaSuccess)
    return failed("cudaEventCreateWithFlags", cudaGetErrorString(error));
  if ((error = cudaHostAlloc(reinterpret_cast<void **>(&ctx->staging),
                             kStagingBytes, cudaHostAllocDefault)) !=
      cudaSuccess)
    return failed("cudaHostAlloc (staging)", cudaGetErrorString(error));
  cublasStatus_t status = cublasLtCreate(&ctx->lt);
  if (status != CUBLAS_STATUS_SUCCESS)
    return failed("cublasLtCreate", cublasLtGetStatusString(status));
  cudnnStatus_t dnnStatus = cudnnCreate(&ctx->dnn);
  if (dnnStatus == CUDNN_STATUS_SUCCESS)
    dnnStatus = cudnnSetStream(ctx->dnn, ctx->stream);
  if (dnnStatus != CUDNN_STATUS_SUCCESS)
    return failed("cudnnCreate", cudnnGetErrorString(dnnStatus));
  uint64_t before = deviceUsedBytes();
  if ((error = cudaMalloc(&ctx->workspace, MEMOPT_CUDA_WORKSPACE_BYTES)) !=
      cudaSuccess)
    return failed("cudaMalloc (workspace)", cudaGetErrorString(error));
  ctx->measuredWorkspace = growthSince(before, deviceUsedBytes());
  ctx->workspaceAllocated = MEMOPT_CUDA_WORKSPACE_BYTES;
  constexpr WorkspaceLayout layout =
      layoutWorkspace(MEMOPT_CUDA_WORKSPACE_BYTES);
  char *base = static_cast<char *>(ctx->workspace);
  ctx->library = base + layout.libraryOffset;
  ctx->libraryBytes = layout.libraryBytes;
  ctx->scratch = base + layout.scratchOffset;
  ctx->scratchBytes = layout.scratchBytes;
  ctx->deviceError =
      reinterpret_cast<memopt_device_error *>(base + layout.errorOffset);
  if ((error = cudaMemsetAsync(ctx->deviceError, 0, kDeviceErrorBytes,
                               ctx->stream)) != cudaSuccess)
    return failed("cudaMemsetAsync (error record)", cudaGetErrorString(error));
  updateHighWater(ctx);
  return ctx;
}

void memopt_context_destroy(memopt_context *ctx) {
  if (!ctx)
    return;
  if (ctx->stream)
    cudaStreamSynchronize(ctx->stream);
  if (ctx->arena)
    cudaFree(ctx->arena);
  if (ctx->hostArena)
    cudaFreeHost(ctx->hostArena);
  if (ctx->workspace)
    cudaFree(ctx->workspace);
  destroyPlans(ctx->gemmPlans);
  destroyPlans(ctx->convPlans);
  if (ctx->lt)
    cublasLtDestroy(ctx->lt);
  if (ctx->dnn)
    cudnnDestroy(ctx->dnn);
  if (ctx->nccl)
    ncclCommDestroy(ctx->nccl);
  if (ctx->staging)
    cudaFreeHost(ctx->staging);
  if (ctx->stagingDone)
    cudaEventDestroy(ctx->stagingDone);
  if (ctx->stepStart)
    cudaEventDestroy(ctx->stepStart);
  if (ctx->stepStop)
    cudaEventDestroy(ctx->stepStop);
  if (ctx->copyStream) {
    cudaStreamSynchronize(ctx->copyStream);
    cudaStreamDestroy(ctx->copyStream);
  }
  if (ctx->copyReady)
    cudaEventDestroy(ctx->copyReady);
  for (cudaEvent_t done : ctx->copyDone)
    if (done)
      cudaEventDestroy(done);
  if (ctx->stream)
    cudaStreamDestroy(ctx->stream);
  delete ctx;
}

memopt_status memopt_get_status(const memopt_context *ctx) {
  if (!ctx)
    return MEMOPT_ERROR_INVALID_ARGUMENT;
  pollDevice(ctx);
  return ctx->status;
}

const char *memopt_get_error_message(const memopt_context *ctx) {
  return ctx ? ctx->message.c_str() : "null memopt_context";
}

void memopt_clear_error(memopt_context *ctx) {
  if (!ctx)
    return;
  if (ctx->stream)
    cudaStreamSynchronize(ctx->stream);
  cudaGetLastError();
  if (ctx->deviceError)
    cudaMemsetAsync(ctx->deviceError, 0, kDeviceErrorBytes, ctx->stream);
  ctx->status = MEMOPT_OK;
  ctx->message.clear();
}

void *memopt_arena_allocate(memopt_context *ctx, uint64_t bytes) {
  const char *entry = "memopt_arena_allocate";
  if (!isLive(ctx))
    return nullptr;
  if (ctx->arena) {
    if (!MEMOPT_CUDA_CHECK(ctx, entry, cudaStreamSynchronize(ctx->stream)) ||
        !MEMOPT_CUDA_CHECK(ctx, entry, cudaFree(ctx->arena)))
      return nullptr;
  }
  ctx->arena = nullptr;
  ctx->arenaBytes = 0;
  ctx->measuredArena = 0;
  uint64_t rounded = (bytes + 255) / 256 * 256;
  if (rounded == 0)
    rounded = 256;
  void *block = nullptr;
  uint64_t before = deviceUsedBytes();
  cudaError_t error = cudaMalloc(&block, static_cast<size_t>(rounded));
  if (error != cudaSuccess) {
    cudaGetLastError();
    setError(ctx, MEMOPT_ERROR_OUT_OF_MEMORY, entry,
             "cudaMalloc of %llu bytes failed: %s",
             static_cast<unsigned long long>(bytes), cudaGetErrorString(error));
    return nullptr;
  }
  ctx->measuredArena = growthSince(before, deviceUsedBytes());
  ctx->arena = block;
  ctx->arenaBytes = bytes;
  updateHighWater(ctx);
  if (!MEMOPT_CUDA_CHECK(ctx, entry,
                         cudaMemsetAsync(block, 0, static_cast<size_t>(rounded),
                                         ctx->stream)))
    return nullptr;
  return block;
}

void *memopt_host_arena_allocate(memopt_context *ctx, uint64_t bytes) {
  const char *entry = "memopt_host_arena_allocate";
  if (!isLive(ctx))
    return nullptr;
  // Queued copies may still read or write the old block.
  if (ctx->hostArena) {
    if (!MEMOPT_CUDA_CHECK(ctx, entry, cudaStreamSynchronize(ctx->stream)) ||
        !MEMOPT_CUDA_CHECK(ctx, entry, cudaFreeHost(ctx->hostArena)))
      return nullptr;
  }
  ctx->hostArena = nullptr;
  ctx->hostArenaBytes = 0;
  uint64_t rounded = (bytes + 255) / 256 * 256;
  if (rounded == 0)
    rounded = 256;
  void *block = nullptr;
  // Page-locked, so that memopt_transfer's copies are DMA transfers; its
  // pages are page-aligned, beyond the 256 bytes promised.
  cudaError_t error =
      cudaHostAlloc(&block, static_cast<size_t>(rounded), cudaHostAllocDefault);
  if (error != cudaSuccess) {
    cudaGetLastError();
    setError(ctx, MEMOPT_ERROR_OUT_OF_MEMORY, entry,
             "cudaHostAlloc of %llu bytes failed: %s",
             static_cast<unsigned long long>(bytes), cudaGetErrorString(error));
    return nullptr;
  }
  std::memset(block, 0, static_cast<size_t>(rounded));
  ctx->hostArena = block;
  ctx->hostArenaBytes = bytes;
  return block;
}

uint64_t memopt_host_arena_size(const memopt_context *ctx) {
  return ctx ? ctx->hostArenaBytes : 0;
}

void *memopt_arena_base(const memopt_context *ctx) {
  return ctx ? ctx->arena : nullptr;
}

uint64_t memopt_arena_size(const memopt_context *ctx) {
  return ctx ? ctx->arenaBytes : 0;
}

uint64_t memopt_memory_high_water(const memopt_context *ctx) {
  return ctx ? ctx->highWater : 0;
}

uint64_t memopt_device_memory_measured(const memopt_context *ctx) {
  if (!ctx)
    return 0;
  return ctx->measuredArena + ctx->measuredWorkspace;
}

void memopt_set_step(memopt_context *ctx, uint64_t step) {
  if (ctx)
    ctx->step = step;
}

uint64_t memopt_get_step(const memopt_context *ctx) {
  return ctx ? ctx->step : 0;
}

void memopt_advance_step(memopt_context *ctx) {
  if (ctx)
    ++ctx->step;
}

void memopt_set_lr_scale(memopt_context *ctx, double scale) {
  if (!ctx || ctx->status != MEMOPT_OK)
    return;
  if (memopt::runtime::checkLrScale(ctx, scale))
    ctx->lrScale = scale;
}

double memopt_get_lr_scale(const memopt_context *ctx) {
  return ctx ? ctx->lrScale : 1.0;
}

void memopt_step_begin(memopt_context *ctx) {
  if (isLive(ctx))
    MEMOPT_CUDA_CHECK(ctx, "memopt_step_begin",
                      cudaEventRecord(ctx->stepStart, ctx->stream));
}

double memopt_step_end(memopt_context *ctx) {
  const char *entry = "memopt_step_end";
  if (!isLive(ctx))
    return 0.0;
  float ms = 0.0f;
  if (!MEMOPT_CUDA_CHECK(ctx, entry,
                         cudaEventRecord(ctx->stepStop, ctx->stream)) ||
      !MEMOPT_CUDA_CHECK(ctx, entry, synchronize(ctx, entry, ctx->stepStop)) ||
      !MEMOPT_CUDA_CHECK(
          ctx, entry, cudaEventElapsedTime(&ms, ctx->stepStart, ctx->stepStop)))
    return 0.0;
  ctx->lastStepSeconds = ms / 1000.0;
  return ctx->lastStepSeconds;
}

double memopt_last_step_seconds(const memopt_context *ctx) {
  return ctx ? ctx->lastStepSeconds : 0.0;
}

void memopt_synchronize(memopt_context *ctx) {
  if (isLive(ctx))
    MEMOPT_CUDA_CHECK(ctx, "memopt_synchronize",
                      synchronize(ctx, "memopt_synchronize"));
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

size_t memopt_dtype_size(memopt_dtype dtype) { return dtypeSize(dtype); }

static void copyBytes(memopt_context *ctx, const char *entry, void *dst,
                      const void *src, uint64_t bytes, cudaMemcpyKind kind) {
  if (!checkPointers(ctx, entry, bytes ? 1 : 0, {dst, src}) || !bytes)
    return;
  if (kind == cudaMemcpyHostToDevice && bytes <= kStagingBytes &&
      ctx->staging) {
    // Through the pinned ring: an asynchronous copy that never waits for
    // the device, except when the ring wraps around (every kStagingBytes).
    if (ctx->stagingCursor + bytes > kStagingBytes) {
      if (ctx->stagingPending &&
          !MEMOPT_CUDA_CHECK(ctx, entry,
                             cudaEventSynchronize(ctx->stagingDone)))
        return;
      ctx->stagingCursor = 0;
    }
    char *slot = ctx->staging + ctx->stagingCursor;
    std::memcpy(slot, src, static_cast<size_t>(bytes));
    ctx->stagingCursor += (bytes + 255) / 256 * 256;
    if (!MEMOPT_CUDA_CHECK(ctx, entry,
                           cudaMemcpyAsync(dst, slot,
                                           static_cast<size_t>(bytes), kind,
                                           ctx->stream)) ||
        !MEMOPT_CUDA_CHECK(ctx, entry,
                           cudaEventRecord(ctx->stagingDone, ctx->stream)))
      return;
    ctx->stagingPending = true;
    return;
  }
  if (!MEMOPT_CUDA_CHECK(ctx, entry,
                         cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes),
                                         kind, ctx->stream)))
    return;
  // The host buffer of a device-to-host copy is read by the caller as soon as
  // the entry returns.
  if (kind == cudaMemcpyDeviceToHost)
    MEMOPT_CUDA_CHECK(ctx, entry, synchronize(ctx, entry));
}

void memopt_copy_from_host(memopt_context *ctx, void *dst, const void *src,
                           uint64_t bytes) {
  copyBytes(ctx, "memopt_copy_from_host", dst, src, bytes,
            cudaMemcpyHostToDevice);
}

void memopt_copy_to_host(memopt_context *ctx, void *dst, const void *src,
                         uint64_t bytes) {
  copyBytes(ctx, "memopt_copy_to_host", dst, src, bytes,
            cudaMemcpyDeviceToHost);
}

void memopt_copy(memopt_context *ctx, void *dst, const void *src,
                 uint64_t bytes) {
  copyBytes(ctx, "memopt_copy", dst, src, bytes, cudaMemcpyDeviceToDevice);
}

void memopt_transfer(memopt_context *ctx, memopt_transfer_direction direction,
                     const void *src, void *dst, uint64_t bytes) {
  const char *entry = "memopt_transfer";
  if (!checkTransfer(ctx, entry, direction, src, dst, bytes) || !bytes)
    return;
  cudaMemcpyKind kind = direction == MEMOPT_TO_HOST ? cudaMemcpyDeviceToHost
                                                    : cudaMemcpyHostToDevice;
  // The wait lets the host entries that follow read complete data and the
  // caller reuse the host buffer; synchronize() also notices a failed
  // collective while it waits.
  if (MEMOPT_CUDA_CHECK(ctx, entry,
                        cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes),
                                        kind, ctx->stream)))
    MEMOPT_CUDA_CHECK(ctx, entry, synchronize(ctx, entry));
}

void memopt_transfer_start(memopt_context *ctx,
                           memopt_transfer_direction direction, const void *src,
                           void *dst, uint64_t bytes, int64_t slot) {
  const char *entry = "memopt_transfer_start";
  if (!checkTransfer(ctx, entry, direction, src, dst, bytes) ||
      !checkTransferSlot(ctx, entry, slot, ctx->transfersInFlight, false))
    return;
  if (!ctx->copyStream &&
      (!MEMOPT_CUDA_CHECK(ctx, entry,
                          cudaStreamCreateWithFlags(&ctx->copyStream,
                                                    cudaStreamNonBlocking)) ||
       !MEMOPT_CUDA_CHECK(
           ctx, entry,
           cudaEventCreateWithFlags(&ctx->copyReady, cudaEventDisableTiming))))
    return;
  size_t index = static_cast<size_t>(slot);
  if (ctx->copyDone.size() <= index)
    ctx->copyDone.resize(index + 1, nullptr);
  cudaEvent_t &done = ctx->copyDone[index];
  if (!done &&
      !MEMOPT_CUDA_CHECK(
          ctx, entry, cudaEventCreateWithFlags(&done, cudaEventDisableTiming)))
    return;
  cudaMemcpyKind kind = direction == MEMOPT_TO_HOST ? cudaMemcpyDeviceToHost
                                                    : cudaMemcpyHostToDevice;
  // The copy reads what the work queued before it wrote; the work queued
  // after it runs meanwhile, up to the wait.
  if (!MEMOPT_CUDA_CHECK(ctx, entry,
                         cudaEventRecord(ctx->copyReady, ctx->stream)) ||
      !MEMOPT_CUDA_CHECK(
          ctx, entry,
          cudaStreamWaitEvent(ctx->copyStream, ctx->copyReady, 0)) ||
      (bytes &&
       !MEMOPT_CUDA_CHECK(ctx, entry,
                          cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes),
                                          kind, ctx->copyStream))) ||
      !MEMOPT_CUDA_CHECK(ctx, entry, cudaEventRecord(done, ctx->copyStream)))
    return;
  ctx->transfersInFlight.set(index);
  if (ctx->syncEachEntry)
    MEMOPT_CUDA_CHECK(ctx, entry, cudaEventSynchronize(done));
}

void memopt_transfer_wait(memopt_context *ctx, int64_t slot,
                          int32_t host_wait) {
  const char *entry = "memopt_transfer_wait";
  if (!enterEntry(ctx, entry) ||
      !checkTransferSlot(ctx, entry, slot, ctx->transfersInFlight, true))
    return;
  size_t index = static_cast<size_t>(slot);
  ctx->transfersInFlight.reset(index);
  cudaEvent_t done = ctx->copyDone[index];
  if (MEMOPT_CUDA_CHECK(ctx, entry,
                        cudaStreamWaitEvent(ctx->stream, done, 0)) &&
      host_wait)
    MEMOPT_CUDA_CHECK(ctx, entry, cudaEventSynchronize(done));
}

template <typename T>
__global__ void fillKernel(T *out, int64_t n, T value) {
  GRID_STRIDE(i, n)
  out[i] = value;
}

template <typename T>
static void launchFill(memopt_context *ctx, void *dst, int64_t n, T value) {
  fillKernel<T><<<gridFor(n), kBlock, 0, ctx->stream>>>(static_cast<T *>(dst),
                                                        n, value);
  checkLaunch(ctx, "memopt_fill", "fillKernel");
}

void memopt_fill(memopt_context *ctx, memopt_dtype dtype, void *dst, int64_t n,
                 double value) {
  const char *entry = "memopt_fill";
  if (!checkExtents(ctx, entry, {n}) || !checkPointers(ctx, entry, n, {dst}) ||
      !checkElementSize(ctx, entry, dtype) || isEmpty({n}))
    return;
  switch (dtype) {
  case MEMOPT_F32:
    return launchFill<float>(ctx, dst, n, static_cast<float>(value));
  case MEMOPT_F16: {
    __half v = __float2half_rn(static_cast<float>(value));
    return launchFill<uint16_t>(ctx, dst, n, reinterpret_cast<uint16_t &>(v));
  }
  case MEMOPT_BF16: {
    __nv_bfloat16 v = __float2bfloat16_rn(static_cast<float>(value));
    return launchFill<uint16_t>(ctx, dst, n, reinterpret_cast<uint16_t &>(v));
  }
  case MEMOPT_I32:
    return launchFill<int32_t>(ctx, dst, n, static_cast<int32_t>(value));
  case MEMOPT_I64:
    return launchFill<int64_t>(ctx, dst, n, static_cast<int64_t>(value));
  case MEMOPT_I1:
    return launchFill<uint8_t>(ctx, dst, n, value != 0.0 ? 1 : 0);
  }
}

//===----------------------------------------------------------------------===//
// Casts and selection
//===----------------------------------------------------------------------===//

template <typename In, typename Out>
__global__ void castKernel(const In *in, Out *out, int64_t n) {
  GRID_STRIDE(i, n)
  out[i] = fromF32<Out>(toF32(in[i]));
}

/// Index to float: rounded to nearest even, as the host's conversion.
template <typename Out>
__global__ void castFromIndexKernel(bool is64, const void *in, Out *out,
                                    int64_t n) {
  GRID_STRIDE(i, n)
  out[i] = fromF32<Out>(static_cast<float>(loadIndex(is64, in, i)));
}

/// Float to index (indexFromFloat).
template <typename In, typename Out>
__global__ void castToIndexKernel(const In *in, Out *out, int64_t n) {
  GRID_STRIDE(i, n)
  out[i] = memopt::runtime::indexFromFloat<Out>(toF32(in[i]));
}

/// Index to index: i64 -> i32 keeps the low 32 bits.
template <typename Out>
__global__ void castIndexKernel(bool is64, const void *in, Out *out,
                                int64_t n) {
  GRID_STRIDE(i, n)
  out[i] = static_cast<Out>(loadIndex(is64, in, i));
}

/// memopt_cast with an index dtype on either side.
static void launchIndexCast(memopt_context *ctx, memopt_dtype inDtype,
                            const void *input, memopt_dtype outDtype,
                            void *output, int64_t n) {
  bool is64 = inDtype == MEMOPT_I64;
  auto toIndex = [&](auto outTag) {
    using Out = decltype(outTag);
    if (!isFloatType(inDtype)) {
      castIndexKernel<Out><<<gridFor(n), kBlock, 0, ctx->stream>>>(
          is64, input, static_cast<Out *>(output), n);
      return;
    }
    dispatchFloat(inDtype, [&](auto inTag) {
      using In = MEMOPT_STORAGE(inTag);
      castToIndexKernel<In, Out><<<gridFor(n), kBlock, 0, ctx->stream>>>(
          static_cast<const In *>(input), static_cast<Out *>(output), n);
    });
  };
  if (outDtype == MEMOPT_I32)
    toIndex(int32_t());
  else if (outDtype == MEMOPT_I64)
    toIndex(int64_t());
  else
    dispatchFloat(outDtype, [&](auto outTag) {
      using Out = MEMOPT_STORAGE(outTag);
      castFromIndexKernel<Out><<<gridFor(n), kBlock, 0, ctx->stream>>>(
          is64, input, static_cast<Out *>(output), n);
    });
}

void memopt_cast(memopt_context *ctx, memopt_dtype in_dtype, const void *input,
                 memopt_dtype out_dtype, void *output, int64_t n) {
  const char *entry = "memopt_cast";
  if (!checkDTypes(ctx, entry, {in_dtype, out_dtype}) ||
      !checkExtents(ctx, entry, {n}) ||
      !checkPointers(ctx, entry, n, {input, output}) || isEmpty({n}))
    return;
  if (in_dtype == out_dtype) {
    // In place, the cast is nothing (a copy onto itself is undefined for
    // cudaMemcpy).
    if (input != output)
      MEMOPT_CUDA_CHECK(ctx, entry,
                        cudaMemcpyAsync(output, input,
                                        n * memopt_dtype_size(in_dtype),
                                        cudaMemcpyDeviceToDevice, ctx->stream));
    return;
  }
  // Each thread reads its element before writing it, so in-place casts
  // between equal sizes (f16 <-> bf16, i32 <-> f32) are safe.
  if (!isFloatType(in_dtype) || !isFloatType(out_dtype)) {
    launchIndexCast(ctx, in_dtype, input, out_dtype, output, n);
    checkLaunch(ctx, entry, "castIndexKernel");
    return;
  }
  dispatchFloat(in_dtype, [&](auto inTag) {
    using In = MEMOPT_STORAGE(inTag);
    dispatchFloat(out_dtype, [&](auto outTag) {
      using Out = MEMOPT_STORAGE(outTag);
      castKernel<In, Out><<<gridFor(n), kBlock, 0, ctx->stream>>>(
          static_cast<const In *>(input), static_cast<Out *>(output), n);
    });
  });
  checkLaunch(ctx, entry, "castKernel");
}

template <typename T>
__global__ void whereKernel(const uint8_t *cond, const T *a, const T *b, T *out,
                            int64_t n) {
  GRID_STRIDE(i, n)
  out[i] = cond[i] ? a[i] : b[i];
}

template <typename T>
__global__ void maskedFillKernel(const T *in, const uint8_t *mask, T value,
                                 T *out, int64_t n) {
  GRID_STRIDE(i, n)
  out[i] = mask[i] ? value : in[i];
}

void memopt_where(memopt_context *ctx, memopt_dtype dtype, const uint8_t *cond,
                  const void *a, const void *b, void *out, int64_t n) {
  const char *entry = "memopt_where";
  size_t size = checkElementSize(ctx, entry, dtype);
  if (!size || !checkExtents(ctx, entry, {n}) ||
      !checkPointers(ctx, entry, n, {cond, a, b, out}) || isEmpty({n}))
    return;
  dispatchSize(size, [&](auto tag) {
    using T = MEMOPT_STORAGE(tag);
    whereKernel<T><<<gridFor(n), kBlock, 0, ctx->stream>>>(
        cond, static_cast<const T *>(a), static_cast<const T *>(b),
        static_cast<T *>(out), n);
  });
  checkLaunch(ctx, entry, "whereKernel");
}

void memopt_masked_fill(memopt_context *ctx, memopt_dtype dtype,
                        const void *input, const uint8_t *mask, double value,
                        void *out, int64_t n) {
  const char *entry = "memopt_masked_fill";
  if (!checkFloatTensors(ctx, entry, dtype, {n}, {input, mask, out}) ||
      isEmpty({n}))
    return;
  float v = static_cast<float>(value);
  if (dtype == MEMOPT_F32) {
    maskedFillKernel<float><<<gridFor(n), kBlock, 0, ctx->stream>>>(
        static_cast<const float *>(input), mask, v, static_cast<float *>(out),
        n);
  } else {
    uint16_t bits;
    if (dtype == MEMOPT_F16) {
      __half h = __float2half_rn(v);
      std::memcpy(&bits, &h, 2);
    } else {
      __nv_bfloat16 h = __float2bfloat16_rn(v);
      std::memcpy(&bits, &h, 2);
    }
    maskedFillKernel<uint16_t><<<gridFor(n), kBlock, 0, ctx->stream>>>(
        static_cast<const uint16_t *>(input), mask, bits,
        static_cast<uint16_t *>(out), n);
  }
  checkLaunch(ctx, entry, "maskedFillKernel");
}
