//===- CudaRuntimeTest.cpp - CUDA runtime tests ---------------------------===//
//
// Without a GPU: the Philox block (a host function) against Random123's
// known-answer vectors, "no CUDA device", and every entry's argument errors
// (ArgumentErrorCases.h) and every dtype combination the dtype table rejects
// (DTypeRuleCalls.h) on a context built without a device. With one
// (scripts/gpu-check.sh runs them there): kernels against f64 references
// computed here, dropout against the documented derivation, RNE
// casts against bit-level rounding, and device-side errors (an index out of
// range) reported through the sticky error. Tests that need a device skip
// with a message when there is none.
//
//===----------------------------------------------------------------------===//

#include "CudaRuntime.h"
#include "ArgumentErrorCases.h"
#include "CudaTestFixture.h"
#include "DTypeRuleCalls.h"
#include "PhiloxKnownAnswers.h"
#include "memopt/runtime/ActivationMath.h"
#include "memopt/runtime/Float16.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

using memopt::runtime::bfloat16BitsToFloat;
using memopt::runtime::floatToBFloat16Bits;

using memopt::test::CudaTest;

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
  EXPECT_EQ(memopt_context_create_found_no_device(), 1)
      << memopt_context_create_error();
}

/// Argument validation runs before any CUDA call, so a context without a
/// stream, arena or workspace (built here, without a device) reports every
/// argument error, with the host runtime's messages.
TEST(CudaArgumentErrorTest, EveryEntryReportsTheSharedMessages) {
  memopt::test::expectArgumentErrors([] { return new memopt_context(); });
}

