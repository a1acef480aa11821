//===- Elementwise.cpp - host elementwise kernels -------------------------===//
//
// Unary, binary and scalar arithmetic, activation gradients and clamp.
// Every kernel stages f16/bf16 operands in f32, computes in f32 and rounds
// once into the output dtype.
//
//===----------------------------------------------------------------------===//

#include "HostRuntime.h"
#include "Parallel.h"
#include "memopt/runtime/ActivationMath.h"

#include <cmath>
#include <limits>
#include <type_traits>

using namespace memopt::host;
using namespace memopt::runtime;

namespace {

/// Calls body(std::integral_constant<int, op>{}) for op in [K, Count): one
/// loop per op with the op a constant, so that the compiler folds its switch
/// and vectorizes what it can.
template <int K, int Count, typename Body>
MEMOPT_ALWAYS_INLINE inline void withConstantOp(int op, Body &&body) {
  if constexpr (K < Count) {
    if (op == K)
      body(std::integral_constant<int, K>{});
    else
      withConstantOp<K + 1, Count>(op, body);
  }
}

// The loops, one per entry, each compiled for every x86-64 level.

MEMOPT_X86_LEVELS void unaryLoop(memopt_unary_op op, const float *x, float *y,
                                 int64_t begin, int64_t end) {
  withConstantOp<0, kLastUnaryOp + 1>(
      op, [&](auto k) MEMOPT_ALWAYS_INLINE {
        constexpr auto kOp = static_cast<memopt_unary_op>(decltype(k)::value);
        for (int64_t i = begin; i < end; ++i)
          y[i] = unaryValue(kOp, x[i]);
      });
}

MEMOPT_X86_LEVELS void binaryLoop(memopt_binary_op op, const float *a,
                                  const float *b, float *y, int64_t begin,
                                  int64_t end) {
  withConstantOp<0, MEMOPT_BINARY_MAXIMUM + 1>(
      op, [&](auto k) MEMOPT_ALWAYS_INLINE {
        constexpr auto kOp = static_cast<memopt_binary_op>(decltype(k)::value);
        for (int64_t i = begin; i < end; ++i)
          y[i] = binaryValue(kOp, a[i], b[i]);
      });
}

MEMOPT_X86_LEVELS void scalarLoop(memopt_scalar_op op, const float *x, float v,
                                  float *y, int64_t begin, int64_t end) {
  withConstantOp<0, MEMOPT_SCALAR_POW + 1>(
      op, [&](auto k) MEMOPT_ALWAYS_INLINE {
        constexpr auto kOp = static_cast<memopt_scalar_op>(decltype(k)::value);
        for (int64_t i = begin; i < end; ++i)
          y[i] = scalarValue(kOp, x[i], v);
      });
}

MEMOPT_X86_LEVELS void activationGradLoop(memopt_activation_grad_op op,
                                          const float *v, const float *g,
                                          float *y, int64_t begin,
                                          int64_t end) {
  withConstantOp<0, MEMOPT_GRAD_MISH + 1>(
      op, [&](auto k) MEMOPT_ALWAYS_INLINE {
        constexpr auto kOp =
            static_cast<memopt_activation_grad_op>(decltype(k)::value);
        for (int64_t i = begin; i < end; ++i)
          y[i] = activationGradValue(kOp, v[i], g[i]);
      });
}

} // namespace

void memopt_unary(memopt_context *ctx, memopt_unary_op op, memopt_dtype dtype,
                  const void *input, void *out, int64_t n) {
  const char *entry = "memopt_unary";
  if (!checkElementwise(ctx, entry, op, kLastUnaryOp, dtype, n,
                        {input, out}))
    return;
  F32Input x(ctx, dtype, input, n);
  F32Output y(ctx, dtype, out, n);
  parallelFor(n, kElementGrain, [&](int64_t begin, int64_t end) {
    unaryLoop(op, x.get(), y.get(), begin, end);
  });
  y.commit();
}

static void binaryEntry(memopt_context *ctx, const char *entry,
                        memopt_binary_op op, memopt_dtype dtype,
                        const void *lhs, const void *rhs, void *out,
                        int64_t n) {
  if (!checkElementwise(ctx, entry, op, MEMOPT_BINARY_MAXIMUM, dtype, n,
                        {lhs, rhs, out}))
    return;
  F32Input a(ctx, dtype, lhs, n);
  F32Input b(ctx, dtype, rhs, n);
  F32Output y(ctx, dtype, out, n);
  parallelFor(n, kElementGrain, [&](int64_t begin, int64_t end) {
    binaryLoop(op, a.get(), b.get(), y.get(), begin, end);
  });
  y.commit();
}

void memopt_binary(memopt_context *ctx, memopt_binary_op op, memopt_dtype dtype,
                   const void *lhs, const void *rhs, void *out, int64_t n) {
  binaryEntry(ctx, "memopt_binary", op, dtype, lhs, rhs, out, n);
}

/// Host memory is the host runtime's own: offload's twin is the entry.
void memopt_host_binary(memopt_context *ctx, memopt_binary_op op,
                        memopt_dtype dtype, const void *lhs, const void *rhs,
                        void *out, int64_t n) {
  binaryEntry(ctx, "memopt_host_binary", op, dtype, lhs, rhs, out, n);
}

