//===- HostRuntime.cpp - host runtime context and memory ------------------===//
//
// The context (arena, workspace accounting, step counter, timers, sticky
// error), memory entries, casts and selection. Kernels live in the files
// named after their concern (Elementwise.cpp, Gemm.cpp, ...).
//
//===----------------------------------------------------------------------===//

#include "HostRuntime.h"
#include "OneDnnConv.h"
#include "Parallel.h"
#include "memopt/runtime/ActivationMath.h"
#include "memopt/runtime/Float16.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

using namespace memopt::host;
using namespace memopt::runtime;

//===----------------------------------------------------------------------===//
// Internal helpers
//===----------------------------------------------------------------------===//

void memopt::runtime::recordError(memopt_context *ctx, memopt_status status,
                                  const char *entry, const char *format,
                                  va_list args) {
  if (!ctx || ctx->status != MEMOPT_OK)
    return;
  ctx->message = formatError(entry, format, args);
  ctx->status = status;
}

bool memopt::runtime::enterEntry(memopt_context *ctx, const char *) {
  return isLive(ctx);
}

void memopt::host::loadF32(memopt_dtype dtype, const void *src, float *dst,
                           int64_t n) {
  if (dtype == MEMOPT_F32) {
    std::memmove(dst, src, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  const uint16_t *bits = static_cast<const uint16_t *>(src);
  parallelFor(n, kElementGrain, [&](int64_t begin, int64_t end) {
    if (dtype == MEMOPT_F16) {
      for (int64_t i = begin; i < end; ++i)
        dst[i] = halfBitsToFloat(bits[i]);
    } else {
      for (int64_t i = begin; i < end; ++i)
        dst[i] = bfloat16BitsToFloat(bits[i]);
    }
  });
}

void memopt::host::storeF32(memopt_dtype dtype, const float *src, void *dst,
                            int64_t n) {
  if (dtype == MEMOPT_F32) {
    std::memmove(dst, src, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  uint16_t *bits = static_cast<uint16_t *>(dst);
  parallelFor(n, kElementGrain, [&](int64_t begin, int64_t end) {
    if (dtype == MEMOPT_F16) {
      for (int64_t i = begin; i < end; ++i)
        bits[i] = floatToHalfBits(src[i]);
    } else {
      for (int64_t i = begin; i < end; ++i)
        bits[i] = floatToBFloat16Bits(src[i]);
    }
  });
}

static void updateHighWater(memopt_context *ctx) {
  uint64_t total = ctx->arenaBytes + ctx->workspaceBytes;
  if (total > ctx->highWater)
    ctx->highWater = total;
}

void memopt::host::acquireWorkspace(memopt_context *ctx, uint64_t bytes) {
  if (!ctx || !bytes)
    return;
  ctx->workspaceBytes += bytes;
  updateHighWater(ctx);
}

void memopt::host::releaseWorkspace(memopt_context *ctx, uint64_t bytes) {
  if (!ctx || !bytes)
    return;
  ctx->workspaceBytes -= bytes;
}

//===----------------------------------------------------------------------===//
// Context
//===----------------------------------------------------------------------===//

memopt_context *memopt_context_create(void) {
  return new (std::nothrow) memopt_context();
}

void memopt_context_destroy(memopt_context *ctx) {
  if (!ctx)
    return;
  destroyConvPrimitives(ctx->convPrimitives);
  std::free(ctx->arena);
  std::free(ctx->hostArena);
  delete ctx;
}

memopt_status memopt_get_status(const memopt_context *ctx) {
  return ctx ? ctx->status : MEMOPT_ERROR_INVALID_ARGUMENT;
}

const char *memopt_get_error_message(const memopt_context *ctx) {
  return ctx ? ctx->message.c_str() : "null memopt_context";
}

void memopt_clear_error(memopt_context *ctx) {
  if (!ctx)
    return;
  ctx->status = MEMOPT_OK;
  ctx->message.clear();
}

/// Replaces the block at `arena` (`arenaBytes` bytes) with a 256-byte
/// aligned, zero-filled one of `bytes` bytes: the device arena and the host
/// arena, which on the host are the same kind of memory.
static void *replaceArena(memopt_context *ctx, const char *entry, void *&arena,
                          uint64_t &arenaBytes, uint64_t bytes) {
  std::free(arena);
  arena = nullptr;
  arenaBytes = 0;
  // aligned_alloc needs a size that is a multiple of the alignment.
  uint64_t rounded = (bytes + 255) / 256 * 256;
  if (rounded == 0)
    rounded = 256;
  void *block = std::aligned_alloc(256, static_cast<size_t>(rounded));
  if (!block) {
    setError(ctx, MEMOPT_ERROR_OUT_OF_MEMORY, entry,
             "cannot allocate %llu bytes",
             static_cast<unsigned long long>(bytes));
    return nullptr;
  }
  std::memset(block, 0, static_cast<size_t>(rounded));
  arena = block;
  arenaBytes = bytes;
  return block;
}

void *memopt_arena_allocate(memopt_context *ctx, uint64_t bytes) {
  if (!isLive(ctx))
    return nullptr;
  void *block = replaceArena(ctx, "memopt_arena_allocate", ctx->arena,
                             ctx->arenaBytes, bytes);
  if (block)
    updateHighWater(ctx);
  return block;
}

void *memopt_arena_base(const memopt_context *ctx) {
  return ctx ? ctx->arena : nullptr;
}

uint64_t memopt_arena_size(const memopt_context *ctx) {
  return ctx ? ctx->arenaBytes : 0;
}

void *memopt_host_arena_allocate(memopt_context *ctx, uint64_t bytes) {
  // Host memory: not counted in the high-water mark of device memory.
  if (!isLive(ctx))
    return nullptr;
  return replaceArena(ctx, "memopt_host_arena_allocate", ctx->hostArena,
                      ctx->hostArenaBytes, bytes);
}

uint64_t memopt_host_arena_size(const memopt_context *ctx) {
  return ctx ? ctx->hostArenaBytes : 0;
}

uint64_t memopt_memory_high_water(const memopt_context *ctx) {
  return ctx ? ctx->highWater : 0;
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
  if (!isLive(ctx))
    return;
  if (memopt::runtime::checkLrScale(ctx, scale))
    ctx->lrScale = scale;
}

double memopt_get_lr_scale(const memopt_context *ctx) {
  return ctx ? ctx->lrScale : 1.0;
}

void memopt_step_begin(memopt_context *ctx) {
  if (ctx)
    ctx->stepStart = std::chrono::steady_clock::now();
}

double memopt_step_end(memopt_context *ctx) {
  if (!ctx)
    return 0.0;
  std::chrono::duration<double> elapsed =
      std::chrono::steady_clock::now() - ctx->stepStart;
  ctx->lastStepSeconds = elapsed.count();
  return ctx->lastStepSeconds;
}

double memopt_last_step_seconds(const memopt_context *ctx) {
  return ctx ? ctx->lastStepSeconds : 0.0;
}

void memopt_synchronize(memopt_context *) {}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

size_t memopt_dtype_size(memopt_dtype dtype) { return dtypeSize(dtype); }

static void copyBytes(memopt_context *ctx, const char *entry, void *dst,
                      const void *src, uint64_t bytes) {
  if (!checkPointers(ctx, entry, bytes ? 1 : 0, {dst, src}))
    return;
  if (bytes)
    std::memmove(dst, src, static_cast<size_t>(bytes));
}

void memopt_copy_from_host(memopt_context *ctx, void *dst, const void *src,
                           uint64_t bytes) {
  copyBytes(ctx, "memopt_copy_from_host", dst, src, bytes);
}

void memopt_copy_to_host(memopt_context *ctx, void *dst, const void *src,
                         uint64_t bytes) {
  copyBytes(ctx, "memopt_copy_to_host", dst, src, bytes);
}

void memopt_copy(memopt_context *ctx, void *dst, const void *src,
                 uint64_t bytes) {
  copyBytes(ctx, "memopt_copy", dst, src, bytes);
}

void memopt_transfer(memopt_context *ctx, memopt_transfer_direction direction,
                     const void *src, void *dst, uint64_t bytes) {
  if (checkTransfer(ctx, "memopt_transfer", direction, src, dst, bytes) &&
      bytes)
    std::memmove(dst, src, static_cast<size_t>(bytes));
}

// The host copies at once: the start copies, the wait only checks the slot.
void memopt_transfer_start(memopt_context *ctx,
                           memopt_transfer_direction direction, const void *src,
                           void *dst, uint64_t bytes, int64_t slot) {
  const char *entry = "memopt_transfer_start";
  if (!checkTransfer(ctx, entry, direction, src, dst, bytes) ||
      !checkTransferSlot(ctx, entry, slot, ctx->transfersInFlight, false))
    return;
  ctx->transfersInFlight.set(static_cast<size_t>(slot));
  if (bytes)
    std::memmove(dst, src, static_cast<size_t>(bytes));
}

void memopt_transfer_wait(memopt_context *ctx, int64_t slot,
                          int32_t /*host_wait*/) {
  const char *entry = "memopt_transfer_wait";
  if (!enterEntry(ctx, entry) ||
      !checkTransferSlot(ctx, entry, slot, ctx->transfersInFlight, true))
    return;
  ctx->transfersInFlight.reset(static_cast<size_t>(slot));
}

static void fillEntry(memopt_context *ctx, const char *entry,
                      memopt_dtype dtype, void *dst, int64_t n, double value) {
  if (!checkExtents(ctx, entry, {n}) || !checkPointers(ctx, entry, n, {dst}) ||
      !checkElementSize(ctx, entry, dtype))
    return;
  switch (dtype) {
  case MEMOPT_F32: {
    float v = static_cast<float>(value);
    float *out = static_cast<float *>(dst);
    for (int64_t i = 0; i < n; ++i)
      out[i] = v;
    return;
  }
  case MEMOPT_F16:
  case MEMOPT_BF16: {
    float v = static_cast<float>(value);
    uint16_t bits =
        dtype == MEMOPT_F16 ? floatToHalfBits(v) : floatToBFloat16Bits(v);
    uint16_t *out = static_cast<uint16_t *>(dst);
    for (int64_t i = 0; i < n; ++i)
      out[i] = bits;
    return;
  }
  case MEMOPT_I32: {
    int32_t *out = static_cast<int32_t *>(dst);
    for (int64_t i = 0; i < n; ++i)
      out[i] = static_cast<int32_t>(value);
    return;
  }
  case MEMOPT_I64: {
    int64_t *out = static_cast<int64_t *>(dst);
    for (int64_t i = 0; i < n; ++i)
      out[i] = static_cast<int64_t>(value);
    return;
  }
  case MEMOPT_I1:
    std::memset(dst, value != 0.0 ? 1 : 0, static_cast<size_t>(n));
    return;
  }
}

void memopt_fill(memopt_context *ctx, memopt_dtype dtype, void *dst, int64_t n,
                 double value) {
  fillEntry(ctx, "memopt_fill", dtype, dst, n, value);
}

/// Host memory is the host runtime's own: offload's twin is the entry.
void memopt_host_fill(memopt_context *ctx, memopt_dtype dtype, void *dst,
                      int64_t n, double value) {
  fillEntry(ctx, "memopt_host_fill", dtype, dst, n, value);
}

//===----------------------------------------------------------------------===//
// Casts and selection
//===----------------------------------------------------------------------===//

/// memopt_cast with an index dtype on either side, one element at a time
/// (each read before it is written, so i32 <-> f32 may be in place).
static void castIndices(memopt_dtype inDtype, const void *input,
                        memopt_dtype outDtype, void *output, int64_t n) {
  auto store = [&](int64_t i, auto value) {
    if (outDtype == MEMOPT_I32)
      static_cast<int32_t *>(output)[i] = static_cast<int32_t>(value);
    else
      static_cast<int64_t *>(output)[i] = static_cast<int64_t>(value);
  };
  for (int64_t i = 0; i < n; ++i) {
    if (!isFloatType(inDtype)) {
      int64_t index = loadIndex(inDtype, input, i);
      if (isFloatType(outDtype)) {
        float value = static_cast<float>(index);
        storeF32(outDtype, &value,
                 static_cast<char *>(output) + i * memopt_dtype_size(outDtype),
                 1);
      } else {
        store(i, index);
      }
      continue;
    }
    float value;
    loadF32(inDtype,
            static_cast<const char *>(input) + i * memopt_dtype_size(inDtype),
            &value, 1);
    if (outDtype == MEMOPT_I32)
      store(i, indexFromFloat<int32_t>(value));
    else
      store(i, indexFromFloat<int64_t>(value));
  }
}

/// memopt_cast and memopt_host_cast, whose errors name `entry`.
static void castTensor(memopt_context *ctx, const char *entry,
                       memopt_dtype in_dtype, const void *input,
                       memopt_dtype out_dtype, void *output, int64_t n) {
  if (!checkDTypes(ctx, entry, {in_dtype, out_dtype}) ||
      !checkExtents(ctx, entry, {n}) ||
      !checkPointers(ctx, entry, n, {input, output}))
    return;
  if (in_dtype == out_dtype) {
    std::memmove(output, input,
                 static_cast<size_t>(n) * memopt_dtype_size(in_dtype));
    return;
  }
  if (!isFloatType(in_dtype) || !isFloatType(out_dtype)) {
    castIndices(in_dtype, input, out_dtype, output, n);
    return;
  }
  // Convert in chunks so that the workspace stays small and input/output may
  // alias when the element sizes match (f16 <-> bf16).
  constexpr int64_t chunk = 4096;
  float buffer[chunk];
  size_t inSize = memopt_dtype_size(in_dtype);
  size_t outSize = memopt_dtype_size(out_dtype);
  for (int64_t begin = 0; begin < n; begin += chunk) {
    int64_t count = n - begin < chunk ? n - begin : chunk;
    loadF32(in_dtype, static_cast<const char *>(input) + begin * inSize, buffer,
            count);
    storeF32(out_dtype, buffer, static_cast<char *>(output) + begin * outSize,
             count);
  }
}

void memopt_cast(memopt_context *ctx, memopt_dtype in_dtype, const void *input,
                 memopt_dtype out_dtype, void *output, int64_t n) {
  castTensor(ctx, "memopt_cast", in_dtype, input, out_dtype, output, n);
}

void memopt_host_cast(memopt_context *ctx, memopt_dtype in_dtype,
                      const void *input, memopt_dtype out_dtype, void *output,
                      int64_t n) {
  castTensor(ctx, "memopt_host_cast", in_dtype, input, out_dtype, output, n);
}

void memopt_where(memopt_context *ctx, memopt_dtype dtype, const uint8_t *cond,
                  const void *a, const void *b, void *out, int64_t n) {
  const char *entry = "memopt_where";
  size_t size = checkElementSize(ctx, entry, dtype);
  if (!size || !checkExtents(ctx, entry, {n}) ||
      !checkPointers(ctx, entry, n, {cond, a, b, out}))
    return;
  const char *pa = static_cast<const char *>(a);
  const char *pb = static_cast<const char *>(b);
  char *po = static_cast<char *>(out);
  parallelFor(n, kElementGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      std::memmove(po + i * size, (cond[i] ? pa : pb) + i * size, size);
  });
}

void memopt_masked_fill(memopt_context *ctx, memopt_dtype dtype,
                        const void *input, const uint8_t *mask, double value,
                        void *out, int64_t n) {
  const char *entry = "memopt_masked_fill";
  if (!checkFloatTensors(ctx, entry, dtype, {n}, {input, mask, out}))
    return;
  size_t size = memopt_dtype_size(dtype);
  float v = static_cast<float>(value);
  uint16_t bits = dtype == MEMOPT_F16    ? floatToHalfBits(v)
                  : dtype == MEMOPT_BF16 ? floatToBFloat16Bits(v)
                                         : 0;
  const char *in = static_cast<const char *>(input);
  char *po = static_cast<char *>(out);
  parallelFor(n, kElementGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      if (!mask[i])
        std::memmove(po + i * size, in + i * size, size);
      else if (dtype == MEMOPT_F32)
        std::memcpy(po + i * size, &v, size);
      else
        std::memcpy(po + i * size, &bits, size);
    }
  });
}

//===----------------------------------------------------------------------===//
// Runtime identity
//===----------------------------------------------------------------------===//

uint64_t memopt_device_memory_measured(const memopt_context *ctx) {
  return memopt_memory_high_water(ctx);
}

const char *memopt_runtime_name(void) { return "host"; }

void memopt_set_scope(memopt_context *, const char *) {}

const char *memopt_context_create_error(void) {
  // The host context fails only when operator new does.
  return "out of host memory";
}

int memopt_context_create_found_no_device(void) { return 0; }

int memopt_kernel_paths(const memopt_context *ctx, char *out, size_t size) {
  long long onednn = ctx ? oneDnnConvPlanCount(ctx) : 0;
  long long im2col = ctx ? im2colConvShapeCount(ctx) : 0;
  return std::snprintf(out, size, "conv_onednn=%lld conv_im2col=%lld", onednn,
                       im2col);
}
