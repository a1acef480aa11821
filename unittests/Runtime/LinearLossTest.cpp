//===- LinearLossTest.cpp - fused linear cross-entropy tests --------------===//
//
// memopt_linear_cross_entropy and its gradient against the unfused ops: the
// logits x w^T + bias in double rounded to f32, memopt_cross_entropy and
// memopt_cross_entropy_grad on them, and the products of the gradient in
// double. Chunks of one class, of a size that does not divide the classes
// and of all classes; with and without bias; ignored rows; both reductions;
// i32 and i64 labels; f16/bf16 storage; every row ignored; a scratch that is
// one byte short and writes past the scratch; a label out of range.
//
// Tolerances follow from f32 rounding (u = 2^-24, square-root growth over
// reductions): a logit of dim products is off by about sqrt(dim) u
// sum|x w| in either computation, which moves lse and the picked logit by
// as much, and each probability relatively by twice that. The gradients
// are then off by that relative error times the sum of their terms'
// magnitudes, plus the f32 accumulation of the products; a 16-bit dtype adds
// the rounding of dlogits (the GEMM operand) and of each result, half a unit
// relative. A factor of 4 covers the constants the estimate drops.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestUtil.h"

#include <algorithm>
#include <cstring>
#include <string>

using namespace memopt::test;