/// Likewise every dtype combination the runtime's dtype table rejects, with
/// the table's message; the accepted ones need a device (CudaTest below).
TEST(CudaArgumentErrorTest, RejectsWhatTheDTypeTableRejects) {
  using memopt::test::DTypeCallBuffers;
  alignas(256) static unsigned char dummy[DTypeCallBuffers::kBytes];
  DTypeCallBuffers buffers;
  for (void *&data : buffers.data)
    data = dummy;
  buffers.step = reinterpret_cast<int64_t *>(dummy);
  buffers.scale = reinterpret_cast<float *>(dummy);
  memopt_context *ctx = new memopt_context();
  EXPECT_GT(memopt::test::walkDTypeRules(
                ctx, buffers, [] {},
                /*onlyRejected=*/true),
            0);
  memopt_context_destroy(ctx);
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

/// Every row of the runtime's dtype table over every combination of dtypes:
/// the CUDA runtime accepts exactly what the table accepts, as the host
/// runtime does (DTypeRuleCalls.h); the host-memory entries of offload on
/// host buffers.
TEST_F(CudaTest, AcceptsExactlyTheDTypeTable) {
  using memopt::test::DTypeCallBuffers;
  DTypeCallBuffers buffers, hostBuffers;
  for (void *&data : buffers.data)
    data = alloc(DTypeCallBuffers::kBytes);
  char *scalars = static_cast<char *>(alloc(16));
  buffers.step = reinterpret_cast<int64_t *>(scalars);
  buffers.scale = reinterpret_cast<float *>(scalars + 8);
  std::vector<uint64_t> hostStorage((DTypeCallBuffers::kCount + 1) *
                                    DTypeCallBuffers::kBytes / 8);
  auto *hostBytes = reinterpret_cast<unsigned char *>(hostStorage.data());
  for (int i = 0; i < DTypeCallBuffers::kCount; ++i)
    hostBuffers.data[i] = hostBytes + i * DTypeCallBuffers::kBytes;
  unsigned char *hostScalars =
      hostBytes + DTypeCallBuffers::kCount * DTypeCallBuffers::kBytes;
  hostBuffers.step = reinterpret_cast<int64_t *>(hostScalars);
  hostBuffers.scale = reinterpret_cast<float *>(hostScalars + 8);
  std::vector<unsigned char> zeros(DTypeCallBuffers::kBytes, 0);
  auto reset = [&] {
    for (void *data : buffers.data)
      memopt_copy_from_host(ctx, data, zeros.data(), zeros.size());
    const int64_t step = 1;
    const float scale = 1.0f;
    memopt_copy_from_host(ctx, buffers.step, &step, sizeof(step));
    memopt_copy_from_host(ctx, buffers.scale, &scale, sizeof(scale));
    std::fill(hostStorage.begin(), hostStorage.end(), 0);
    *hostBuffers.step = step;
    *hostBuffers.scale = scale;
  };
  EXPECT_GT(memopt::test::walkDTypeRules(ctx, buffers, reset,
                                         /*onlyRejected=*/false, &hostBuffers),
            0);
}

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

TEST_F(CudaTest, CastToAndFromIndicesMatchesTheHost) {
  std::vector<float> x = random(4096, -1e4f, 1e4f);
  x[0] = std::numeric_limits<float>::quiet_NaN();
  x[1] = std::numeric_limits<float>::infinity();
  x[2] = 0x1p63f;
  x[3] = -2.5f;
  float *dx = upload(x);
  int64_t *di = static_cast<int64_t *>(alloc(x.size() * 8));
  memopt_cast(ctx, MEMOPT_F32, dx, MEMOPT_I64, di, x.size());
  std::vector<int64_t> indices = download<int64_t>(di, x.size());
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_EQ(indices[i], memopt::runtime::indexFromFloat<int64_t>(x[i]))
        << x[i];
  std::vector<int64_t> big = {(int64_t(1) << 24) + 1, -3, 257};
  int64_t *db = upload(big);
  uint16_t *dy = static_cast<uint16_t *>(alloc(big.size() * 2));
  memopt_cast(ctx, MEMOPT_I64, db, MEMOPT_BF16, dy, big.size());
  std::vector<uint16_t> y = download<uint16_t>(dy, big.size());
  for (size_t i = 0; i < big.size(); ++i)
    ASSERT_EQ(y[i], floatToBFloat16Bits(static_cast<float>(big[i])));
  int32_t *dn = static_cast<int32_t *>(alloc(big.size() * 4));
  memopt_cast(ctx, MEMOPT_I64, db, MEMOPT_I32, dn, big.size());
  EXPECT_EQ(download<int32_t>(dn, big.size()),
            (std::vector<int32_t>{(1 << 24) + 1, -3, 257}));
}

TEST_F(CudaTest, CompareMatchesTheHostFormula) {
  std::vector<float> a = random(4096, -4.0f, 4.0f);
  std::vector<float> b = random(4096, -4.0f, 4.0f);
  for (size_t i = 0; i < a.size(); i += 7)
    b[i] = a[i]; // ties
  a[3] = b[5] = std::numeric_limits<float>::quiet_NaN();
  float *da = upload(a), *db = upload(b);
  uint8_t *dy = static_cast<uint8_t *>(alloc(a.size()));
  for (int op = MEMOPT_COMPARE_EQ; op <= MEMOPT_COMPARE_GE; ++op) {
    auto compare = static_cast<memopt_compare_op>(op);
    memopt_compare(ctx, compare, MEMOPT_F32, da, db, dy, a.size());
    std::vector<uint8_t> y = download<uint8_t>(dy, a.size());
    for (size_t i = 0; i < a.size(); ++i)
      ASSERT_EQ(y[i], memopt::runtime::compareValue(compare, a[i], b[i]))
          << op << " " << a[i] << " " << b[i];
  }
  std::vector<int64_t> labels = {-100, 0, 5, -100};
  int64_t *dl = upload(labels);
  std::vector<int64_t> ignore(4, -100);
  int64_t *di = upload(ignore);
  memopt_compare(ctx, MEMOPT_COMPARE_NE, MEMOPT_I64, dl, di, dy, 4);
  EXPECT_EQ(download<uint8_t>(dy, 4), (std::vector<uint8_t>{0, 1, 1, 0}));
  EXPECT_STREQ(memopt_get_error_message(ctx), "");
}

TEST_F(CudaTest, DropoutFollowsTheDocumentedDerivation) {
  const double p = 0.25;
  const uint64_t seed = 0x123456789abcdefull, stream = 3, step = 0x100000002ull;
  std::vector<float> x = random(1000, 0.5f, 1.5f);
  float *dx = upload(x);
  float *dy = static_cast<float *>(alloc(x.size() * 4));
  memopt_set_step(ctx, step);
  memopt_dropout(ctx, MEMOPT_F32, dx, dy, x.size(), 1, p, seed, stream, 5);
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
                       -100, MEMOPT_REDUCTION_MEAN, 0.0);
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

TEST_F(CudaTest, CrossEntropyLabelSmoothingMatchesReference) {
  // F.cross_entropy(label_smoothing=0.1): lse - 0.9 z[label] - 0.1 mean(z)
  // per row, and the gradient (p - 0.9 onehot - 0.1 / C) / count.
  const int64_t rows = 9, classes = 300;
  const double eps = 0.1;
  std::vector<float> x = random(rows * classes, -4.0f, 4.0f);
  std::vector<int64_t> labels(rows);
  for (int64_t r = 0; r < rows; ++r)
    labels[r] = r % 4 == 1 ? -100 : (r * 37) % classes;
  float *dx = upload(x);
  int64_t *dl = upload(labels);
  float *loss = static_cast<float *>(alloc(4));
  float *grad = static_cast<float *>(alloc(rows * classes * 4));
  float *upstream = upload(std::vector<float>{1.0f});
  memopt_cross_entropy(ctx, MEMOPT_F32, dx, MEMOPT_I64, dl, loss, rows, classes,
                       -100, MEMOPT_REDUCTION_MEAN, eps);
  memopt_cross_entropy_grad(ctx, MEMOPT_F32, dx, MEMOPT_I64, dl, upstream, grad,
                            rows, classes, -100, MEMOPT_REDUCTION_MEAN, eps);
  std::vector<float> got = download<float>(grad, rows * classes);
  double total = 0;
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r)
    count += labels[r] != -100;
  for (int64_t r = 0; r < rows; ++r) {
    const float *z = x.data() + r * classes;
    double lse = 0, sum = 0;
    for (int64_t j = 0; j < classes; ++j) {
      lse += std::exp(double(z[j]));
      sum += z[j];
    }
    lse = std::log(lse);
    for (int64_t j = 0; j < classes; ++j) {
      double target = (j == labels[r] ? 1.0 - eps : 0.0) + eps / classes;
      double want =
          labels[r] == -100 ? 0.0 : (std::exp(z[j] - lse) - target) / count;
      ASSERT_NEAR(got[r * classes + j], want, 1e-6) << r << " " << j;
    }
    if (labels[r] != -100)
      total += lse - (1.0 - eps) * z[labels[r]] - eps * sum / classes;
  }
  EXPECT_NEAR(download<float>(loss, 1)[0], total / count, 1e-5);
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
                        indices.size(), rows, dim, -1);
  std::vector<float> got = download<float>(out, rows * dim);
  std::vector<float> want(rows * dim, 0.0f);
  for (size_t i = 0; i < indices.size(); ++i)
    for (int64_t j = 0; j < dim; ++j)
      want[indices[i] * dim + j] += grad[i * dim + j];
  EXPECT_EQ(got, want); // the same order: bit-identical

  // padding_idx 5: its row stays zero, the others are unchanged.
  memopt_embedding_grad(ctx, MEMOPT_F32, dg, MEMOPT_I64, di, out,
                        indices.size(), rows, dim, 5);
  got = download<float>(out, rows * dim);
  for (int64_t j = 0; j < dim; ++j)
    want[5 * dim + j] = 0.0f;
  EXPECT_EQ(got, want);
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

//===----------------------------------------------------------------------===//
// Fused attention and linear cross-entropy, against f64 references computed
// here (the host runtime has the same entry names, so it cannot link into
// this binary): the whole score matrix, or the whole logits matrix, in
// double from the values the kernels read (16-bit inputs are generated
// representable). A 16-bit result may differ by its own rounding, half a
// unit relative (2^-8 bf16, 2^-11 f16); f32 accumulation adds a small
// multiple of 2^-24 times the sum of the terms' magnitudes. A wrong mask,
// scale, skipped tile or dropout draw moves results by whole probabilities.
//===----------------------------------------------------------------------===//

