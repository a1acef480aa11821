//===- CudaConvTest.cpp - cuDNN convolutions and their plans --------------===//
//
// Without a device: ConvPlan.h, the host half of the cuDNN convolutions. The
// output extents against windows counted one by one, against checkConv's
// (each axis from its own arguments) and against what cuDNN computes
// from the plans' descriptors, the descriptors' dims and NCHW strides, the 2^31
// limit of cuDNN's int descriptors (also through memopt_conv2d on a context
// without a device, which fails before any cuDNN call), plan keys that tell
// every argument apart, and the algorithm rule (first succeeded, deterministic,
// allowed math, fitting workspace).
//
// With a device: the three entries against f64 references computed here
// (groups, stride 2, padding, dilation, depthwise, 1x1; f32, bf16 and f16,
// tolerances derived from the output's rounding and f32 accumulation), a
// second run bit-identical to the first, results that overwrite what the
// output held, empty operands giving zeros, and one plan per entry and shape
// however often it runs.
//
//===----------------------------------------------------------------------===//

#include "ConvPlan.h"
#include "CudaRuntime.h"
#include "CudaTestFixture.h"
#include "memopt/runtime/Float16.h"
#include "memopt/runtime/PlanCache.h"

#include "gtest/gtest.h"

#include <cmath>
#include <string>
#include <vector>

using memopt::cuda::ConvAlgoCandidate;
using memopt::cuda::ConvRunOutcome;
using memopt::cuda::runWithFallbacks;
using memopt::cuda::ConvDescriptors;
using memopt::cuda::ConvDirection;
using memopt::cuda::ConvKey;
using memopt::cuda::convOutputExtent;
using memopt::cuda::convPlanCount;
using memopt::cuda::describeConv;
using memopt::cuda::makeConvKey;
using memopt::cuda::pickConvAlgorithm;
using memopt::runtime::ConvShape;
using memopt::test::CudaTest;

