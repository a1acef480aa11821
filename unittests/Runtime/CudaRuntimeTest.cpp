//===- CudaRuntimeTest.cpp - CUDA runtime tests ----------------------------===//
//
// Without a GPU: the Philox block (a host function) against Random123's
// known-answer vectors, "no CUDA device", and every entry's argument errors
// (ArgumentErrorCases.h) on a context built without a device. With one
// (scripts/gpu-check.sh runs them there): kernels against f64 references
// computed here, dropout against the documented derivation, RNE
// casts against bit-level rounding, and device-side errors (an index out of
// range) reported through the sticky error. Tests that need a device skip
// with a message when there is none.
//
//===----------------------------------------------------------------------===//

#include "ArgumentErrorCases.h"
#include "CudaRuntime.h"
#include "Float16.h"
#include "PhiloxKnownAnswers.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using memopt::host::bfloat16BitsToFloat;
using memopt::host::floatToBFloat16Bits;

namespace {

TEST(CudaPhiloxTest, KnownAnswerVectors) {
  memopt::test::expectPhiloxKnownAnswers();
}

TEST(CudaContextTest, NameAndNoDeviceError) {
  EXPECT_STREQ(memopt_runtime_name(), "cuda");
  memopt_context *ctx = memopt_context_create();
  if (ctx) {
    memopt_context_destroy(ctx);
    GTEST_SKIP() << "a CUDA device is present";
  }
  EXPECT_NE(std::string(memopt_context_create_error()).find("no CUDA device"),
            std::string::npos)
      << memopt_context_create_error();
}

/// Argument validation runs before any CUDA call, so a context without a
/// stream, arena or workspace (built here, without a device) reports every
/// argument error, with the host runtime's messages.
TEST(CudaArgumentErrorTest, EveryEntryReportsTheSharedMessages) {
  memopt::test::expectArgumentErrors([] { return new memopt_context(); });
}

TEST(CudaArgumentErrorTest, RankBeyondTheKernelLimit) {
  memopt_context *ctx = new memopt_context();
  int64_t shape[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  int64_t perm[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  float x = 0.0f;
  memopt_transpose(ctx, MEMOPT_F32, &x, 9, shape, perm, &x);
  EXPECT_STREQ(memopt_get_error_message(ctx),
               "memopt_transpose: invalid rank 9 (the CUDA runtime supports up "
               "to 8)");
  memopt_context_destroy(ctx);
}

/// A context with an arena; tensors are placed by bump allocation.
class CudaTest : public ::testing::Test {
protected:
  void SetUp() override {
    ctx = memopt_context_create();
    if (!ctx)
      GTEST_SKIP() << "no CUDA device: " << memopt_context_create_error();
    base = static_cast<char *>(memopt_arena_allocate(ctx, 64 << 20));
    ASSERT_NE(base, nullptr) << memopt_get_error_message(ctx);
  }
  void TearDown() override {
    if (!ctx)
      return;
    if (!expectError) {
      EXPECT_EQ(memopt_get_status(ctx), MEMOPT_OK)
          << memopt_get_error_message(ctx);
    }
    memopt_context_destroy(ctx);
  }

  void *alloc(size_t bytes) {
    void *p = base + used;
    used += (bytes + 255) / 256 * 256;
    return p;
  }
  template <typename T> T *upload(const std::vector<T> &host) {
    void *p = alloc(host.size() * sizeof(T));
    memopt_copy_from_host(ctx, p, host.data(), host.size() * sizeof(T));
    return static_cast<T *>(p);
  }
  template <typename T> std::vector<T> download(const void *p, size_t n) {
    std::vector<T> host(n);
    memopt_copy_to_host(ctx, host.data(), p, n * sizeof(T));
    return host;
  }
  std::vector<float> random(size_t n, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (float &x : v)
      x = dist(rng);
    return v;
  }

  memopt_context *ctx = nullptr;
  char *base = nullptr;
  size_t used = 0;
  bool expectError = false;
  std::mt19937 rng{99};
};

TEST_F(CudaTest, MatmulMatchesReference) {
  const int64_t batch = 3, m = 37, n = 29, k = 53;
  for (int transA = 0; transA < 2; ++transA) {
    for (int transB = 0; transB < 2; ++transB) {
      std::vector<float> a = random(batch * m * k), b = random(k * n);
      float *da = upload(a), *db = upload(b);
      float *dc = static_cast<float *>(alloc(batch * m * n * 4));
      // b is one matrix shared by every batch element.
      memopt_matmul(ctx, MEMOPT_F32, da, db, dc, batch, 1, m, n, k, transA,
                    transB, MEMOPT_F32);
      std::vector<float> c = download<float>(dc, batch * m * n);
      for (int64_t p = 0; p < batch; ++p)
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double want = 0;
            for (int64_t l = 0; l < k; ++l) {
              double x = transA ? a[p * m * k + l * m + i] : a[p * m * k + i * k + l];
              double y = transB ? b[j * k + l] : b[l * n + j];
              want += x * y;
            }
            ASSERT_NEAR(c[(p * m + i) * n + j], want, 1e-5)
                << transA << transB << " " << p << " " << i << " " << j;
          }
    }
  }
}

TEST_F(CudaTest, Bf16MatmulAccumulatesInF32) {
  const int64_t m = 16, n = 24, k = 4096;
  std::vector<float> a = random(m * k), b = random(k * n);
  std::vector<uint16_t> ha(a.size()), hb(b.size());
  for (size_t i = 0; i < a.size(); ++i)
    ha[i] = floatToBFloat16Bits(a[i]);
  for (size_t i = 0; i < b.size(); ++i)
    hb[i] = floatToBFloat16Bits(b[i]);
  uint16_t *da = upload(ha), *db = upload(hb);
  float *dc = static_cast<float *>(alloc(m * n * 4));
  memopt_matmul(ctx, MEMOPT_BF16, da, db, dc, 1, 1, m, n, k, 0, 0, MEMOPT_F32);
  std::vector<float> c = download<float>(dc, m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double want = 0;
      for (int64_t l = 0; l < k; ++l)
        want += double(bfloat16BitsToFloat(ha[i * k + l])) *
                bfloat16BitsToFloat(hb[l * n + j]);
      ASSERT_NEAR(c[i * n + j], want, 1e-3) << i << " " << j;
    }
}

TEST_F(CudaTest, CastRoundsToNearestEven) {
  std::vector<float> x = random(10000, -1e3f, 1e3f);
  x.push_back(1.0f + 1.0f / 256.0f); // a tie: rounds to even (1.0)
  x.push_back(1.0f + 3.0f / 256.0f); // a tie: rounds up
  float *dx = upload(x);
  uint16_t *dy = static_cast<uint16_t *>(alloc(x.size() * 2));
  memopt_cast(ctx, MEMOPT_F32, dx, MEMOPT_BF16, dy, x.size());
  std::vector<uint16_t> y = download<uint16_t>(dy, x.size());
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_EQ(y[i], floatToBFloat16Bits(x[i])) << x[i];
}

TEST_F(CudaTest, DropoutFollowsTheDocumentedDerivation) {
  const double p = 0.25;
  const uint64_t seed = 0x123456789abcdefull, stream = 3, step = 0x100000002ull;
  std::vector<float> x = random(1000, 0.5f, 1.5f);
  float *dx = upload(x);
  float *dy = static_cast<float *>(alloc(x.size() * 4));
  memopt_set_step(ctx, step);
  memopt_dropout(ctx, MEMOPT_F32, dx, dy, x.size(), p, seed, stream, 5);
  std::vector<float> y = download<float>(dy, x.size());
  uint64_t mixed = seed ^ (stream * 0x9E3779B97F4A7C15ull);
  uint32_t key[2] = {static_cast<uint32_t>(mixed),
                     static_cast<uint32_t>(mixed >> 32)};
  float scale = static_cast<float>(1.0 / (1.0 - p));
  for (size_t i = 0; i < x.size(); ++i) {
    uint64_t j = 5 + i;
    uint32_t ctr[4] = {
        static_cast<uint32_t>(j / 4), static_cast<uint32_t>((j / 4) >> 32),
        static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32)};
    uint32_t r[4];
    memopt_philox4x32_10(ctr, key, r);
    double u = (r[j % 4] >> 8) * std::ldexp(1.0, -24);
    ASSERT_EQ(y[i], u >= p ? x[i] * scale : 0.0f) << i;
  }
}

TEST_F(CudaTest, ReduceAndSoftmaxMatchReference) {
  const int64_t outer = 5, dim = 300, inner = 7;
  std::vector<float> x = random(outer * dim * inner, -5.0f, 5.0f);
  float *dx = upload(x);
  float *sum = static_cast<float *>(alloc(outer * inner * 4));
  float *soft = static_cast<float *>(alloc(x.size() * 4));
  memopt_reduce(ctx, MEMOPT_REDUCE_SUM, MEMOPT_F32, dx, MEMOPT_F32, sum, outer,
                dim, inner);
  memopt_softmax(ctx, MEMOPT_F32, dx, soft, outer, dim, inner);
  std::vector<float> s = download<float>(sum, outer * inner);
  std::vector<float> y = download<float>(soft, x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double total = 0, mx = -INFINITY, z = 0;
      for (int64_t r = 0; r < dim; ++r) {
        total += x[(o * dim + r) * inner + i];
        mx = std::max(mx, double(x[(o * dim + r) * inner + i]));
      }
      for (int64_t r = 0; r < dim; ++r)
        z += std::exp(x[(o * dim + r) * inner + i] - mx);
      ASSERT_NEAR(s[o * inner + i], total, 1e-3);
      for (int64_t r = 0; r < dim; ++r) {
        int64_t at = (o * dim + r) * inner + i;
        ASSERT_NEAR(y[at], std::exp(x[at] - mx) / z, 1e-6);
      }
    }
}

TEST_F(CudaTest, LayerNormMatchesReference) {
  const int64_t rows = 33, cols = 768;
  std::vector<float> x = random(rows * cols, -3.0f, 3.0f);
  std::vector<float> w = random(cols), b = random(cols);
  float *dx = upload(x), *dw = upload(w), *db = upload(b);
  float *dy = static_cast<float *>(alloc(x.size() * 4));
  float *mean = static_cast<float *>(alloc(rows * 4));
  float *rstd = static_cast<float *>(alloc(rows * 4));
  memopt_layer_norm(ctx, MEMOPT_F32, dx, MEMOPT_F32, dw, db, dy, mean, rstd,
                    rows, cols, 1e-5);
  std::vector<float> y = download<float>(dy, x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mu = 0, var = 0;
    for (int64_t j = 0; j < cols; ++j)
      mu += x[r * cols + j];
    mu /= cols;
    for (int64_t j = 0; j < cols; ++j)
      var += (x[r * cols + j] - mu) * (x[r * cols + j] - mu);
    var /= cols;
    for (int64_t j = 0; j < cols; ++j) {
      double want = (x[r * cols + j] - mu) / std::sqrt(var + 1e-5) * w[j] + b[j];
      ASSERT_NEAR(y[r * cols + j], want, 1e-4) << r << " " << j;
    }
  }
}

TEST_F(CudaTest, CrossEntropyMatchesReference) {
  const int64_t rows = 40, classes = 1000;
  std::vector<float> x = random(rows * classes, -4.0f, 4.0f);
  std::vector<int64_t> labels(rows);
  for (int64_t r = 0; r < rows; ++r)
    labels[r] = r == 3 ? -100 : (r * 37) % classes;
  float *dx = upload(x);
  int64_t *dl = upload(labels);
  float *loss = static_cast<float *>(alloc(4));
  memopt_cross_entropy(ctx, MEMOPT_F32, dx, MEMOPT_I64, dl, loss, rows, classes,
                       -100, MEMOPT_REDUCTION_MEAN);
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (labels[r] == -100)
      continue;
    double mx = -INFINITY, z = 0;
    for (int64_t j = 0; j < classes; ++j)
      mx = std::max(mx, double(x[r * classes + j]));
    for (int64_t j = 0; j < classes; ++j)
      z += std::exp(x[r * classes + j] - mx);
    total += mx + std::log(z) - x[r * classes + labels[r]];
  }
  EXPECT_NEAR(download<float>(loss, 1)[0], total / (rows - 1), 1e-5);
}