/// Half a unit in the last place of `dtype`, relative (0 for f32).
double storageUnit(memopt_dtype dtype) {
  return dtype == MEMOPT_BF16  ? 1.0 / (1 << 8)
         : dtype == MEMOPT_F16 ? 1.0 / (1 << 11)
                               : 0.0;
}

/// Rounds `values` to `dtype` in place; returns them stored in `dtype`.
std::vector<uint8_t> storeAs(memopt_dtype dtype, std::vector<float> &values) {
  std::vector<uint8_t> bytes(values.size() * memopt_dtype_size(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == MEMOPT_F32) {
      std::memcpy(bytes.data() + 4 * i, &values[i], 4);
      continue;
    }
    uint16_t bits = dtype == MEMOPT_BF16
                        ? floatToBFloat16Bits(values[i])
                        : memopt::runtime::floatToHalfBits(values[i]);
    values[i] = dtype == MEMOPT_BF16 ? bfloat16BitsToFloat(bits)
                                     : memopt::runtime::halfBitsToFloat(bits);
    std::memcpy(bytes.data() + 2 * i, &bits, 2);
  }
  return bytes;
}

/// `n` elements of `dtype` widened to f32.
std::vector<float> widen(memopt_dtype dtype, const std::vector<uint8_t> &bytes,
                         size_t n) {
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) {
    if (dtype == MEMOPT_F32) {
      std::memcpy(&values[i], bytes.data() + 4 * i, 4);
      continue;
    }
    uint16_t bits;
    std::memcpy(&bits, bytes.data() + 2 * i, 2);
    values[i] = dtype == MEMOPT_BF16 ? bfloat16BitsToFloat(bits)
                                     : memopt::runtime::halfBitsToFloat(bits);
  }
  return values;
}

/// A reference value, the magnitude of its terms (the sum of |term|, which
/// bounds the f32 rounding of their sum) and the error its inputs carry
/// into it (the f32 rounding of the scores or logits it is made of).
struct Reference {
  std::vector<double> value, magnitude, error;
  void resize(size_t n) {
    value.assign(n, 0.0);
    magnitude.assign(n, 0.0);
    error.assign(n, 0.0);
  }
  /// A term whose own magnitude is `mag` (its factors' sums of |products|).
  void add(size_t at, double term, double mag, double relativeError = 0.0) {
    value[at] += term;
    magnitude[at] += mag;
    error[at] += relativeError * mag;
  }
};

/// 4 u sqrt(n): the relative f32 rounding, with random-walk growth, of a sum
/// of n products (relative to the sum of their magnitudes).
double sumError(int64_t n) {
  return 4.0 / (1 << 24) * std::sqrt(static_cast<double>(n > 1 ? n : 1));
}

/// Expects |got - want| <= f32Relative * magnitude + error + (the 16-bit
/// rounding of `dtype` of the value and, with `roundedTerms`, of every
/// term).
void expectNearReference(const std::vector<float> &got, const Reference &want,
                         memopt_dtype dtype, double f32Relative,
                         bool roundedTerms, const std::string &what) {
  ASSERT_EQ(got.size(), want.value.size()) << what;
  double unit = storageUnit(dtype);
  int failures = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double mag = want.magnitude[i];
    double tolerance = f32Relative * mag + want.error[i] + 1e-7 +
                       unit * std::fabs(want.value[i]) +
                       (roundedTerms ? unit * mag : 0.0);
    if (!(std::fabs(got[i] - want.value[i]) <= tolerance) && failures++ < 5)
      ADD_FAILURE() << what << "[" << i << "] = " << got[i] << ", expected "
                    << want.value[i] << " +- " << tolerance;
  }
  EXPECT_EQ(failures, 0) << what;
}

/// keep(e) of memopt_dropout, from runtime.h's derivation.
bool dropoutKeeps(double p, uint64_t seed, uint64_t stream, uint64_t step,
                  uint64_t e) {
  uint64_t mixed = seed ^ (stream * 0x9E3779B97F4A7C15ull);
  uint32_t key[2] = {static_cast<uint32_t>(mixed),
                     static_cast<uint32_t>(mixed >> 32)};
  uint32_t ctr[4] = {
      static_cast<uint32_t>(e / 4), static_cast<uint32_t>((e / 4) >> 32),
      static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32)};
  uint32_t r[4];
  memopt_philox4x32_10(ctr, key, r);
  return (r[e % 4] >> 8) >= static_cast<uint32_t>(std::ceil(p * 16777216.0));
}

/// One attention call: shape, masks, dropout, dtype.
struct AttentionCall {
  std::string name;
  int64_t batch, heads, sq, sk, d, dv;
  int causal = 0;
  double maskValue = -INFINITY;
  std::vector<uint8_t> mask;
  std::array<int64_t, 4> strides{0, 0, 0, 0};
  double dropout = 0.0;
  uint64_t seed = 0, stream = 0, offset = 0, step = 0;
  memopt_dtype dtype = MEMOPT_F32;

  int64_t problems() const { return batch * heads; }
  double scale() const { return 1.0 / std::sqrt(static_cast<double>(d)); }
  bool masked(int64_t b, int64_t h, int64_t i, int64_t j) const {
    return (causal && j > i) ||
           (!mask.empty() && mask[b * strides[0] + h * strides[1] +
                                  i * strides[2] + j * strides[3]]);
  }
  /// The dropout factor of score (problem, i, j): 0 or (float)(1 / (1 - p)).
  double factor(int64_t problem, int64_t i, int64_t j) const {
    if (dropout == 0.0)
      return 1.0;
    uint64_t e = offset + ((problem * sq + i) * sk + j);
    return dropoutKeeps(dropout, seed, stream, step, e)
               ? static_cast<float>(1.0 / (1.0 - dropout))
               : 0.0;
  }
};

/// The values the kernels read and what they returned, widened to f32.
struct AttentionRun {
  std::vector<float> q, k, v, gradOut;
  std::vector<float> out, lse, gradQ, gradK, gradV;
};