void memopt_compare(memopt_context *ctx, memopt_compare_op op,
                    memopt_dtype dtype, const void *lhs, const void *rhs,
                    uint8_t *out, int64_t n) {
  const char *entry = "memopt_compare";
  if (!checkElementwise(ctx, entry, op, MEMOPT_COMPARE_GE, dtype, n,
                        {lhs, rhs, out}))
    return;
  if (!isFloatType(dtype)) {
    parallelFor(n, kElementGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        out[i] = compareValue(op, loadIndex(dtype, lhs, i),
                              loadIndex(dtype, rhs, i));
    });
    return;
  }
  // f16 and bf16 widen to f32 exactly: the comparison is the one of the
  // stored values.
  F32Input a(ctx, dtype, lhs, n);
  F32Input b(ctx, dtype, rhs, n);
  parallelFor(n, kElementGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      out[i] = compareValue(op, a[i], b[i]);
  });
}

void memopt_scalar(memopt_context *ctx, memopt_scalar_op op, memopt_dtype dtype,
                   const void *input, double value, void *out, int64_t n) {
  const char *entry = "memopt_scalar";
  if (!checkElementwise(ctx, entry, op, MEMOPT_SCALAR_POW, dtype, n,
                        {input, out}))
    return;
  float v = static_cast<float>(value);
  F32Input x(ctx, dtype, input, n);
  F32Output y(ctx, dtype, out, n);
  parallelFor(n, kElementGrain, [&](int64_t begin, int64_t end) {
    scalarLoop(op, x.get(), v, y.get(), begin, end);
  });
  y.commit();
}

void memopt_activation_grad(memopt_context *ctx, memopt_activation_grad_op op,
                            memopt_dtype dtype, const void *x_or_y,
                            const void *grad, void *out, int64_t n) {
  const char *entry = "memopt_activation_grad";
  if (!checkElementwise(ctx, entry, op, MEMOPT_GRAD_MISH, dtype, n,
                        {x_or_y, grad, out}))
    return;
  F32Input v(ctx, dtype, x_or_y, n);
  F32Input g(ctx, dtype, grad, n);
  F32Output y(ctx, dtype, out, n);
  parallelFor(n, kElementGrain, [&](int64_t begin, int64_t end) {
    activationGradLoop(op, v.get(), g.get(), y.get(), begin, end);
  });
  y.commit();
}


void memopt_clamp(memopt_context *ctx, memopt_dtype dtype, const void *input,
                  double lo, double hi, void *out, int64_t n) {
  const char *entry = "memopt_clamp";
  if (!checkFloatTensors(ctx, entry, dtype, {n}, {input, out}) ||
      !checkClampBounds(ctx, entry, lo, hi))
    return;
  float l = static_cast<float>(lo), h = static_cast<float>(hi);
  F32Input x(ctx, dtype, input, n);
  F32Output y(ctx, dtype, out, n);
  parallelFor(n, kElementGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      y[i] = clampValue(x[i], l, h);
  });
  y.commit();
}

static void scale_byEntry(memopt_context *ctx, const char *entry,
                          memopt_dtype dtype, const void *input,
                          const float *factor, void *out, int64_t n) {
  if (!checkFloatTensors(ctx, entry, dtype, {n}, {input, out}) ||
      !checkPointers(ctx, entry, 1, {factor}) || isEmpty({n}))
    return;
  float f = *factor;
  F32Input x(ctx, dtype, input, n);
  F32Output y(ctx, dtype, out, n);
  parallelFor(n, kElementGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      y[i] = x[i] * f;
  });
  y.commit();
}

void memopt_scale_by(memopt_context *ctx, memopt_dtype dtype, const void *input,
                     const float *factor, void *out, int64_t n) {
  scale_byEntry(ctx, "memopt_scale_by", dtype, input, factor, out, n);
}

/// Host memory is the host runtime's own: offload's twin is the entry.
void memopt_host_scale_by(memopt_context *ctx, memopt_dtype dtype,
                          const void *input, const float *factor, void *out,
                          int64_t n) {
  scale_byEntry(ctx, "memopt_host_scale_by", dtype, input, factor, out, n);
}

void memopt_clamp_grad(memopt_context *ctx, memopt_dtype dtype,
                       const void *input, const void *grad, double lo,
                       double hi, int inclusive, void *out, int64_t n) {
  const char *entry = "memopt_clamp_grad";
  if (!checkFloatTensors(ctx, entry, dtype, {n}, {input, grad, out}) ||
      !checkClampBounds(ctx, entry, lo, hi))
    return;
  float l = static_cast<float>(lo), h = static_cast<float>(hi);
  F32Input x(ctx, dtype, input, n);
  F32Input g(ctx, dtype, grad, n);
  F32Output y(ctx, dtype, out, n);
  parallelFor(n, kElementGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      y[i] = clampPasses(x[i], l, h, inclusive != 0) ? g[i] : 0.0f;
  });
  y.commit();
}