TEST_F(CudaTest, EmbeddingIndexOutOfRangeIsReported) {
  std::vector<float> table = random(10 * 4);
  std::vector<int64_t> indices = {1, 2, 12, 3};
  float *dt = upload(table);
  int64_t *di = upload(indices);
  float *out = static_cast<float *>(alloc(16 * 4));
  memopt_embedding(ctx, MEMOPT_F32, dt, MEMOPT_I64, di, out, 4, 10, 4);
  EXPECT_EQ(memopt_get_status(ctx), MEMOPT_ERROR_INDEX_OUT_OF_RANGE);
  EXPECT_STREQ(memopt_get_error_message(ctx),
               "memopt_embedding: index 12 at position 2 out of range [0, 10)");
  memopt_clear_error(ctx);
  EXPECT_EQ(memopt_get_status(ctx), MEMOPT_OK);
}

TEST_F(CudaTest, EmbeddingGradSumsRepeatedRows) {
  const int64_t rows = 7, dim = 33;
  std::vector<int64_t> indices = {1, 5, 1, 0, 5, 1};
  std::vector<float> grad = random(indices.size() * dim);
  int64_t *di = upload(indices);
  float *dg = upload(grad);
  float *out = static_cast<float *>(alloc(rows * dim * 4));
  memopt_embedding_grad(ctx, MEMOPT_F32, dg, MEMOPT_I64, di, out,
                        indices.size(), rows, dim);
  std::vector<float> got = download<float>(out, rows * dim);
  std::vector<float> want(rows * dim, 0.0f);
  for (size_t i = 0; i < indices.size(); ++i)
    for (int64_t j = 0; j < dim; ++j)
      want[indices[i] * dim + j] += grad[i * dim + j];
  EXPECT_EQ(got, want); // the same order: bit-identical
}