struct AttentionReference {
  Reference out, lse, gradQ, gradK, gradV;
};

/// The reference in double. delta = grad_out . out takes the kernel's out,
/// as the contract defines it; masked scores pass no gradient to q and k,
/// and rows without a finite score none at all. A score is off by about
/// sumError(d) times its terms' magnitude in f32, which moves each
/// probability relatively by twice that (score and lse).
AttentionReference referenceAttention(const AttentionCall &c,
                                      const AttentionRun &run) {
  int64_t sq = c.sq, sk = c.sk, d = c.d, dv = c.dv, np = c.problems();
  double scale = c.scale();
  AttentionReference ref;
  ref.out.resize(np * sq * dv);
  ref.lse.resize(np * sq);
  ref.gradQ.resize(np * sq * d);
  ref.gradK.resize(np * sk * d);
  ref.gradV.resize(np * sk * dv);
  std::vector<double> s(sk), p(sk);
  for (int64_t pi = 0; pi < np; ++pi) {
    int64_t b = pi / c.heads, h = pi % c.heads;
    const float *q = run.q.data() + pi * sq * d;
    const float *k = run.k.data() + pi * sk * d;
    const float *v = run.v.data() + pi * sk * dv;
    const float *go = run.gradOut.data() + pi * sq * dv;
    const float *o = run.out.data() + pi * sq * dv;
    for (int64_t i = 0; i < sq; ++i) {
      double mx = -INFINITY, scoreMag = 0.0;
      for (int64_t j = 0; j < sk; ++j) {
        double dot = 0.0, mag = 0.0;
        for (int64_t x = 0; x < d; ++x) {
          dot += double(q[i * d + x]) * k[j * d + x];
          mag += std::fabs(double(q[i * d + x]) * k[j * d + x]);
        }
        bool masked = c.masked(b, h, i, j);
        s[j] = masked ? c.maskValue : scale * dot;
        if (!masked)
          scoreMag = std::max(scoreMag, scale * mag);
        mx = std::max(mx, s[j]);
      }
      size_t row = pi * sq + i;
      if (mx == -INFINITY) {
        ref.lse.value[row] = -INFINITY;
        for (int64_t x = 0; x < dv; ++x)
          ref.out.value[row * dv + x] = sk == 0 ? 0.0 : NAN;
        continue;
      }
      double pError = 2 * sumError(d) * scoreMag + sumError(sk);
      double z = 0.0;
      for (int64_t j = 0; j < sk; ++j)
        z += std::exp(s[j] - mx);
      double lse = mx + std::log(z);
      ref.lse.add(row, lse, std::fabs(lse), pError);
      double delta = 0.0, deltaMag = 0.0;
      for (int64_t x = 0; x < dv; ++x) {
        delta += double(go[i * dv + x]) * o[i * dv + x];
        deltaMag += std::fabs(double(go[i * dv + x]) * o[i * dv + x]);
      }
      for (int64_t j = 0; j < sk; ++j) {
        p[j] = std::exp(s[j] - mx) / z;
        double f = c.factor(pi, i, j);
        double dp = 0.0, dpMag = 0.0;
        for (int64_t x = 0; x < dv; ++x) {
          double pv = p[j] * f * v[j * dv + x], pg = p[j] * f * go[i * dv + x];
          ref.out.add(row * dv + x, pv, std::fabs(pv), pError);
          ref.gradV.add((pi * sk + j) * dv + x, pg, std::fabs(pg), pError);
          dp += double(go[i * dv + x]) * v[j * dv + x];
          dpMag += std::fabs(double(go[i * dv + x]) * v[j * dv + x]);
        }
        if (c.masked(b, h, i, j))
          continue;
        double ds = p[j] * (f * dp - delta);
        double dsMag = p[j] * (f * dpMag + deltaMag);
        double dsError = pError + sumError(dv);
        for (int64_t x = 0; x < d; ++x) {
          ref.gradQ.add(row * d + x, scale * ds * k[j * d + x],
                        scale * dsMag * std::fabs(k[j * d + x]), dsError);
          ref.gradK.add((pi * sk + j) * d + x, scale * ds * q[i * d + x],
                        scale * dsMag * std::fabs(q[i * d + x]), dsError);
        }
      }
    }
  }
  return ref;
}

/// Widens `n` elements of `dtype` at `device`.
std::vector<float> downloadAs(memopt_context *ctx, memopt_dtype dtype,
                              const void *device, size_t n) {
  std::vector<uint8_t> bytes(n * memopt_dtype_size(dtype));
  memopt_copy_to_host(ctx, bytes.data(), device, bytes.size());
  return widen(dtype, bytes, n);
}

class CudaFusedTest : public CudaTest {
protected:
  /// Uploads `values` rounded to `dtype` (rounding them in place).
  void *uploadAs(memopt_dtype dtype, std::vector<float> &values) {
    return upload(storeAs(dtype, values));
  }