namespace {

constexpr double kF32Unit = 1.0 / (1 << 24);
constexpr int64_t kIgnore = -100;

/// Half a unit in the last place of `dtype`, relative (0 for f32).
double storageUnit(memopt_dtype dtype) {
  return dtype == MEMOPT_BF16  ? 1.0 / (1 << 8)
         : dtype == MEMOPT_F16 ? 1.0 / (1 << 11)
                               : 0.0;
}

/// The tolerance of `value` computed to within `f32Tolerance` and rounded
/// once into `dtype` (f16's subnormals are 2^-24 apart).
double storedTolerance(memopt_dtype dtype, double value, double f32Tolerance) {
  double unit = storageUnit(dtype);
  double floor = dtype == MEMOPT_F16 ? std::ldexp(1.0, -25) : 0.0;
  return f32Tolerance * (1 + unit) + unit * std::fabs(value) + floor;
}

struct LinearCase {
  std::string name;
  int64_t rows, dim, classes, chunk;
  bool bias = true;
  memopt_loss_reduction reduction = MEMOPT_REDUCTION_MEAN;
  memopt_dtype dtype = MEMOPT_F32;
  memopt_dtype labelDtype = MEMOPT_I64;
  /// w (and grad_w) in f32 under a 16-bit dtype: a master weight.
  bool wF32 = false;
};

/// Values representable in the case's dtype, and the labels.
struct LinearInputs {
  std::vector<float> x, w, bias;
  std::vector<int64_t> labels;
};

struct LinearResults {
  float loss = 0.0f;
  std::vector<float> lse, gradX, gradW, gradBias;
};

/// Random inputs; row 4 of x is 30 times larger, so that its logits span
/// about +-60 and each chunk moves the online maximum. Rows 2, 7 and 11 are
/// ignored; rows 0 and 1 pick the first and the last class.
LinearInputs makeInputs(memopt_context *ctx, std::mt19937 &rng,
                        const LinearCase &c) {
  LinearInputs in{randomVector(rng, c.rows * c.dim),
                  randomVector(rng, c.classes * c.dim),
                  randomVector(rng, c.bias ? c.classes : 0),
                  {}};
  if (c.rows > 4)
    for (int64_t k = 0; k < c.dim; ++k)
      in.x[4 * c.dim + k] *= 30.0f;
  in.x = representable(ctx, c.dtype, in.x);
  in.w = representable(ctx, c.dtype, in.w);
  in.bias = representable(ctx, c.dtype, in.bias);
  std::uniform_int_distribution<int64_t> label(0, c.classes - 1);
  for (int64_t r = 0; r < c.rows; ++r)
    in.labels.push_back(r == 2 || r == 7 || r == 11 ? kIgnore
                        : r == 0                    ? 0
                        : r == 1                    ? c.classes - 1
                                                    : label(rng));
  return in;
}

/// Labels as the case's label dtype, as bytes.
std::vector<uint8_t> labelStorage(const LinearCase &c,
                                  const std::vector<int64_t> &labels) {
  std::vector<uint8_t> bytes(labels.size() * memopt_dtype_size(c.labelDtype));
  for (size_t r = 0; r < labels.size(); ++r) {
    if (c.labelDtype == MEMOPT_I32) {
      int32_t label = static_cast<int32_t>(labels[r]);
      std::memcpy(bytes.data() + 4 * r, &label, 4);
    } else {
      std::memcpy(bytes.data() + 8 * r, &labels[r], 8);
    }
  }
  return bytes;
}

/// A scratch of exactly `bytes` followed by a guard band the kernels must
/// leave alone.
class GuardedScratch {
public:
  explicit GuardedScratch(uint64_t bytes)
      : bytes(bytes), block(bytes + kGuard, kPattern) {}
  void *data() { return block.data(); }
  uint64_t size() const { return bytes; }
  bool guardIntact() const {
    return std::all_of(block.begin() + bytes, block.end(),
                       [](uint8_t b) { return b == kPattern; });
  }

private:
  static constexpr size_t kGuard = 256;
  static constexpr uint8_t kPattern = 0xA5;
  uint64_t bytes;
  std::vector<uint8_t> block;
};

LinearResults runLinear(memopt_context *ctx, const LinearCase &c,
                        const LinearInputs &in, float gradLoss) {
  memopt_dtype t = c.dtype, wt = c.wF32 ? MEMOPT_F32 : t;
  std::vector<uint8_t> x = toStorage(ctx, t, in.x), w = toStorage(ctx, wt, in.w),
                       bias = toStorage(ctx, t, in.bias);
  const void *biasData = c.bias ? bias.data() : nullptr;
  std::vector<uint8_t> labels = labelStorage(c, in.labels);
  LinearResults r;
  r.lse.assign(c.rows, 0.0f);
  GuardedScratch forward(memopt_linear_cross_entropy_scratch_bytes(
      t, wt, c.rows, c.dim, c.chunk, 0));
  memopt_linear_cross_entropy(
      ctx, t, x.data(), w.data(), wt, biasData, c.labelDtype, labels.data(),
      &r.loss, r.lse.data(), forward.data(), forward.size(), c.rows, c.dim,
      c.classes, c.chunk, kIgnore, c.reduction);
  EXPECT_TRUE(forward.guardIntact()) << "forward wrote past its scratch";
  std::vector<uint8_t> gradX(x.size()), gradW(w.size()), gradBias(bias.size());
  GuardedScratch backward(memopt_linear_cross_entropy_scratch_bytes(
      t, wt, c.rows, c.dim, c.chunk, 1));
  memopt_linear_cross_entropy_grad(
      ctx, t, x.data(), w.data(), wt, biasData, c.labelDtype, labels.data(),
      r.lse.data(), &gradLoss, gradX.data(), gradW.data(),
      c.bias ? gradBias.data() : nullptr, backward.data(), backward.size(),
      c.rows, c.dim, c.classes, c.chunk, kIgnore, c.reduction);
  EXPECT_TRUE(backward.guardIntact()) << "gradient wrote past its scratch";
  r.gradX = fromStorage(ctx, t, gradX);
  r.gradW = fromStorage(ctx, wt, gradW);
  r.gradBias = fromStorage(ctx, t, gradBias);
  return r;
}

/// A value and its tolerance.
struct Expected {
  std::vector<double> value, tolerance;
  void resize(size_t n) {
    value.assign(n, 0.0);
    tolerance.assign(n, 0.0);
  }
};

struct LinearReference {
  Expected loss, lse, gradX, gradW, gradBias;
};

/// The unfused computation: f32 logits, memopt_cross_entropy(_grad), and
/// the gradient's products in double.
LinearReference referenceLinear(memopt_context *ctx, const LinearCase &c,
                                const LinearInputs &in, float gradLoss) {
  const double u = kF32Unit, unit16 = storageUnit(c.dtype);
  int64_t rows = c.rows, dim = c.dim, classes = c.classes;
  std::vector<double> logits(rows * classes);
  std::vector<float> logits32(rows * classes);
  std::vector<double> logitError(rows, 0.0);
  LinearReference ref;
  ref.lse.resize(rows);
  for (int64_t r = 0; r < rows; ++r) {
    double rowMax = -INFINITY;
    for (int64_t j = 0; j < classes; ++j) {
      double value = c.bias ? in.bias[j] : 0.0, mag = 0.0;
      for (int64_t k = 0; k < dim; ++k) {
        value += static_cast<double>(in.x[r * dim + k]) * in.w[j * dim + k];
        mag += std::fabs(static_cast<double>(in.x[r * dim + k]) *
                         in.w[j * dim + k]);
      }
      logits[r * classes + j] = value;
      logits32[r * classes + j] = static_cast<float>(value);
      rowMax = std::max(rowMax, value);
      // The kernel's GEMM and bias add, and this f32 rounding.
      double error =
          u * (std::sqrt(double(dim)) * mag +
               (c.bias ? std::fabs(in.bias[j]) : 0) + std::fabs(value));
      logitError[r] = std::max(logitError[r], error);
    }
    double sum = 0.0;
    for (int64_t j = 0; j < classes; ++j)
      sum += std::exp(logits[r * classes + j] - rowMax);
    double lse = rowMax + std::log(sum);
    ref.lse.value[r] = lse;
    ref.lse.tolerance[r] =
        4 * (logitError[r] + u * (std::sqrt(double(classes)) + std::fabs(lse)));
  }

  float loss = 0.0f;
  memopt_cross_entropy(ctx, MEMOPT_F32, logits32.data(), MEMOPT_I64,
                       in.labels.data(), &loss, rows, classes, kIgnore,
                       c.reduction, 0.0);
  std::vector<float> dlogits(rows * classes);
  memopt_cross_entropy_grad(ctx, MEMOPT_F32, logits32.data(), MEMOPT_I64,
                            in.labels.data(), &gradLoss, dlogits.data(), rows,
                            classes, kIgnore, c.reduction, 0.0);
  int64_t count = 0;
  double lossError = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    if (in.labels[r] == kIgnore)
      continue;
    ++count;
    lossError += 2 * logitError[r];
  }
  if (c.reduction == MEMOPT_REDUCTION_MEAN)
    lossError /= count;
  ref.loss.resize(1);
  ref.loss.value[0] = loss;
  ref.loss.tolerance[0] = 4 * (lossError + 2 * u * std::fabs(loss));