TEST_F(CudaTest, HighWaterIsArenaPlusWorkspace) {
  EXPECT_EQ(memopt_memory_high_water(ctx),
            memopt_arena_size(ctx) + MEMOPT_CUDA_WORKSPACE_BYTES);
}

// --memopt-bufferize writes each unscaled gradient over its scaled one
// (results[j] == grads[j], which runtime.h allows), so memopt_unscale must
// give the same values in place as into separate buffers, bit for bit
// against a host reference, for f32 and bf16 tensors larger than one grid,
// with the non-finite check. (The host entry's in place: OptimizerTest.cpp.)
TEST_F(CudaTest, UnscaleInPlaceMatchesSeparateBuffersAndHostReference) {
  // More elements than one grid covers, so the grid-stride loop runs too.
  const int64_t n32 = (1 << 20) + 7, n16 = 100003;
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> dist(-3e4f, 3e4f);
  std::vector<float> g32(n32);
  for (float &v : g32)
    v = dist(gen);
  std::vector<uint16_t> g16(n16);
  for (uint16_t &v : g16)
    v = floatToBFloat16Bits(dist(gen));
  const float scale = 65536.0f;
  const float inv = static_cast<float>(1.0 / static_cast<double>(scale));

  float *dscale = upload(std::vector<float>{scale});
  memopt_dtype dtypes[] = {MEMOPT_F32, MEMOPT_BF16};
  int64_t sizes[] = {n32, n16};

  // Separate result buffers.
  float *a32 = upload(g32);
  uint16_t *a16 = upload(g16);
  float *r32 = static_cast<float *>(alloc(n32 * 4));
  uint16_t *r16 = static_cast<uint16_t *>(alloc(n16 * 2));
  uint8_t *inf1 = upload(std::vector<uint8_t>{7});
  const void *grads1[] = {a32, a16};
  void *results1[] = {r32, r16};
  memopt_unscale(ctx, dscale, 2, dtypes, grads1, results1, sizes, inf1);

  // In place: every result is its gradient.
  float *b32 = upload(g32);
  uint16_t *b16 = upload(g16);
  uint8_t *inf2 = upload(std::vector<uint8_t>{7});
  const void *grads2[] = {b32, b16};
  void *results2[] = {b32, b16};
  memopt_unscale(ctx, dscale, 2, dtypes, grads2, results2, sizes, inf2);

  std::vector<float> sep32 = download<float>(r32, n32);
  std::vector<float> in32 = download<float>(b32, n32);
  std::vector<uint16_t> sep16 = download<uint16_t>(r16, n16);
  std::vector<uint16_t> in16 = download<uint16_t>(b16, n16);
  EXPECT_EQ(download<uint8_t>(inf1, 1)[0], 0);
  EXPECT_EQ(download<uint8_t>(inf2, 1)[0], 0);
  // The separate call must not have touched its gradients.
  EXPECT_EQ(download<float>(a32, n32), g32);
  for (int64_t i = 0; i < n32; ++i) {
    float want = g32[i] * inv;
    ASSERT_EQ(std::memcmp(&in32[i], &want, 4), 0) << i;
    ASSERT_EQ(std::memcmp(&sep32[i], &want, 4), 0) << i;
  }
  for (int64_t i = 0; i < n16; ++i) {
    uint16_t want = floatToBFloat16Bits(bfloat16BitsToFloat(g16[i]) * inv);
    ASSERT_EQ(in16[i], want) << i;
    ASSERT_EQ(sep16[i], want) << i;
  }
}

TEST_F(CudaTest, UnscaleInPlaceFindsNonFiniteValues) {
  for (float bad : {INFINITY, -INFINITY, NAN}) {
    std::vector<float> first(5000, 2.0f), second(3000, 4.0f);
    second[2999] = bad;
    float *dscale = upload(std::vector<float>{2.0f});
    float *d1 = upload(first), *d2 = upload(second);
    uint8_t *inf = upload(std::vector<uint8_t>{0});
    memopt_dtype dtypes[] = {MEMOPT_F32, MEMOPT_F32};
    int64_t sizes[] = {5000, 3000};
    const void *grads[] = {d1, d2};
    void *results[] = {d1, d2};
    memopt_unscale(ctx, dscale, 2, dtypes, grads, results, sizes, inf);
    EXPECT_EQ(download<uint8_t>(inf, 1)[0], 1) << bad;
    std::vector<float> got = download<float>(d1, 5000);
    EXPECT_EQ(got, std::vector<float>(5000, 1.0f));
    EXPECT_EQ(download<float>(d2, 1)[0], 2.0f);
    used = 0;
  }
}

} // namespace