  /// Random inputs for `c`, the forward and (with `grad`) the backward.
  AttentionRun runAttention(const AttentionCall &c, bool grad,
                            std::vector<float> *values = nullptr) {
    int64_t np = c.problems();
    AttentionRun run;
    run.q = random(np * c.sq * c.d, -1.5f, 1.5f);
    run.k = random(np * c.sk * c.d, -1.5f, 1.5f);
    run.v = values ? *values : random(np * c.sk * c.dv);
    run.gradOut = random(np * c.sq * c.dv);
    void *q = uploadAs(c.dtype, run.q), *k = uploadAs(c.dtype, run.k),
         *v = uploadAs(c.dtype, run.v), *go = uploadAs(c.dtype, run.gradOut);
    const uint8_t *mask = c.mask.empty() ? nullptr : upload(c.mask);
    const int64_t *strides = mask ? c.strides.data() : nullptr;
    size_t size = memopt_dtype_size(c.dtype);
    void *out = alloc(np * c.sq * c.dv * size + 1);
    float *lse = static_cast<float *>(alloc(np * c.sq * 4 + 1));
    memopt_set_step(ctx, c.step);
    memopt_attention(ctx, c.dtype, q, k, v, mask, strides, out, lse, c.batch,
                     c.heads, c.sq, c.sk, c.d, c.dv, c.scale(), c.causal,
                     c.maskValue, c.dropout, c.seed, c.stream, c.offset);
    run.out = downloadAs(ctx, c.dtype, out, np * c.sq * c.dv);
    run.lse = download<float>(lse, np * c.sq);
    if (!grad)
      return run;
    void *gq = alloc(np * c.sq * c.d * size + 1);
    void *gk = alloc(np * c.sk * c.d * size + 1);
    void *gv = alloc(np * c.sk * c.dv * size + 1);
    memopt_attention_grad(ctx, c.dtype, q, k, v, mask, strides, out, lse, go,
                          gq, gk, gv, c.batch, c.heads, c.sq, c.sk, c.d, c.dv,
                          c.scale(), c.causal, c.maskValue, c.dropout, c.seed,
                          c.stream, c.offset);
    run.gradQ = downloadAs(ctx, c.dtype, gq, np * c.sq * c.d);
    run.gradK = downloadAs(ctx, c.dtype, gk, np * c.sk * c.d);
    run.gradV = downloadAs(ctx, c.dtype, gv, np * c.sk * c.dv);
    return run;
  }

  /// Runs `c` forward and backward and compares every result with the
  /// reference.
  void checkAttention(const AttentionCall &c) {
    SCOPED_TRACE(c.name);
    used = 0;
    AttentionRun run = runAttention(c, /*grad=*/true);
    ASSERT_EQ(memopt_get_status(ctx), MEMOPT_OK)
        << memopt_get_error_message(ctx);
    AttentionReference ref = referenceAttention(c, run);
    double keys = sumError(c.sk), queries = sumError(c.sq);
    expectNearReference(run.out, ref.out, c.dtype, keys, false, "out");
    expectNearReference(run.lse, ref.lse, MEMOPT_F32, keys, false, "lse");
    expectNearReference(run.gradQ, ref.gradQ, c.dtype, keys, false, "grad_q");
    expectNearReference(run.gradK, ref.gradK, c.dtype, queries, false,
                        "grad_k");
    expectNearReference(run.gradV, ref.gradV, c.dtype, queries, false,
                        "grad_v");
  }
};

TEST_F(CudaFusedTest, AttentionMatchesReference) {
  checkAttention({"plain, partial tiles", 2, 3, 45, 70, 40, 24});
  AttentionCall causal{"causal, -inf", 1, 2, 100, 100, 64, 64};
  causal.causal = 1;
  checkAttention(causal);
  AttentionCall wide{"causal, sq < sk", 2, 1, 50, 110, 16, 8};
  wide.causal = 1;
  checkAttention(wide);
  AttentionCall tall{"causal, sq > sk", 1, 2, 110, 40, 16, 24};
  tall.causal = 1;
  checkAttention(tall);
  // Masked keys keep weight: no tile past the diagonal may be skipped, and
  // they still pass no gradient to q or k.
  AttentionCall finite{"causal, mask value -2", 1, 2, 90, 90, 16, 16};
  finite.causal = 1;
  finite.maskValue = -2.0;
  checkAttention(finite);
  // finfo.min as HF writes it: masked keys weigh exactly 0.
  AttentionCall huge{"causal, mask value -3.4e38", 1, 1, 100, 100, 8, 8};
  huge.causal = 1;
  huge.maskValue = -3.4e38;
  checkAttention(huge);
}

TEST_F(CudaFusedTest, AttentionBroadcastMasksAndDropout) {
  // A [batch, 1, 1, sk] key-padding mask: problem b hides its last 3b + 1
  // keys.
  AttentionCall padding{"key padding, causal, dropout", 3, 2, 70, 75, 32, 20};
  padding.causal = 1;
  padding.mask.assign(padding.batch * padding.sk, 0);
  for (int64_t b = 0; b < padding.batch; ++b)
    for (int64_t j = padding.sk - 1 - 3 * b; j < padding.sk; ++j)
      padding.mask[b * padding.sk + j] = 1;
  padding.strides = {padding.sk, 0, 0, 1};
  padding.dropout = 0.25;
  padding.seed = 0x5eed;
  padding.stream = 7;
  padding.offset = 1001;
  padding.step = 0x100000003ull;
  checkAttention(padding);

  // [1, heads, sq, sk] shared by the batch, with random holes; d and dv in
  // the widest register tier.
  AttentionCall perHead{"per-head mask, d 96, dv 130", 2, 2, 40, 50, 96, 130};
  perHead.maskValue = -1e4;
  perHead.mask.assign(perHead.heads * perHead.sq * perHead.sk, 0);
  std::bernoulli_distribution hole(0.3);
  for (size_t e = 0; e < perHead.mask.size(); ++e)
    perHead.mask[e] = hole(rng) && e % perHead.sk != 0;
  perHead.strides = {0, perHead.sq * perHead.sk, perHead.sk, 1};
  checkAttention(perHead);

  // The largest head dimension: the kernels' shared memory above 48 KiB.
  AttentionCall widest{"d = dv = 256, causal, dropout", 1, 2, 33, 65, 256, 256};
  widest.causal = 1;
  widest.dropout = 0.1;
  widest.seed = 5;
  checkAttention(widest);
}

TEST_F(CudaFusedTest, AttentionLowPrecisionStorage) {
  for (memopt_dtype dtype : {MEMOPT_BF16, MEMOPT_F16}) {
    AttentionCall c{
        dtype == MEMOPT_BF16 ? "bf16" : "f16", 2, 2, 70, 90, 16, 24};
    c.causal = 1;
    c.dropout = 0.1;
    c.seed = 11;
    c.dtype = dtype;
    checkAttention(c);
  }
}