  // |dlogits error| <= g p (2 logitError + 4u) + the 16-bit operand's
  // rounding.
  double g = std::fabs(gradLoss) /
             (c.reduction == MEMOPT_REDUCTION_MEAN ? double(count) : 1.0);
  std::vector<double> dlError(rows * classes, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    if (in.labels[r] == kIgnore)
      continue;
    for (int64_t j = 0; j < classes; ++j) {
      double p = std::exp(logits[r * classes + j] - ref.lse.value[r]);
      dlError[r * classes + j] = g * p * (2 * logitError[r] + 4 * u) +
                                 unit16 * std::fabs(dlogits[r * classes + j]);
    }
  }
  auto set = [&](Expected &e, size_t at, double value, double errorMag,
                 double mag, double terms) {
    e.value[at] = value;
    e.tolerance[at] = storedTolerance(
        c.dtype, value, 4 * (errorMag + u * std::sqrt(terms) * mag));
  };
  ref.gradX.resize(rows * dim);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < dim; ++k) {
      double value = 0.0, errorMag = 0.0, mag = 0.0;
      for (int64_t j = 0; j < classes; ++j) {
        double wv = in.w[j * dim + k];
        value += dlogits[r * classes + j] * wv;
        errorMag += dlError[r * classes + j] * std::fabs(wv);
        mag += std::fabs(dlogits[r * classes + j] * wv);
      }
      set(ref.gradX, r * dim + k, value, errorMag, mag, classes);
    }
  ref.gradW.resize(classes * dim);
  ref.gradBias.resize(c.bias ? classes : 0);
  for (int64_t j = 0; j < classes; ++j) {
    for (int64_t k = 0; k < dim; ++k) {
      double value = 0.0, errorMag = 0.0, mag = 0.0;
      for (int64_t r = 0; r < rows; ++r) {
        double xv = in.x[r * dim + k];
        value += dlogits[r * classes + j] * xv;
        errorMag += dlError[r * classes + j] * std::fabs(xv);
        mag += std::fabs(dlogits[r * classes + j] * xv);
      }
      set(ref.gradW, j * dim + k, value, errorMag, mag, rows);
    }
    if (!c.bias)
      continue;
    double value = 0.0, errorMag = 0.0, mag = 0.0;
    for (int64_t r = 0; r < rows; ++r) {
      value += dlogits[r * classes + j];
      errorMag += dlError[r * classes + j];
      mag += std::fabs(dlogits[r * classes + j]);
    }
    set(ref.gradBias, j, value, errorMag, mag, rows);
  }
  return ref;
}