namespace {

//===----------------------------------------------------------------------===//
// Without a device
//===----------------------------------------------------------------------===//

/// The windows along one axis, counted by sliding one: starts at -pad, steps
/// by `stride`, and fits while its last tap, d (k - 1) further, is inside
/// the padded input. -1 when not even the first fits.
int64_t countWindows(int64_t in, int64_t k, int64_t stride, int64_t pad,
                     int64_t dil) {
  int64_t count = 0;
  for (int64_t start = -pad; start + dil * (k - 1) <= in - 1 + pad;
       start += stride)
    ++count;
  return count > 0 ? count : -1;
}

TEST(ConvPlanTest, OutputExtentIsTheFloorFormula) {
  int checked = 0;
  for (int64_t in = 1; in <= 13; ++in)
    for (int64_t k = 1; k <= 5; ++k)
      for (int64_t s = 1; s <= 4; ++s)
        for (int64_t p = 0; p <= 3; ++p)
          for (int64_t d = 1; d <= 3; ++d) {
            int64_t got = convOutputExtent(in, k, s, p, d);
            ASSERT_EQ(got, countWindows(in, k, s, p, d))
                << "in " << in << " k " << k << " s " << s << " p " << p
                << " d " << d;
            double span = static_cast<double>(in + 2 * p - d * (k - 1) - 1);
            if (span >= 0) {
              EXPECT_EQ(got, static_cast<int64_t>(std::floor(span / s)) + 1);
              ++checked;
            }
          }
  EXPECT_GT(checked, 2000);
}

/// checkConv (Validate.h, which both runtimes use to size the output) takes
/// each axis's extent from that axis's arguments, and rejects exactly the
/// geometries without a window.
TEST(ConvPlanTest, OutputExtentsAgreeWithCheckConv) {
  for (int64_t h = 1; h <= 9; ++h)
    for (int64_t k = 1; k <= 4; ++k)
      for (int64_t s = 1; s <= 3; ++s)
        for (int64_t p = 0; p <= 2; ++p)
          for (int64_t d = 1; d <= 3; ++d) {
            memopt_context ctx;
            // Groups 2; the width differs from the height in every
            // argument but padding and dilation.
            ConvShape shape{2,     4, h, h + 1, 6, k, k + 1, s,
                            s + 1, p, p, d,     d, 2, 0,     0};
            bool valid = memopt::runtime::checkConv(&ctx, "memopt_conv2d",
                                                    MEMOPT_F32, shape);
            int64_t oh = convOutputExtent(h, k, s, p, d);
            int64_t ow = convOutputExtent(h + 1, k + 1, s + 1, p, d);
            EXPECT_EQ(valid, oh > 0 && ow > 0) << ctx.message;
            if (valid) {
              EXPECT_EQ(shape.oh, oh);
              EXPECT_EQ(shape.ow, ow);
            }
          }
}

/// The descriptors a plan sets make cuDNN compute the output memopt does
/// (cuDNN's descriptor calls need no device): strides, asymmetric padding,
/// dilation and groups, in every dtype.
TEST(ConvPlanTest, CudnnComputesTheSameOutput) {
  int checked = 0;
  for (memopt_dtype dtype : {MEMOPT_F32, MEMOPT_F16, MEMOPT_BF16})
    for (int64_t h = 1; h <= 8; ++h)
      for (int64_t k = 1; k <= 4; ++k)
        for (int64_t s = 1; s <= 3; ++s)
          for (int64_t p = 0; p <= 2; ++p)
            for (int64_t d = 1; d <= 3; ++d)
              for (int64_t groups : {1, 2, 4}) {
                ConvShape shape{2, 4,     h, h + 2, 8,      k, k + 1, s, s + 1,
                                p, p + 1, d, 4 - d, groups, 0, 0};
                int64_t oh = convOutputExtent(h, k, s, p, d);
                int64_t ow =
                    convOutputExtent(h + 2, k + 1, s + 1, p + 1, 4 - d);
                if (oh < 0 || ow < 0)
                  continue;
                memopt_context ctx;
                int dims[4] = {0, 0, 0, 0};
                ASSERT_TRUE(memopt::cuda::cudnnConvOutputDims(
                    &ctx, "memopt_conv2d", dtype, shape, dims))
                    << ctx.message;
                EXPECT_EQ(dims[0], 2);
                EXPECT_EQ(dims[1], 8);
                EXPECT_EQ(dims[2], oh);
                EXPECT_EQ(dims[3], ow);
                ++checked;
              }
  EXPECT_GT(checked, 1000);
}

/// Geometries with groups, strides, padding and dilation.
std::vector<ConvShape> sampleShapes() {
  return {
      {1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0},
      {2, 4, 5, 6, 6, 3, 2, 2, 1, 1, 1, 1, 2, 2, 0, 0},
      {3, 8, 7, 7, 8, 3, 3, 1, 1, 1, 1, 1, 1, 8, 0, 0},
      {4, 6, 9, 5, 9, 1, 1, 2, 2, 0, 0, 1, 1, 3, 0, 0},
      {2, 3, 11, 13, 5, 3, 5, 3, 2, 2, 1, 2, 3, 1, 0, 0},
      {1, 16, 32, 1, 4, 7, 1, 1, 1, 3, 0, 1, 1, 4, 0, 0},
  };
}

/// An NCHW-contiguous tensor: the last stride is 1, each stride is the next
/// one times the next extent.
void expectContiguous(const memopt::cuda::ConvTensor4d &t,
                      std::initializer_list<int64_t> dims) {
  int i = 0;
  for (int64_t dim : dims)
    EXPECT_EQ(t.dims[i++], dim);
  EXPECT_EQ(t.strides[3], 1);
  for (int j = 0; j < 3; ++j)
    EXPECT_EQ(t.strides[j], t.strides[j + 1] * t.dims[j + 1]) << j;
}

TEST(ConvPlanTest, DescriptorsAreNchwContiguous) {
  for (const ConvShape &s : sampleShapes()) {
    ConvDescriptors d;
    ASSERT_TRUE(describeConv(s, d));
    int64_t oh = convOutputExtent(s.h, s.kh, s.sh, s.ph, s.dh);
    int64_t ow = convOutputExtent(s.w, s.kw, s.sw, s.pw, s.dw);
    expectContiguous(d.x, {s.n, s.c, s.h, s.w});
    expectContiguous(d.y, {s.n, s.o, oh, ow});
    EXPECT_EQ(d.x.strides[0], s.c * s.h * s.w);
    EXPECT_EQ(d.y.strides[0], s.o * oh * ow);
    EXPECT_EQ(d.filter[0], s.o);
    EXPECT_EQ(d.filter[1], s.c / s.groups);
    EXPECT_EQ(d.filter[2], s.kh);
    EXPECT_EQ(d.filter[3], s.kw);
    EXPECT_EQ(d.pad[0], s.ph);
    EXPECT_EQ(d.pad[1], s.pw);
    EXPECT_EQ(d.stride[0], s.sh);
    EXPECT_EQ(d.stride[1], s.sw);
    EXPECT_EQ(d.dilation[0], s.dh);
    EXPECT_EQ(d.dilation[1], s.dw);
    EXPECT_EQ(d.groups, s.groups);
  }
}

/// cuDNN's legacy descriptors take ints: every tensor must have fewer than
/// 2^31 elements.
TEST(ConvPlanTest, DescriptorsRefuseTensorsOf2To31Elements) {
  ConvDescriptors d;
  // 46340^2 < 2^31 - 1 < 46341^2.
  EXPECT_TRUE(describeConv(
      {1, 1, 46340, 46340, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0}, d));
  EXPECT_FALSE(describeConv(
      {1, 1, 46341, 46341, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0}, d));
  // The input fits, the output (o = 2) does not.
  EXPECT_FALSE(describeConv(
      {1, 1, 46340, 46340, 2, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0}, d));
  // The filter does not.
  EXPECT_FALSE(describeConv(
      {1, 65536, 1, 1, 65536, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0}, d));
  // Neither does a batch beyond int.
  EXPECT_FALSE(describeConv(
      {int64_t(1) << 31, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0}, d));
}

/// The entry refuses it with a message that names the entry and the shape,
/// before any cuDNN call (this context has no device), and caches nothing.
TEST(ConvPlanTest, EntryRefusesTensorsOf2To31Elements) {
  alignas(256) static unsigned char dummy[256];
  memopt_context *ctx = new memopt_context();
  memopt_conv2d_grad_filter(ctx, MEMOPT_BF16, dummy, dummy, dummy, 2, 1, 32768,
                            32768, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1);
  EXPECT_EQ(ctx->status, MEMOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(ctx->message.rfind("memopt_conv2d_grad_filter: cuDNN's "
                               "convolutions take tensors of fewer than 2^31 "
                               "elements: input [2, 1, 32768, 32768]",
                               0),
            0u)
      << ctx->message;
  EXPECT_EQ(convPlanCount(ctx), 0u);
  memopt_context_destroy(ctx);
}

/// Shapes that differ from a base in one argument each (every field of the
/// key), all valid.
std::vector<std::pair<std::string, ConvKey>> keyVariants() {
  ConvShape base{2, 4, 8, 8, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2, 0, 0};
  std::vector<std::pair<std::string, ConvShape>> shapes;
  auto vary = [&](const char *name, int64_t ConvShape::*field, int64_t value) {
    ConvShape s = base;
    s.*field = value;
    shapes.emplace_back(name, s);
  };
  vary("n", &ConvShape::n, 3);
  vary("c", &ConvShape::c, 6);
  vary("h", &ConvShape::h, 9);
  vary("w", &ConvShape::w, 9);
  vary("o", &ConvShape::o, 8);
  vary("kh", &ConvShape::kh, 1);
  vary("kw", &ConvShape::kw, 1);
  vary("sh", &ConvShape::sh, 2);
  vary("sw", &ConvShape::sw, 2);
  vary("ph", &ConvShape::ph, 0);
  vary("pw", &ConvShape::pw, 0);
  vary("dh", &ConvShape::dh, 2);
  vary("dw", &ConvShape::dw, 2);
  vary("groups", &ConvShape::groups, 1);
  // Stride 2 makes h = 8 and h = 9 (with kh = 2, pad 0) give the same oh:
  // the keys must still differ, as the input descriptors do.
  ConvShape strided = base;
  strided.sh = 2;
  strided.kh = 2;
  strided.ph = 0;
  shapes.emplace_back("strided", strided);
  strided.h = 9;
  shapes.emplace_back("strided, h + 1", strided);
  EXPECT_EQ(convOutputExtent(8, 2, 2, 0, 1), convOutputExtent(9, 2, 2, 0, 1));

  std::vector<std::pair<std::string, ConvKey>> keys;
  keys.emplace_back("base",
                    makeConvKey(ConvDirection::Forward, MEMOPT_F32, base));
  for (const auto &[name, s] : shapes)
    keys.emplace_back(name, makeConvKey(ConvDirection::Forward, MEMOPT_F32, s));
  keys.emplace_back("bf16",
                    makeConvKey(ConvDirection::Forward, MEMOPT_BF16, base));
  keys.emplace_back("f16",
                    makeConvKey(ConvDirection::Forward, MEMOPT_F16, base));
  keys.emplace_back("backward data",
                    makeConvKey(ConvDirection::BackwardData, MEMOPT_F32, base));
  keys.emplace_back(
      "backward filter",
      makeConvKey(ConvDirection::BackwardFilter, MEMOPT_F32, base));
  return keys;
}

TEST(ConvPlanTest, KeysTellEveryArgumentApart) {
  auto keys = keyVariants();
  ASSERT_EQ(keys.size(), 21u);
  for (size_t i = 0; i < keys.size(); ++i)
    for (size_t j = 0; j < keys.size(); ++j) {
      const ConvKey &a = keys[i].second, &b = keys[j].second;
      // A strict weak order in which only a key is equivalent to itself.
      EXPECT_EQ(!(a < b) && !(b < a), i == j)
          << keys[i].first << " vs " << keys[j].first;
      EXPECT_EQ(a == b, i == j) << keys[i].first << " vs " << keys[j].first;
      if (i != j) {
        EXPECT_NE(a < b, b < a) << keys[i].first << " vs " << keys[j].first;
      }
    }
}

TEST(ConvPlanTest, EqualArgumentsGiveEqualKeys) {
  ConvShape s{2, 4, 8, 8, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2, 0, 0};
  ConvShape filled = s;
  filled.oh = 8; // what checkConv fills in; the key recomputes it
  filled.ow = 8;
  ConvKey a = makeConvKey(ConvDirection::BackwardFilter, MEMOPT_BF16, s);
  ConvKey b = makeConvKey(ConvDirection::BackwardFilter, MEMOPT_BF16, filled);
  EXPECT_TRUE(a == b);
  EXPECT_FALSE(a < b);
  EXPECT_FALSE(b < a);
  EXPECT_EQ(a.oh, 8);
  EXPECT_EQ(a.ow, 8);
}

/// A cache keyed by ConvKey makes one plan per distinct key, however often
/// each is asked for.
TEST(ConvPlanTest, CacheMakesOnePlanPerKey) {
  memopt::runtime::PlanCache<ConvKey, int> cache;
  auto keys = keyVariants();
  int made = 0;
  for (int round = 0; round < 3; ++round)
    for (const auto &entry : keys) {
      int *plan = cache.get(entry.second, [&](int &fresh) {
        fresh = made++;
        return true;
      });
      ASSERT_NE(plan, nullptr);
    }
  EXPECT_EQ(made, static_cast<int>(keys.size()));
  EXPECT_EQ(cache.size(), keys.size());
}

TEST(ConvPlanTest, AlgorithmIsTheFirstThatQualifies) {
  const uint64_t limit = 1000;
  auto candidate = [](bool ok, bool det, bool math, uint64_t bytes) {
    ConvAlgoCandidate c;
    c.succeeded = ok;
    c.deterministic = det;
    c.mathAllowed = math;
    c.workspaceBytes = bytes;
    return c;
  };
  // Ranked fastest first: each of the first four fails one condition.
  std::vector<ConvAlgoCandidate> ranked = {
      candidate(false, true, true, 0),   // not supported
      candidate(true, false, true, 0),   // atomics
      candidate(true, true, false, 0),   // TF32 for strict f32
      candidate(true, true, true, 1001), // workspace beyond the slice
      candidate(true, true, true, 1000), // the first that qualifies
      candidate(true, true, true, 0),    // qualifies, ranked later
  };
  int count = static_cast<int>(ranked.size());
  EXPECT_EQ(pickConvAlgorithm(ranked.data(), count, limit), 4);
  EXPECT_EQ(pickConvAlgorithm(ranked.data(), count, limit, 5), 5);
  EXPECT_EQ(pickConvAlgorithm(ranked.data(), count, limit, 6), -1);
  EXPECT_EQ(pickConvAlgorithm(ranked.data(), 4, limit), -1);
  EXPECT_EQ(pickConvAlgorithm(ranked.data(), count, 999), 5);
  EXPECT_EQ(pickConvAlgorithm(ranked.data(), count, 1001), 3);
  EXPECT_EQ(pickConvAlgorithm(ranked.data(), 0, limit), -1);
  // The way out for a shape without a deterministic algorithm: the atomic
  // one qualifies when nondeterminism is allowed.
  EXPECT_EQ(pickConvAlgorithm(ranked.data(), 4, limit, 0, true), 1);
}

/// An algorithm that cannot run gives way to the next qualifying one; a
/// failure of another kind stops; with none left the run fails, having
/// tried each in rank order.
TEST(ConvPlanTest, UnsupportedAlgorithmGivesWayToTheNext) {
  // Qualifying algorithms at ranks 0, 2 and 3.
  auto next = [](int i) { return i < 2 ? 2 : i == 2 ? 3 : -1; };
  std::vector<int> tried;
  auto unsupportedBelow = [&](int first) {
    return [&tried, first](int i) {
      tried.push_back(i);
      return i < first ? ConvRunOutcome::Unsupported : ConvRunOutcome::Done;
    };
  };
  int current = 0;
  EXPECT_EQ(runWithFallbacks(current, next, unsupportedBelow(3)), 3);
  EXPECT_EQ(tried, (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(current, 3);
  tried.clear();
  current = 3;
  EXPECT_EQ(runWithFallbacks(current, next, unsupportedBelow(0)), 3);
  EXPECT_EQ(tried, (std::vector<int>{3}));
  tried.clear();
  current = 0;
  EXPECT_EQ(runWithFallbacks(current, next, unsupportedBelow(99)), -1);
  EXPECT_EQ(tried, (std::vector<int>{0, 2, 3}));
  tried.clear();
  current = 0;
  auto failsOther = [&](int i) {
    tried.push_back(i);
    return ConvRunOutcome::Failed;
  };
  EXPECT_EQ(runWithFallbacks(current, next, failsOther), -1);
  EXPECT_EQ(tried, (std::vector<int>{0}));
}

TEST(ConvPlanTest, NoPlansBeforeTheFirstConvolution) {
  memopt_context ctx;
  EXPECT_EQ(convPlanCount(&ctx), 0u);
  EXPECT_EQ(convPlanCount(nullptr), 0u);
}

//===----------------------------------------------------------------------===//
// With a device
//===----------------------------------------------------------------------===//

/// A convolution's geometry and its f64 references.
struct Conv {
  const char *name;
  int64_t n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups;

  int64_t oh() const { return convOutputExtent(h, kh, sh, ph, dh); }
  int64_t ow() const { return convOutputExtent(w, kw, sw, pw, dw); }
  int64_t cg() const { return c / groups; }
  size_t inSize() const { return n * c * h * w; }
  size_t filterSize() const { return o * cg() * kh * kw; }
  size_t outSize() const { return n * o * oh() * ow(); }

  /// Calls tap(input index, filter index, output index) for every product
  /// of the convolution.
  template <typename Tap> void forEachTap(Tap &&tap) const {
    int64_t og = o / groups;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t oc = 0; oc < o; ++oc)
        for (int64_t y = 0; y < oh(); ++y)
          for (int64_t x = 0; x < ow(); ++x)
            for (int64_t ci = 0; ci < cg(); ++ci)
              for (int64_t i = 0; i < kh; ++i)
                for (int64_t j = 0; j < kw; ++j) {
                  int64_t iy = y * sh - ph + i * dh, ix = x * sw - pw + j * dw;
                  if (iy < 0 || iy >= h || ix < 0 || ix >= w)
                    continue;
                  int64_t ch = oc / og * cg() + ci;
                  tap(((b * c + ch) * h + iy) * w + ix,
                      ((oc * cg() + ci) * kh + i) * kw + j,
                      ((b * o + oc) * oh() + y) * ow() + x);
                }
  }
};

/// An f64 reference of one result: each element's exact sum, the sum of
/// its terms' magnitudes, and its number of terms.
struct Reference {
  std::vector<double> value, magnitude;
  std::vector<int64_t> terms;
  explicit Reference(size_t size)
      : value(size, 0.0), magnitude(size, 0.0), terms(size, 0) {}
  void add(int64_t at, double product) {
    value[at] += product;
    magnitude[at] += std::fabs(product);
    ++terms[at];
  }
};

/// The references of the forward, input gradient and filter gradient for
/// input x, filter f and output gradient dy.
struct References {
  Reference y, dx, df;
  References(const Conv &cv, const std::vector<float> &x,
             const std::vector<float> &f, const std::vector<float> &dy)
      : y(cv.outSize()), dx(cv.inSize()), df(cv.filterSize()) {
    cv.forEachTap([&](int64_t xi, int64_t fi, int64_t yi) {
      y.add(yi, double(x[xi]) * f[fi]);
      dx.add(xi, double(dy[yi]) * f[fi]);
      df.add(fi, double(dy[yi]) * x[xi]);
    });
  }
};

uint16_t toBits(memopt_dtype dtype, float v) {
  return dtype == MEMOPT_BF16 ? memopt::runtime::floatToBFloat16Bits(v)
                              : memopt::runtime::floatToHalfBits(v);
}

float fromBits(memopt_dtype dtype, uint16_t bits) {
  return dtype == MEMOPT_BF16 ? memopt::runtime::bfloat16BitsToFloat(bits)
                              : memopt::runtime::halfBitsToFloat(bits);
}

/// The unit roundoff of a dtype, 2^-precision: the largest relative error
/// of one rounding to nearest (bf16 keeps 8 bits, f16 11, f32 24).
double unitRoundoff(memopt_dtype dtype) {
  switch (dtype) {
  case MEMOPT_BF16:
    return std::ldexp(1.0, -8);
  case MEMOPT_F16:
    return std::ldexp(1.0, -11);
  default:
    return std::ldexp(1.0, -24);
  }
}

/// The largest absolute error of rounding a value below the dtype's normal
/// range (half its subnormal spacing); bf16 shares f32's range.
double subnormalRoundoff(memopt_dtype dtype) {
  return std::ldexp(1.0, dtype == MEMOPT_F16 ? -25 : -150);
}

class CudaConvTest : public CudaTest {
protected:
  /// `host` rounded to `dtype` (the values the device sees).
  std::vector<float> representable(memopt_dtype dtype, std::vector<float> v) {
    if (dtype != MEMOPT_F32)
      for (float &x : v)
        x = fromBits(dtype, toBits(dtype, x));
    return v;
  }

  /// `host` on the device in `dtype`.
  void *put(memopt_dtype dtype, const std::vector<float> &host) {
    if (dtype == MEMOPT_F32)
      return upload(host);
    std::vector<uint16_t> bits(host.size());
    for (size_t i = 0; i < host.size(); ++i)
      bits[i] = toBits(dtype, host[i]);
    return upload(bits);
  }

  /// A device buffer of `n` elements of `dtype`, every byte 0xFF (NaN in
  /// every float dtype), so a result that is not fully written shows.
  void *poisoned(memopt_dtype dtype, size_t n) {
    size_t bytes = n * memopt_dtype_size(dtype);
    return upload(std::vector<unsigned char>(bytes, 0xFF));
  }

  std::vector<unsigned char> bytesOf(const void *p, memopt_dtype dtype,
                                     size_t n) {
    return download<unsigned char>(p, n * memopt_dtype_size(dtype));
  }

  std::vector<float> get(memopt_dtype dtype, const void *p, size_t n) {
    if (dtype == MEMOPT_F32)
      return download<float>(p, n);
    std::vector<uint16_t> bits = download<uint16_t>(p, n);
    std::vector<float> values(n);
    for (size_t i = 0; i < n; ++i)
      values[i] = fromBits(dtype, bits[i]);
    return values;
  }

  /// Every element within one rounding of the result to `dtype` (twice the
  /// unit roundoff, and the subnormal step) plus the worst-case f32
  /// summation error of its terms (twice u = 2^-24 per term, relative to
  /// the terms' magnitudes; f16 and bf16 products are exact in f32).
  void expectNear(const char *what, const Conv &cv, memopt_dtype dtype,
                  const std::vector<float> &got, const Reference &want) {
    ASSERT_EQ(got.size(), want.value.size());
    int bad = 0;
    for (size_t i = 0; i < got.size() && bad < 5; ++i) {
      double tolerance =
          2 * unitRoundoff(dtype) * std::fabs(want.value[i]) +
          subnormalRoundoff(dtype) +
          2 * std::ldexp(1.0, -24) * want.terms[i] * want.magnitude[i];
      double error = std::fabs(got[i] - want.value[i]);
      if (!(error <= tolerance)) {
        ++bad;
        ADD_FAILURE() << cv.name << ", " << what << " ("
                      << memopt::runtime::dtypeName(dtype) << ") element " << i
                      << ": " << got[i] << ", want " << want.value[i] << " +- "
                      << tolerance;
      }
    }
  }

  void conv2d(memopt_dtype dtype, const Conv &cv, const void *x, const void *f,
              void *y) {
    memopt_conv2d(ctx, dtype, x, f, y, cv.n, cv.c, cv.h, cv.w, cv.o, cv.kh,
                  cv.kw, cv.sh, cv.sw, cv.ph, cv.pw, cv.dh, cv.dw, cv.groups);
  }
  void gradInput(memopt_dtype dtype, const Conv &cv, const void *dy,
                 const void *f, void *dx) {
    memopt_conv2d_grad_input(ctx, dtype, dy, f, dx, cv.n, cv.c, cv.h, cv.w,
                             cv.o, cv.kh, cv.kw, cv.sh, cv.sw, cv.ph, cv.pw,
                             cv.dh, cv.dw, cv.groups);
  }
  void gradFilter(memopt_dtype dtype, const Conv &cv, const void *dy,
                  const void *x, void *df) {
    memopt_conv2d_grad_filter(ctx, dtype, dy, x, df, cv.n, cv.c, cv.h, cv.w,
                              cv.o, cv.kh, cv.kw, cv.sh, cv.sw, cv.ph, cv.pw,
                              cv.dh, cv.dw, cv.groups);
  }

  /// The three entries on random data against the references, each run
  /// twice into poisoned outputs: the runs must agree bit for bit.
  void checkAgainstReferences(const Conv &cv, memopt_dtype dtype) {
    used = 0;
    std::vector<float> x = representable(dtype, random(cv.inSize()));
    std::vector<float> f = representable(dtype, random(cv.filterSize()));
    std::vector<float> dy = representable(dtype, random(cv.outSize()));
    References want(cv, x, f, dy);
    void *dX = put(dtype, x), *dF = put(dtype, f), *dDy = put(dtype, dy);
    struct Result {
      const char *what;
      size_t size;
      const Reference &want;
      void *first, *second;
    };
    Result results[] = {
        {"forward", cv.outSize(), want.y, nullptr, nullptr},
        {"input gradient", cv.inSize(), want.dx, nullptr, nullptr},
        {"filter gradient", cv.filterSize(), want.df, nullptr, nullptr},
    };
    for (Result &r : results) {
      r.first = poisoned(dtype, r.size);
      r.second = poisoned(dtype, r.size);
    }
    for (int run = 0; run < 2; ++run) {
      conv2d(dtype, cv, dX, dF, run ? results[0].second : results[0].first);
      gradInput(dtype, cv, dDy, dF, run ? results[1].second : results[1].first);
      gradFilter(dtype, cv, dDy, dX,
                 run ? results[2].second : results[2].first);
    }
    ASSERT_EQ(memopt_get_status(ctx), MEMOPT_OK)
        << memopt_get_error_message(ctx);
    for (const Result &r : results) {
      expectNear(r.what, cv, dtype, get(dtype, r.first, r.size), r.want);
      EXPECT_TRUE(bytesOf(r.first, dtype, r.size) ==
                  bytesOf(r.second, dtype, r.size))
          << cv.name << ", " << r.what << " ("
          << memopt::runtime::dtypeName(dtype) << "): a second run differs";
    }
  }
};

/// Geometries for the device tests: small ones that cover every argument,
/// and a ResNet-like layer for which cuDNN ranks its tuned algorithms.
std::vector<Conv> deviceShapes() {
  return {
      {"groups 2, stride (2, 1), padding, dilation (1, 2)", 2, 4, 5, 6, 6, 3, 2,
       2, 1, 1, 1, 1, 2, 2},
      {"3x3 same", 2, 3, 8, 8, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1},
      {"depthwise 3x3, stride 2", 2, 8, 9, 9, 8, 3, 3, 2, 2, 1, 1, 1, 1, 8},
      {"1x1, stride 2", 3, 6, 7, 7, 4, 1, 1, 2, 2, 0, 0, 1, 1, 1},
      {"dilation 2, padding 2, groups 3", 2, 6, 10, 11, 9, 3, 3, 1, 2, 2, 2, 2,
       2, 3},
      {"7x7, stride 2, padding 3", 2, 3, 20, 20, 8, 7, 7, 2, 2, 3, 3, 1, 1, 1},
      {"ResNet 3x3, 32 -> 64", 8, 32, 28, 28, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1},
  };
}

TEST_F(CudaConvTest, F32MatchesTheReference) {
  for (const Conv &cv : deviceShapes())
    checkAgainstReferences(cv, MEMOPT_F32);
}

TEST_F(CudaConvTest, Bf16MatchesTheReference) {
  for (const Conv &cv : deviceShapes())
    checkAgainstReferences(cv, MEMOPT_BF16);
}

TEST_F(CudaConvTest, F16MatchesTheReference) {
  for (const Conv &cv : deviceShapes())
    checkAgainstReferences(cv, MEMOPT_F16);
}

/// Two convolutions of one shape with different operands, called in turn
/// as a step calls them (both forwards, then both input gradients, then
/// both filter gradients) into poisoned outputs: the cached plan serves
/// both, and each result is its own.
TEST_F(CudaConvTest, IdenticalShapesKeepTheirOwnResults) {
  for (const Conv &cv : deviceShapes()) {
    used = 0;
    struct Operands {
      std::vector<float> x, f, dy;
      void *dX, *dF, *dDy, *y, *dx, *df;
    } ops[2];
    for (Operands &op : ops) {
      op.x = random(cv.inSize());
      op.f = random(cv.filterSize());
      op.dy = random(cv.outSize());
      op.dX = put(MEMOPT_F32, op.x);
      op.dF = put(MEMOPT_F32, op.f);
      op.dDy = put(MEMOPT_F32, op.dy);
      op.y = poisoned(MEMOPT_F32, cv.outSize());
      op.dx = poisoned(MEMOPT_F32, cv.inSize());
      op.df = poisoned(MEMOPT_F32, cv.filterSize());
    }
    for (Operands &op : ops)
      conv2d(MEMOPT_F32, cv, op.dX, op.dF, op.y);
    for (Operands &op : ops)
      gradInput(MEMOPT_F32, cv, op.dDy, op.dF, op.dx);
    for (Operands &op : ops)
      gradFilter(MEMOPT_F32, cv, op.dDy, op.dX, op.df);
    ASSERT_EQ(memopt_get_status(ctx), MEMOPT_OK)
        << memopt_get_error_message(ctx);
    for (const Operands &op : ops) {
      References want(cv, op.x, op.f, op.dy);
      expectNear("forward", cv, MEMOPT_F32,
                 get(MEMOPT_F32, op.y, cv.outSize()), want.y);
      expectNear("input gradient", cv, MEMOPT_F32,
                 get(MEMOPT_F32, op.dx, cv.inSize()), want.dx);
      expectNear("filter gradient", cv, MEMOPT_F32,
                 get(MEMOPT_F32, op.df, cv.filterSize()), want.df);
    }
  }
}

/// With the first run of each direction failing as an unsupported
/// algorithm would (MEMOPT_CUDA_FAIL_CONV_RUNS), the plan moves to the next
/// qualifying algorithm and the results still match the references.
TEST_F(CudaConvTest, FailedAlgorithmFallsBackToTheNext) {
  setenv("MEMOPT_CUDA_FAIL_CONV_RUNS", "3", 1);
  Conv cv = deviceShapes().back();
  std::vector<float> x = random(cv.inSize()), f = random(cv.filterSize()),
                     dy = random(cv.outSize());
  References want(cv, x, f, dy);
  void *dX = put(MEMOPT_F32, x), *dF = put(MEMOPT_F32, f),
       *dDy = put(MEMOPT_F32, dy);
  void *y = poisoned(MEMOPT_F32, cv.outSize()),
       *dx = poisoned(MEMOPT_F32, cv.inSize()),
       *df = poisoned(MEMOPT_F32, cv.filterSize());
  conv2d(MEMOPT_F32, cv, dX, dF, y);
  gradInput(MEMOPT_F32, cv, dDy, dF, dx);
  gradFilter(MEMOPT_F32, cv, dDy, dX, df);
  unsetenv("MEMOPT_CUDA_FAIL_CONV_RUNS");
  ASSERT_EQ(memopt_get_status(ctx), MEMOPT_OK) << memopt_get_error_message(ctx);
  expectNear("forward", cv, MEMOPT_F32, get(MEMOPT_F32, y, cv.outSize()),
             want.y);
  expectNear("input gradient", cv, MEMOPT_F32,
             get(MEMOPT_F32, dx, cv.inSize()), want.dx);
  expectNear("filter gradient", cv, MEMOPT_F32,
             get(MEMOPT_F32, df, cv.filterSize()), want.df);
}

/// One plan per entry, dtype and shape, made at the first call.
TEST_F(CudaConvTest, OnePlanPerShape) {
  Conv cv = deviceShapes()[0];
  Conv other = deviceShapes()[1];
  void *x = alloc(1 << 16), *f = alloc(1 << 16), *y = alloc(1 << 16);
  ASSERT_EQ(convPlanCount(ctx), 0u);
  for (int i = 0; i < 3; ++i)
    conv2d(MEMOPT_F32, cv, x, f, y);
  EXPECT_EQ(convPlanCount(ctx), 1u);
  for (int i = 0; i < 3; ++i) {
    gradInput(MEMOPT_F32, cv, y, f, x);
    gradFilter(MEMOPT_F32, cv, y, x, f);
  }
  EXPECT_EQ(convPlanCount(ctx), 3u);
  conv2d(MEMOPT_BF16, cv, x, f, y);
  conv2d(MEMOPT_F32, other, x, f, y);
  conv2d(MEMOPT_F32, other, x, f, y);
  EXPECT_EQ(convPlanCount(ctx), 5u);
  ASSERT_EQ(memopt_get_status(ctx), MEMOPT_OK) << memopt_get_error_message(ctx);
}

/// An empty operand (no channels, no batch, no output channels) leaves
/// every sum empty: the result is zero. An empty result is not touched.
TEST_F(CudaConvTest, EmptyOperandsGiveZeros) {
  const size_t count = 64;
  void *dummy = alloc(256);
  auto expectZeros = [&](const void *p, const char *what) {
    std::vector<float> got = download<float>(p, count);
    for (float v : got)
      ASSERT_EQ(v, 0.0f) << what;
  };
  void *y = poisoned(MEMOPT_F32, count);
  // c = 0: [4, 0, 4, 4] input, [4, 0, 3, 3] filter, [4, 4, 2, 2] output.
  memopt_conv2d(ctx, MEMOPT_F32, dummy, dummy, y, 4, 0, 4, 4, 4, 3, 3, 1, 1, 0,
                0, 1, 1, 1);
  expectZeros(y, "forward, c = 0");
  // n = 0: the filter gradient [4, 16, 1, 1] is zero.
  void *df = poisoned(MEMOPT_F32, count);
  memopt_conv2d_grad_filter(ctx, MEMOPT_F32, dummy, dummy, df, 0, 16, 4, 4, 4,
                            1, 1, 1, 1, 0, 0, 1, 1, 1);
  expectZeros(df, "filter gradient, n = 0");
  // o = 0: the input gradient [1, 4, 4, 4] is zero.
  void *dx = poisoned(MEMOPT_F32, count);
  memopt_conv2d_grad_input(ctx, MEMOPT_F32, dummy, dummy, dx, 1, 4, 4, 4, 0, 3,
                           3, 1, 1, 1, 1, 1, 1, 1);
  expectZeros(dx, "input gradient, o = 0");
  // n = 0: the forward's output is empty; nothing is written.
  void *untouched = poisoned(MEMOPT_F32, count);
  memopt_conv2d(ctx, MEMOPT_F32, dummy, dummy, untouched, 0, 4, 4, 4, 4, 3, 3,
                1, 1, 1, 1, 1, 1, 1);
  EXPECT_TRUE(bytesOf(untouched, MEMOPT_F32, count) ==
              std::vector<unsigned char>(count * 4, 0xFF));
  EXPECT_EQ(convPlanCount(ctx), 0u);
}

} // namespace