TEST_F(CudaFusedTest, AttentionDropsWhatMemoptDropoutDrops) {
  // With v = identity (dv = sk), out[i, j] is p'[i, j] itself: zero
  // exactly where memopt_dropout zeroes element e of the score matrix.
  AttentionCall c{"identity values", 2, 3, 67, 70, 8, 70};
  c.dropout = 0.5;
  c.seed = 99;
  c.stream = 4;
  c.offset = 12345;
  c.step = 0x100000001ull;
  std::vector<float> identity(c.problems() * c.sk * c.dv, 0.0f);
  for (int64_t p = 0; p < c.problems(); ++p)
    for (int64_t j = 0; j < c.sk; ++j)
      identity[(p * c.sk + j) * c.dv + j] = 1.0f;
  AttentionRun run = runAttention(c, /*grad=*/false, &identity);
  size_t n = c.problems() * c.sq * c.sk;
  float *ones = upload(std::vector<float>(n, 1.0f));
  float *dropped = static_cast<float *>(alloc(n * 4));
  memopt_dropout(ctx, MEMOPT_F32, ones, dropped, n, 1, c.dropout, c.seed,
                 c.stream,
                 c.offset);
  std::vector<float> factors = download<float>(dropped, n);
  int64_t zeros = 0;
  for (size_t e = 0; e < n; ++e) {
    ASSERT_EQ(run.out[e] == 0.0f, factors[e] == 0.0f) << "element " << e;
    zeros += factors[e] == 0.0f;
  }
  EXPECT_GT(zeros, 0);
  EXPECT_LT(zeros, static_cast<int64_t>(n));
}

TEST_F(CudaFusedTest, AttentionFullyMaskedRowsAndNoKeys) {
  // Row 0 sees only key 0 under causality and the mask hides it; row 5 of
  // the second problem is masked whole: NaN outputs and lse -inf, and they
  // pass no gradient (no NaN) to anything.
  AttentionCall c{"fully masked rows", 1, 2, 70, 70, 8, 8};
  c.causal = 1;
  c.mask.assign(c.heads * c.sq * c.sk, 0);
  c.strides = {0, c.sq * c.sk, c.sk, 1};
  for (int64_t h = 0; h < c.heads; ++h)
    c.mask[(h * c.sq) * c.sk] = 1;
  for (int64_t j = 0; j < c.sk; ++j)
    c.mask[(c.sq + 5) * c.sk + j] = 1;
  AttentionRun run = runAttention(c, /*grad=*/true);
  AttentionReference ref = referenceAttention(c, run);
  for (int64_t p = 0; p < c.problems(); ++p)
    for (int64_t i = 0; i < c.sq; ++i) {
      int64_t row = p * c.sq + i;
      if (i != 0 && !(p == 1 && i == 5))
        continue;
      EXPECT_EQ(run.lse[row], -INFINITY) << row;
      for (int64_t x = 0; x < c.dv; ++x)
        EXPECT_TRUE(std::isnan(run.out[row * c.dv + x])) << row;
      for (int64_t x = 0; x < c.d; ++x)
        EXPECT_EQ(run.gradQ[row * c.d + x], 0.0f) << row;
    }
  for (float g : run.gradK)
    ASSERT_TRUE(std::isfinite(g));
  expectNearReference(run.gradV, ref.gradV, c.dtype, sumError(c.sq), false,
                      "grad_v");

  // sk = 0: an empty sum, lse log(0), and zero gradients.
  AttentionCall none{"no keys", 2, 1, 3, 0, 4, 5};
  used = 0;
  run = runAttention(none, /*grad=*/true);
  EXPECT_EQ(run.out, std::vector<float>(run.out.size(), 0.0f));
  EXPECT_EQ(run.lse, std::vector<float>(run.lse.size(), -INFINITY));
  EXPECT_EQ(run.gradQ, std::vector<float>(run.gradQ.size(), 0.0f));
}

TEST_F(CudaFusedTest, AttentionIsDeterministic) {
  AttentionCall c{"determinism", 2, 2, 130, 140, 48, 40};
  c.causal = 1;
  c.dropout = 0.2;
  c.dtype = MEMOPT_BF16;
  std::mt19937 saved = rng;
  AttentionRun first = runAttention(c, /*grad=*/true);
  rng = saved;
  AttentionRun second = runAttention(c, /*grad=*/true);
  EXPECT_EQ(first.out, second.out);
  EXPECT_EQ(first.lse, second.lse);
  EXPECT_EQ(first.gradQ, second.gradQ);
  EXPECT_EQ(first.gradK, second.gradK);
  EXPECT_EQ(first.gradV, second.gradV);
}