void expectWithin(const std::vector<float> &actual, const Expected &e,
                  const char *what) {
  ASSERT_EQ(actual.size(), e.value.size()) << what;
  int failures = 0;
  double worst = 0.0;
  for (size_t i = 0; i < actual.size(); ++i) {
    double error = std::fabs(actual[i] - e.value[i]);
    worst = std::max(worst, error / std::max(e.tolerance[i], 1e-300));
    if (!(error <= e.tolerance[i]) && failures++ < 5)
      ADD_FAILURE() << what << "[" << i << "] = " << actual[i] << ", expected "
                    << e.value[i] << " +- " << e.tolerance[i];
  }
  EXPECT_EQ(failures, 0) << what << ": worst error / tolerance " << worst;
}

void checkCase(memopt_context *ctx, std::mt19937 &rng, const LinearCase &c) {
  SCOPED_TRACE(c.name + ", chunk " + std::to_string(c.chunk) +
               (c.bias ? ", bias" : "") +
               (c.reduction == MEMOPT_REDUCTION_MEAN ? ", mean" : ", sum"));
  LinearInputs in = makeInputs(ctx, rng, c);
  const float gradLoss = 0.75f;
  LinearResults r = runLinear(ctx, c, in, gradLoss);
  ASSERT_EQ(memopt_get_status(ctx), MEMOPT_OK) << memopt_get_error_message(ctx);
  LinearReference ref = referenceLinear(ctx, c, in, gradLoss);
  expectWithin({r.loss}, ref.loss, "loss");
  expectWithin(r.lse, ref.lse, "lse");
  expectWithin(r.gradX, ref.gradX, "grad_x");
  expectWithin(r.gradW, ref.gradW, "grad_w");
  expectWithin(r.gradBias, ref.gradBias, "grad_bias");
}

TEST_F(RuntimeTest, LinearCrossEntropyMatchesUnfused) {
  const int64_t classes = 23;
  for (int64_t chunk : {int64_t(1), int64_t(5), classes})
    for (bool bias : {true, false})
      for (memopt_loss_reduction reduction :
           {MEMOPT_REDUCTION_MEAN, MEMOPT_REDUCTION_SUM}) {
        LinearCase c{"f32", 13, 37, classes, chunk, bias, reduction};
        checkCase(ctx, rng, c);
      }
  LinearCase i32{"i32 labels", 13, 37, classes, 4};
  i32.labelDtype = MEMOPT_I32;
  checkCase(ctx, rng, i32);
}

