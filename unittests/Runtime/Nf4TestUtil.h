//===- Nf4TestUtil.h - NF4 weights and products in tests --------*- C++ -*-===//
//
// What the tests of memopt_nf4_matmul on the host and on the device share:
// weights to quantize, the dequantized weight in a compute dtype as the
// product reads it (Nf4Math.h's values, rounded once), 16-bit storage
// without a runtime, and the float64 product with the bound of f32
// accumulation and one rounding to the dtype.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_UNITTESTS_RUNTIME_NF4TESTUTIL_H
#define MEMOPT_UNITTESTS_RUNTIME_NF4TESTUTIL_H

#include "memopt/runtime.h"
#include "memopt/runtime/Float16.h"
#include "memopt/runtime/Nf4Math.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace memopt {
namespace test {

/// `n` normally distributed weights whose scale changes from block to block
/// (over two decades), as a trained layer's rows differ.
inline std::vector<float> nf4Weights(std::mt19937 &rng, int64_t n) {
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> exponent(-2.0f, 0.0f);
  std::vector<float> w(static_cast<size_t>(n));
  float scale = 1.0f;
  for (int64_t i = 0; i < n; ++i) {
    if (i % runtime::kNf4Block == 0)
      scale = std::pow(10.0f, exponent(rng));
    w[i] = normal(rng) * scale;
  }
  return w;
}

/// The packed bytes of `values`.
inline std::vector<uint8_t> nf4Pack(const std::vector<float> &values) {
  int64_t n = static_cast<int64_t>(values.size());
  std::vector<uint8_t> packed(static_cast<size_t>(runtime::nf4PackedBytes(n)));
  runtime::nf4Quantize(values.data(), n, packed.data());
  return packed;
}

/// `x` rounded to float `dtype` (nearest even) and widened back.
inline float roundToDType(memopt_dtype dtype, float x) {
  switch (dtype) {
  case MEMOPT_F16:
    return runtime::halfBitsToFloat(runtime::floatToHalfBits(x));
  case MEMOPT_BF16:
    return runtime::bfloat16BitsToFloat(runtime::floatToBFloat16Bits(x));
  default:
    return x;
  }
}

/// `x` (representable in `dtype`) as the bytes of a `dtype` tensor.
inline std::vector<uint8_t> storageOf(memopt_dtype dtype,
                                      const std::vector<float> &x) {
  std::vector<uint8_t> bytes(x.size() * memopt_dtype_size(dtype));
  for (size_t i = 0; i < x.size(); ++i) {
    if (dtype == MEMOPT_F32) {
      std::memcpy(bytes.data() + 4 * i, &x[i], 4);
      continue;
    }
    uint16_t bits = dtype == MEMOPT_F16 ? runtime::floatToHalfBits(x[i])
                                        : runtime::floatToBFloat16Bits(x[i]);
    std::memcpy(bytes.data() + 2 * i, &bits, 2);
  }
  return bytes;
}

/// The floats of a `dtype` tensor's bytes.
inline std::vector<float> floatsOf(memopt_dtype dtype,
                                   const std::vector<uint8_t> &bytes) {
  size_t size = memopt_dtype_size(dtype);
  std::vector<float> x(bytes.size() / size);
  for (size_t i = 0; i < x.size(); ++i) {
    if (dtype == MEMOPT_F32) {
      std::memcpy(&x[i], bytes.data() + 4 * i, 4);
      continue;
    }
    uint16_t bits;
    std::memcpy(&bits, bytes.data() + 2 * i, 2);
    x[i] = dtype == MEMOPT_F16 ? runtime::halfBitsToFloat(bits)
                               : runtime::bfloat16BitsToFloat(bits);
  }
  return x;
}

/// Every element of a packed tensor of `n` elements, dequantized and
/// rounded to `dtype`: the weight memopt_nf4_matmul multiplies by.
inline std::vector<float> nf4Dequantized(memopt_dtype dtype,
                                         const std::vector<uint8_t> &packed,
                                         int64_t n) {
  std::vector<float> w(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    w[i] = roundToDType(dtype, runtime::nf4Dequantize(packed.data(), n, i));
  return w;
}

/// Half an ulp of `dtype` relative to a value: its rounding's bound.
inline double unitRoundoff(memopt_dtype dtype) {
  return dtype == MEMOPT_F16    ? std::ldexp(1.0, -11)
         : dtype == MEMOPT_BF16 ? std::ldexp(1.0, -8)
                                : std::ldexp(1.0, -24);
}

/// Expects c [m, n] to be a [m, k] op(w) within the bound of an f32 sum of
/// k products, sum |a| |w| k 2^-24 (and 2^-24 for the product itself),
/// then one rounding to `dtype`; op(w) is w [n, k] transposed when
/// `transB`, else w [k, n]. The reference sums in float64.
inline void expectNearProduct(memopt_dtype dtype, const std::vector<float> &a,
                              const std::vector<float> &w,
                              const std::vector<float> &c, int64_t m, int64_t n,
                              int64_t k, bool transB, const std::string &what) {
  const double u32 = std::ldexp(1.0, -24), ud = unitRoundoff(dtype);
  int failures = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0.0, magnitude = 0.0;
      for (int64_t l = 0; l < k; ++l) {
        double product = static_cast<double>(a[i * k + l]) *
                         (transB ? w[j * k + l] : w[l * n + j]);
        sum += product;
        magnitude += std::fabs(product);
      }
      // f16's subnormals round to an absolute 2^-25.
      double bound = (k + 1) * u32 * magnitude * (1.0 + ud) +
                     (dtype == MEMOPT_F32 ? 0.0 : ud * std::fabs(sum)) +
                     (dtype == MEMOPT_F16 ? std::ldexp(1.0, -25) : 1e-30);
      double error = std::fabs(c[i * n + j] - sum);
      if (error > bound && ++failures <= 5)
        ADD_FAILURE() << what << ": c[" << i << ", " << j
                      << "] = " << c[i * n + j] << ", float64 " << sum
                      << ", error " << error << " > bound " << bound;
    }
}

} // namespace test
} // namespace memopt

#endif // MEMOPT_UNITTESTS_RUNTIME_NF4TESTUTIL_H