TEST(CudaArgumentErrorTest, AttentionHeadDimensionBeyondTheKernelLimit) {
  memopt_context *ctx = new memopt_context();
  float x = 0.0f;
  memopt_attention(ctx, MEMOPT_F32, &x, &x, &x, nullptr, nullptr, &x, &x, 1, 1,
                   1, 1, 257, 64, 1.0, 0, -INFINITY, 0.0, 0, 0, 0);
  EXPECT_EQ(memopt_get_status(ctx), MEMOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(memopt_get_error_message(ctx),
               "memopt_attention: head dimensions d = 257 and dv = 64 exceed "
               "the CUDA kernels' limit of 256");
  memopt_context_destroy(ctx);
}

/// One linear cross-entropy call.
struct LinearCall {
  std::string name;
  int64_t rows, dim, classes, chunk;
  bool bias = true;
  memopt_loss_reduction reduction = MEMOPT_REDUCTION_MEAN;
  memopt_dtype dtype = MEMOPT_F32;
  memopt_dtype labelDtype = MEMOPT_I64;
  /// Every label is ignored.
  bool allIgnored = false;
  /// w (and grad_w) f32 under a 16-bit dtype: a master weight with bits the
  /// dtype drops, which the kernels round a chunk at a time.
  bool wF32 = false;
};

constexpr int64_t kIgnoreIndex = -100;

struct LinearRun {
  std::vector<float> x, w, bias;
  std::vector<int64_t> labels;
  float loss = 0.0f;
  std::vector<float> lse, gradX, gradW, gradBias;
};

struct LinearReference {
  Reference loss, lse, gradX, gradW, gradBias;
};

/// The unfused op in double: logits, softmax, dlogits and its products. A
/// logit is off by about sumError(dim) times its terms' magnitude in f32
/// (either GEMM), which lse, the loss and each probability (relatively)
/// inherit.
LinearReference referenceLinear(const LinearCall &c, const LinearRun &run,
                                double gradLoss) {
  int64_t rows = c.rows, dim = c.dim, classes = c.classes;
  LinearReference ref;
  ref.loss.resize(1);
  ref.lse.resize(rows);
  ref.gradX.resize(rows * dim);
  ref.gradW.resize(classes * dim);
  ref.gradBias.resize(c.bias ? classes : 0);
  int64_t count = 0;
  for (int64_t label : run.labels)
    count += label != kIgnoreIndex;
  bool mean = c.reduction == MEMOPT_REDUCTION_MEAN;
  double g = mean ? (count ? gradLoss / count : 0.0) : gradLoss;
  double lossScale = mean ? 1.0 / (count ? count : 1) : 1.0;
  std::vector<double> logits(classes);
  for (int64_t r = 0; r < rows; ++r) {
    double mx = -INFINITY, logitMag = 0.0;
    for (int64_t j = 0; j < classes; ++j) {
      double z = c.bias ? run.bias[j] : 0.0, mag = std::fabs(z);
      for (int64_t x = 0; x < dim; ++x) {
        z += double(run.x[r * dim + x]) * run.w[j * dim + x];
        mag += std::fabs(double(run.x[r * dim + x]) * run.w[j * dim + x]);
      }
      logits[j] = z;
      mx = std::max(mx, z);
      logitMag = std::max(logitMag, mag);
    }
    double logitError = sumError(dim) * logitMag + sumError(classes);
    double sum = 0.0;
    for (int64_t j = 0; j < classes; ++j)
      sum += std::exp(logits[j] - mx);
    double lse = mx + std::log(sum);
    ref.lse.add(r, lse, std::fabs(lse));
    ref.lse.error[r] = logitError;
    int64_t label = run.labels[r];
    if (label == kIgnoreIndex)
      continue;
    double rowLoss = lse - logits[label];
    ref.loss.add(0, lossScale * rowLoss, lossScale * std::fabs(rowLoss));
    ref.loss.error[0] += lossScale * 2 * logitError;
    for (int64_t j = 0; j < classes; ++j) {
      double p = std::exp(logits[j] - lse), hot = j == label ? 1.0 : 0.0;
      double dl = g * (p - hot), dlMag = std::fabs(g) * (p + hot);
      // p is off relatively by twice the logit error.
      double relative = 2 * logitError * p / (p + hot);
      if (c.bias)
        ref.gradBias.add(j, dl, dlMag, relative);
      for (int64_t x = 0; x < dim; ++x) {
        double wv = run.w[j * dim + x], xv = run.x[r * dim + x];
        ref.gradX.add(r * dim + x, dl * wv, dlMag * std::fabs(wv), relative);
        ref.gradW.add(j * dim + x, dl * xv, dlMag * std::fabs(xv), relative);
      }
    }
  }
  if (mean && count == 0)
    ref.loss.value[0] = NAN;
  return ref;
}

class CudaLinearLossTest : public CudaFusedTest {
protected:
  /// Labels as `dtype` bytes.
  static std::vector<uint8_t> labelBytes(memopt_dtype dtype,
                                         const std::vector<int64_t> &labels) {
    std::vector<uint8_t> bytes(labels.size() * memopt_dtype_size(dtype));
    for (size_t r = 0; r < labels.size(); ++r) {
      if (dtype == MEMOPT_I32) {
        int32_t label = static_cast<int32_t>(labels[r]);
        std::memcpy(bytes.data() + 4 * r, &label, 4);
      } else {
        std::memcpy(bytes.data() + 8 * r, &labels[r], 8);
      }
    }
    return bytes;
  }

  /// A scratch of exactly memopt_linear_cross_entropy_scratch_bytes, with a
  /// guard band after it that the kernels must leave alone.
  void *guardedScratch(const LinearCall &c, uint64_t &bytes) {
    bytes = memopt_linear_cross_entropy_scratch_bytes(
        c.dtype, c.wF32 ? MEMOPT_F32 : c.dtype, c.rows, c.dim, c.chunk, 1);
    std::vector<uint8_t> block(bytes + kGuard, 0xA5);
    scratchBase = upload(block);
    return scratchBase;
  }
  void expectGuardIntact(uint64_t bytes) {
    std::vector<uint8_t> guard = download<uint8_t>(scratchBase + bytes, kGuard);
    EXPECT_EQ(guard, std::vector<uint8_t>(kGuard, 0xA5)) << "scratch overrun";
  }

  /// Random inputs (row 4 of x 30 times larger, so that its logits move the
  /// online maximum from chunk to chunk; rows 2 and 7 ignored; rows 0 and 1
  /// pick the first and last class), the forward and the gradient.
  LinearRun runLinear(const LinearCall &c,
                      std::vector<int64_t> *labels = nullptr) {
    LinearRun run;
    run.x = random(c.rows * c.dim);
    run.w = random(c.classes * c.dim);
    run.bias = random(c.bias ? c.classes : 0);
    for (int64_t x = 0; c.rows > 4 && x < c.dim; ++x)
      run.x[4 * c.dim + x] *= 30.0f;
    std::uniform_int_distribution<int64_t> pick(0, c.classes - 1);
    for (int64_t r = 0; r < c.rows; ++r)
      run.labels.push_back(c.allIgnored || r == 2 || r == 7 ? kIgnoreIndex
                           : r == 0                         ? 0
                           : r == 1                         ? c.classes - 1
                                                            : pick(rng));
    if (labels)
      run.labels = *labels;
    memopt_dtype wDtype = c.wF32 ? MEMOPT_F32 : c.dtype;
    std::vector<float> master = run.w;
    for (float &v : master)
      v *= 1.0f + 1.0f / 4096;
    void *x = uploadAs(c.dtype, run.x);
    void *w = c.wF32 ? uploadAs(MEMOPT_F32, master) : uploadAs(c.dtype, run.w);
    if (c.wF32) {
      // The products read the master weight rounded to dtype.
      run.w = master;
      storeAs(c.dtype, run.w);
    }
    void *bias = c.bias ? uploadAs(c.dtype, run.bias) : nullptr;
    void *dl = upload(labelBytes(c.labelDtype, run.labels));
    float *loss = static_cast<float *>(alloc(4));
    float *lse = static_cast<float *>(alloc(c.rows * 4 + 1));
    float *gradLoss = upload(std::vector<float>{0.75f});
    size_t size = memopt_dtype_size(c.dtype);
    void *gx = alloc(c.rows * c.dim * size + 1);
    void *gw = alloc(c.classes * c.dim * memopt_dtype_size(wDtype) + 1);
    void *gb = c.bias ? alloc(c.classes * size) : nullptr;
    uint64_t bytes = 0;
    void *scratch = guardedScratch(c, bytes);
    memopt_linear_cross_entropy(ctx, c.dtype, x, w, wDtype, bias, c.labelDtype,
                                dl, loss, lse, scratch, bytes, c.rows, c.dim,
                                c.classes, c.chunk, kIgnoreIndex, c.reduction);
    memopt_linear_cross_entropy_grad(ctx, c.dtype, x, w, wDtype, bias,
                                     c.labelDtype, dl, lse, gradLoss, gx, gw,
                                     gb, scratch, bytes, c.rows, c.dim,
                                     c.classes, c.chunk, kIgnoreIndex,
                                     c.reduction);
    run.loss = download<float>(loss, 1)[0];
    run.lse = download<float>(lse, c.rows);
    run.gradX = downloadAs(ctx, c.dtype, gx, c.rows * c.dim);
    run.gradW = downloadAs(ctx, wDtype, gw, c.classes * c.dim);
    if (c.bias)
      run.gradBias = downloadAs(ctx, c.dtype, gb, c.classes);
    expectGuardIntact(bytes);
    return run;
  }

  void checkLinear(const LinearCall &c) {
    SCOPED_TRACE(c.name);
    used = 0;
    LinearRun run = runLinear(c);
    ASSERT_EQ(memopt_get_status(ctx), MEMOPT_OK)
        << memopt_get_error_message(ctx);
    LinearReference ref = referenceLinear(c, run, 0.75);
    expectNearReference({run.loss}, ref.loss, MEMOPT_F32, sumError(c.rows),
                        false, "loss");
    expectNearReference(run.lse, ref.lse, MEMOPT_F32, sumError(c.classes),
                        false, "lse");
    // 16-bit gradients come from dlogits rounded to the dtype.
    expectNearReference(run.gradX, ref.gradX, c.dtype, sumError(c.classes),
                        true, "grad_x");
    expectNearReference(run.gradW, ref.gradW, c.dtype, sumError(c.rows), true,
                        "grad_w");
    expectNearReference(run.gradBias, ref.gradBias, c.dtype, sumError(c.rows),
                        true, "grad_bias");
  }

  static constexpr uint64_t kGuard = 512;
  uint8_t *scratchBase = nullptr;
};

TEST_F(CudaLinearLossTest, MatchesReference) {
  checkLinear({"chunk 64 of 203, bias, mean", 37, 50, 203, 64});
  LinearCall sum{
      "one chunk, no bias, sum, i32", 20,         33,        150, 150, false,
      MEMOPT_REDUCTION_SUM,           MEMOPT_F32, MEMOPT_I32};
  checkLinear(sum);
  checkLinear({"chunk 1", 9, 16, 7, 1});
  checkLinear({"bf16, chunk 50", 37, 64, 203, 50, true, MEMOPT_REDUCTION_MEAN,
               MEMOPT_BF16});
  checkLinear({"f16, chunk 64, sum", 33, 40, 130, 64, true,
               MEMOPT_REDUCTION_SUM, MEMOPT_F16});
  LinearCall master{"bf16, f32 master weight, chunk 50", 37, 64, 203, 50, true,
                    MEMOPT_REDUCTION_MEAN, MEMOPT_BF16};
  master.wF32 = true;
  checkLinear(master);
}

TEST_F(CudaLinearLossTest, EveryRowIgnored) {
  LinearCall c{"all ignored", 10, 16, 40, 16};
  c.allIgnored = true;
  c.dtype = MEMOPT_BF16;
  LinearRun run = runLinear(c);
  EXPECT_TRUE(std::isnan(run.loss));
  EXPECT_EQ(run.gradX, std::vector<float>(run.gradX.size(), 0.0f));
  EXPECT_EQ(run.gradW, std::vector<float>(run.gradW.size(), 0.0f));
  EXPECT_EQ(run.gradBias, std::vector<float>(run.gradBias.size(), 0.0f));
}

TEST_F(CudaLinearLossTest, GradientIsDeterministic) {
  for (memopt_dtype dtype : {MEMOPT_F32, MEMOPT_BF16}) {
    LinearCall c{"determinism",         64,   96, 1000, 300, true,
                 MEMOPT_REDUCTION_MEAN, dtype};
    used = 0;
    std::mt19937 saved = rng;
    LinearRun first = runLinear(c);
    rng = saved;
    LinearRun second = runLinear(c);
    EXPECT_EQ(first.loss, second.loss);
    EXPECT_EQ(first.gradX, second.gradX);
    EXPECT_EQ(first.gradW, second.gradW);
    EXPECT_EQ(first.gradBias, second.gradBias);
  }
}

TEST_F(CudaLinearLossTest, LabelOutOfRangeIsReported) {
  LinearCall c{"label out of range", 6, 8, 20, 8};
  std::vector<int64_t> labels = {1, 2, 3, 250, 4, kIgnoreIndex};
  runLinear(c, &labels);
  EXPECT_EQ(memopt_get_status(ctx), MEMOPT_ERROR_INDEX_OUT_OF_RANGE);
  EXPECT_NE(std::string(memopt_get_error_message(ctx))
                .find("label 250 of row 3 out of range [0, 20)"),
            std::string::npos)
      << memopt_get_error_message(ctx);
  memopt_clear_error(ctx);
}

} // namespace