TEST_F(RuntimeTest, LinearCrossEntropyLowPrecision) {
  for (memopt_dtype dtype : {MEMOPT_BF16, MEMOPT_F16})
    for (memopt_loss_reduction reduction :
         {MEMOPT_REDUCTION_MEAN, MEMOPT_REDUCTION_SUM}) {
      LinearCase c{dtype == MEMOPT_BF16 ? "bf16" : "f16",
                   12,
                   40,
                   30,
                   7,
                   true,
                   reduction,
                   dtype};
      checkCase(ctx, rng, c);
    }
}

// An f32 master weight under a 16-bit dtype computes what its 16-bit copy
// does, bit for bit (each chunk is rounded as it is used); its f32 gradient
// is the GEMM's result before rounding: rounded, the 16-bit gradient.
TEST_F(RuntimeTest, LinearCrossEntropyF32MasterWeight) {
  for (memopt_dtype dtype : {MEMOPT_BF16, MEMOPT_F16}) {
    LinearCase c{"16-bit", 12, 40, 30, 7, true, MEMOPT_REDUCTION_MEAN, dtype};
    LinearInputs in = makeInputs(ctx, rng, c);
    // The master weight holds bits the 16-bit copy drops.
    LinearInputs master = in;
    for (float &v : master.w)
      v *= 1.0f + 1.0f / 4096;
    LinearInputs copy = master;
    copy.w = fromStorage(ctx, dtype, toStorage(ctx, dtype, master.w));
    ASSERT_NE(copy.w, master.w);
    LinearResults rounded = runLinear(ctx, c, copy, 0.75f);
    c.wF32 = true;
    LinearResults wide = runLinear(ctx, c, master, 0.75f);
    ASSERT_EQ(memopt_get_status(ctx), MEMOPT_OK)
        << memopt_get_error_message(ctx);
    EXPECT_EQ(fromStorage(ctx, dtype, toStorage(ctx, dtype, wide.gradW)),
              rounded.gradW);
    EXPECT_NE(wide.gradW, rounded.gradW) << "the f32 result was rounded";
    EXPECT_EQ(wide.gradX, rounded.gradX);
    EXPECT_EQ(wide.gradBias, rounded.gradBias);
    EXPECT_EQ(wide.loss, rounded.loss);
  }
}

TEST_F(RuntimeTest, LinearCrossEntropyAllRowsIgnored) {
  LinearCase c{"all ignored", 3, 4, 6, 4};
  LinearInputs in = makeInputs(ctx, rng, c);
  in.labels.assign(c.rows, kIgnore);
  // MEAN over no rows is NaN (as PyTorch) with a zero gradient.
  LinearResults mean = runLinear(ctx, c, in, 1.0f);
  EXPECT_TRUE(std::isnan(mean.loss));
  EXPECT_EQ(mean.gradX, std::vector<float>(mean.gradX.size(), 0.0f));
  EXPECT_EQ(mean.gradW, std::vector<float>(mean.gradW.size(), 0.0f));
  EXPECT_EQ(mean.gradBias, std::vector<float>(mean.gradBias.size(), 0.0f));
  c.reduction = MEMOPT_REDUCTION_SUM;
  EXPECT_EQ(runLinear(ctx, c, in, 1.0f).loss, 0.0f);
}

TEST_F(RuntimeTest, LinearCrossEntropyScratchTooSmall) {
  expectError = true;
  const int64_t rows = 3, dim = 5, classes = 10, chunk = 4;
  std::vector<float> x(rows * dim), w(classes * dim), lse(rows);
  std::vector<int64_t> labels(rows, 1);
  float loss = 0.0f, grad = 1.0f;
  uint64_t needed = memopt_linear_cross_entropy_scratch_bytes(
      MEMOPT_F32, MEMOPT_F32, rows, dim, chunk, 0);
  EXPECT_EQ(needed, 256u);
  std::vector<uint8_t> scratch(4096);
  memopt_linear_cross_entropy(ctx, MEMOPT_F32, x.data(), w.data(), MEMOPT_F32,
                              nullptr, MEMOPT_I64, labels.data(), &loss, lse.data(),
                              scratch.data(), needed - 1, rows, dim, classes,
                              chunk, kIgnore, MEMOPT_REDUCTION_MEAN);
  EXPECT_EQ(memopt_get_status(ctx), MEMOPT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(memopt_get_error_message(ctx),
               "memopt_linear_cross_entropy: scratch of 255 bytes, 256 needed");
  memopt_clear_error(ctx);

  // The 16-bit gradient also needs the chunk in bf16 and grad_x in f32:
  // 256 + 256 + 256 bytes here; the forward's 256 are not enough.
  needed = memopt_linear_cross_entropy_scratch_bytes(MEMOPT_BF16, MEMOPT_BF16,
                                                     rows, dim, chunk, 1);
  EXPECT_EQ(needed, 768u);
  memopt_linear_cross_entropy_grad(
      ctx, MEMOPT_BF16, x.data(), w.data(), MEMOPT_BF16, nullptr, MEMOPT_I64,
      labels.data(), lse.data(), &grad, x.data(), w.data(), nullptr,
      scratch.data(), 256, rows, dim, classes, chunk, kIgnore,
      MEMOPT_REDUCTION_MEAN);
  EXPECT_STREQ(
      memopt_get_error_message(ctx),
      "memopt_linear_cross_entropy_grad: scratch of 256 bytes, 768 needed");
  memopt_clear_error(ctx);

  // An f32 master weight under bf16 adds one chunk of it rounded to bf16:
  // 4 x 5 x 2 bytes, one more part of 256.
  EXPECT_EQ(memopt_linear_cross_entropy_scratch_bytes(MEMOPT_BF16, MEMOPT_F32,
                                                      rows, dim, chunk, 1),
            1024u);
  EXPECT_EQ(memopt_linear_cross_entropy_scratch_bytes(MEMOPT_BF16, MEMOPT_F32,
                                                      rows, dim, chunk, 0),
            512u);

  // A null scratch counts as none.
  memopt_linear_cross_entropy(ctx, MEMOPT_F32, x.data(), w.data(), MEMOPT_F32,
                              nullptr,
                              MEMOPT_I64, labels.data(), &loss, lse.data(),
                              nullptr, 4096, rows, dim, classes, chunk, kIgnore,
                              MEMOPT_REDUCTION_MEAN);
  EXPECT_STREQ(memopt_get_error_message(ctx),
               "memopt_linear_cross_entropy: scratch of 0 bytes, 256 needed");
}

TEST_F(RuntimeTest, LinearCrossEntropyLabelOutOfRange) {
  expectError = true;
  const int64_t rows = 3, dim = 2, classes = 4;
  std::vector<float> x(rows * dim), w(classes * dim), lse(rows);
  std::vector<int32_t> labels = {0, kIgnore, 4};
  float loss = 0.0f;
  std::vector<uint8_t> scratch(4096);
  memopt_linear_cross_entropy(ctx, MEMOPT_F32, x.data(), w.data(), MEMOPT_F32,
                              nullptr,
                              MEMOPT_I32, labels.data(), &loss, lse.data(),
                              scratch.data(), scratch.size(), rows, dim,
                              classes, 2, kIgnore, MEMOPT_REDUCTION_SUM);
  EXPECT_EQ(memopt_get_status(ctx), MEMOPT_ERROR_INDEX_OUT_OF_RANGE);
  // memopt_cross_entropy's message, under the fused entry's name.
  EXPECT_STREQ(memopt_get_error_message(ctx),
               "memopt_linear_cross_entropy: label 4 of row 2 out of range "
               "[0, 4)");
}

} // namespace
