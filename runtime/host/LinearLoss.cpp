//===- LinearLoss.cpp - host fused linear cross-entropy -------------------===//
//
// memopt_linear_cross_entropy and its gradient: the cross-entropy of
// logits = x w^T + bias without the [rows, classes] logits matrix, `chunk`
// classes at a time (the chunked cross-entropy of Liger-Kernel and of
// Wijmans et al., "Cut Your Losses in Large-Vocabulary Language Models",
// 2024).
//
// Forward, per chunk: one f32 GEMM writes the chunk's logits [rows, chunk]
// into the scratch, and each row's online log-sum-exp (running maximum in
// f32, sum of exponentials in double) and its label's logit are updated. The
// loss is then memopt_cross_entropy's: lse - logit[label] per row, summed in
// double in row order, over the rows not ignored under MEAN.
//
// Backward, per chunk: the logits are recomputed and turned into dlogits =
// g (exp(logits - lse) - onehot(label)) in place. For a 16-bit dtype they
// are rounded through the scratch's 16-bit chunk: the operand an unfused
// 16-bit matmul backward reads. grad_w's rows of the chunk (dlogits^T x) and
// grad_bias's entries (column sums in double) are complete at once and
// rounded once; grad_x += dlogits w_c accumulates in f32 (in grad_x itself
// for f32, else in the scratch) and is rounded at the end.
//
// An f32 w under a 16-bit dtype (a mixed-precision master weight) is rounded
// to dtype a chunk at a time, through the scratch's 16-bit weight chunk, so
// the products read what a 16-bit copy of w would hold; grad_w is then f32,
// the GEMM's result unrounded.
//
// memopt_nf4_linear_cross_entropy and its gradient read an NF4-packed w
// (a frozen LM head): each chunk's rows are dequantized, rounded to dtype,
// into the scratch's f32 weight chunk, and w has no gradient.
//
// Work: the GEMMs of the unfused op (two forward, three backward, the
// logits recomputed); memory: [rows, chunk] of logits instead of [rows,
// classes], plus the f32 staging of 16-bit x and of one chunk of w.
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"
#include "HostRuntime.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <vector>

using namespace memopt::host;

namespace {

/// The host-only limit of sgemm's int extents.
bool checkBlasRange(memopt_context *ctx, const char *entry, int64_t rows,
                    int64_t dim, int64_t chunk) {
  if (rows <= INT_MAX && dim <= INT_MAX && chunk <= INT_MAX)
    return true;
  setError(ctx, MEMOPT_ERROR_INVALID_ARGUMENT, entry,
           "extents exceed the BLAS int range");
  return false;
}

/// The parts of the scratch (runtime.h's
/// memopt_linear_cross_entropy_scratch_bytes), each at a multiple of 256
/// bytes: the f32 logits of a chunk; for the 16-bit gradient the chunk in
/// `dtype` and the f32 accumulator of grad_x; for an f32 w under a 16-bit
/// dtype, one chunk of w rounded to dtype; for an NF4 w, one chunk of w
/// dequantized in f32 (memopt_nf4_linear_cross_entropy_scratch_bytes).
class Scratch {
public:
  Scratch(void *scratch, memopt_dtype dtype, int64_t rows, int64_t dim,
          int64_t chunk, int grad)
      : base(static_cast<char *>(scratch)), rows(rows), dim(dim),
        chunk(chunk), gradParts(grad && dtype != MEMOPT_F32) {}

  float *logits() const { return reinterpret_cast<float *>(base); }
  void *chunk16() const { return base + roundUp(rows * chunk * 4); }
  float *gradX() const {
    return reinterpret_cast<float *>(base + roundUp(rows * chunk * 4) +
                                     roundUp(rows * chunk * 2));
  }
  void *weightChunk() const {
    uint64_t offset = roundUp(rows * chunk * 4);
    if (gradParts)
      offset += roundUp(rows * chunk * 2) + roundUp(rows * dim * 4);
    return base + offset;
  }

private:
  static uint64_t roundUp(int64_t bytes) {
    return (static_cast<uint64_t>(bytes) + 255) / 256 * 256;
  }
  char *base;
  int64_t rows, dim, chunk;
  bool gradParts;
};

/// The weight [classes, dim]: stored in `dtype` (a float dtype), or NF4
/// packed (`nf4`).
struct Weight {
  const void *data;
  memopt_dtype dtype;
  bool nf4;
  int64_t classes;
};

/// The inputs of both entries in f32: x whole, w and bias a chunk at a time
/// (views of the tensors when they are f32 and so is dtype).
class LinearInputs {
public:
  LinearInputs(memopt_context *ctx, memopt_dtype dtype, const void *x,
               const Weight &weight, const void *bias, const Scratch &scratch,
               int64_t rows, int64_t dim, int64_t chunk)
      : dtype(dtype), weight(weight), bias(bias),
        rounded(scratch.weightChunk()), rows(rows), dim(dim),
        x(ctx, dtype, x, rows * dim),
        stage(ctx, dtype == MEMOPT_F32 || weight.nf4 ? 0 : chunk * dim),
        biasStage(ctx, bias ? chunk : 0) {}

  /// x [rows, dim].
  const float *rowsF32() const { return x.get(); }

  /// Rows [first, first + count) of w as dtype holds them; for a 16-bit
  /// dtype they live in the staging buffer, dequantized NF4 rows in the
  /// scratch's weight chunk.
  const float *weightChunk(int64_t first, int64_t count) {
    if (weight.nf4) {
      auto *rows = static_cast<float *>(rounded);
      nf4DequantizeColumns(dtype, static_cast<const uint8_t *>(weight.data),
                           weight.classes, dim, /*transB=*/true, first, count,
                           rows);
      return rows;
    }
    memopt_dtype wDtype = weight.dtype;
    if (dtype == MEMOPT_F32)
      return static_cast<const float *>(weight.data) + first * dim;
    const char *source = static_cast<const char *>(weight.data) +
                         first * dim * dtypeSize(wDtype);
    if (wDtype == MEMOPT_F32) {
      // Round the master weight's rows through dtype.
      storeF32(dtype, reinterpret_cast<const float *>(source), rounded,
               count * dim);
      source = static_cast<const char *>(rounded);
    }
    loadF32(dtype, source, stage.get(), count * dim);
    return stage.get();
  }

  /// The staging buffer of 16-bit w rows (chunk * dim floats).
  float *stagingBuffer() { return stage.get(); }

  /// logits [rows, count] = x wChunk^T + bias[first .. first + count).
  void logits(int64_t first, int64_t count, const float *wChunk, float *out) {
    sgemm(false, true, rows, count, dim, 1.0f, x.get(), dim, wChunk, dim, 0.0f,
          out, count);
    if (!bias)
      return;
    loadF32(dtype, static_cast<const char *>(bias) + first * dtypeSize(dtype),
            biasStage.get(), count);
    const float *b = biasStage.get();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < count; ++c)
        out[r * count + c] += b[c];
  }

private:
  memopt_dtype dtype;
  Weight weight;
  const void *bias;
  void *rounded;
  int64_t rows, dim;
  F32Input x;
  Workspace stage, biasStage;
};

/// Turns a chunk's logits [rows, count] (classes first ..) into dlogits =
/// g (exp(logits - lse) - onehot(label)) in place, zero for ignored rows;
/// p is computed as memopt_cross_entropy_grad does.
void logitsToGradients(memopt_dtype labelDtype, const void *labels,
                       int64_t ignoreIndex, const float *lse, float g,
                       int64_t rows, int64_t first, int64_t count,
                       float *logits) {
  for (int64_t r = 0; r < rows; ++r) {
    int64_t label = loadIndex(labelDtype, labels, r);
    float *row = logits + r * count;
    if (label == ignoreIndex) {
      std::fill(row, row + count, 0.0f);
      continue;
    }
    for (int64_t c = 0; c < count; ++c) {
      float p =
          static_cast<float>(std::exp(static_cast<double>(row[c]) - lse[r]));
      row[c] = g * (p - (first + c == label ? 1.0f : 0.0f));
    }
  }
}

/// Rounds the column sums of dlogits [rows, count] (in double, row order)
/// into grad_bias[first .. first + count); `sums` holds count doubles.
void storeColumnSums(memopt_dtype dtype, const float *dlogits, int64_t rows,
                     int64_t first, int64_t count, double *sums,
                     void *gradBias) {
  std::fill(sums, sums + count, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < count; ++c)
      sums[c] += dlogits[r * count + c];
  std::vector<float> rounded(sums, sums + count);
  storeF32(dtype, rounded.data(),
           static_cast<char *>(gradBias) + first * dtypeSize(dtype), count);
}

/// The forward of both entries, their arguments checked.
void linearLoss(memopt_context *ctx, const char *entry, memopt_dtype dtype,
                const void *x, const Weight &w, const void *bias,
                memopt_dtype label_dtype, const void *labels, float *loss,
                float *lse, void *scratch, int64_t rows, int64_t dim,
                int64_t chunk, int64_t ignore_index,
                memopt_loss_reduction reduction) {
  int64_t classes = w.classes;
  if (!checkBlasRange(ctx, entry, rows, dim, chunk))
    return;
  int64_t count =
      countLabels(ctx, entry, label_dtype, labels, rows, classes, ignore_index);
  if (count < 0)
    return;
  Scratch parts(scratch, dtype, rows, dim, chunk, 0);
  LinearInputs in(ctx, dtype, x, w, bias, parts, rows, dim, chunk);
  std::vector<float> rowMax(static_cast<size_t>(rows), -INFINITY);
  std::vector<double> rowSum(static_cast<size_t>(rows), 0.0);
  std::vector<float> picked(static_cast<size_t>(rows), 0.0f);
  for (int64_t c0 = 0; c0 < classes && rows > 0; c0 += chunk) {
    int64_t cur = std::min(chunk, classes - c0);
    float *logits = parts.logits();
    in.logits(c0, cur, in.weightChunk(c0, cur), logits);
    for (int64_t r = 0; r < rows; ++r) {
      const float *row = logits + r * cur;
      float newMax = rowMax[r];
      for (int64_t c = 0; c < cur; ++c)
        newMax = std::fmax(newMax, row[c]);
      int64_t label = loadIndex(label_dtype, labels, r);
      if (label >= c0 && label < c0 + cur)
        picked[r] = row[label - c0];
      // A chunk of only -inf logits adds nothing yet.
      if (newMax == -INFINITY)
        continue;
      double sum = rowSum[r] * std::exp(static_cast<double>(rowMax[r]) -
                                        static_cast<double>(newMax));
      for (int64_t c = 0; c < cur; ++c)
        sum += std::exp(static_cast<double>(row[c]) - newMax);
      rowSum[r] = sum;
      rowMax[r] = newMax;
    }
  }
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    double rowLse = rowMax[r] + std::log(rowSum[r]);
    lse[r] = static_cast<float>(rowLse);
    if (loadIndex(label_dtype, labels, r) != ignore_index)
      total += rowLse - picked[r];
  }
  if (reduction == MEMOPT_REDUCTION_MEAN)
    total = count ? total / static_cast<double>(count)
                  : std::numeric_limits<double>::quiet_NaN();
  *loss = static_cast<float>(total);
}

/// The gradient of both entries, their arguments checked; grad_w is NULL
/// for an NF4 w.
void linearLossGrad(memopt_context *ctx, const char *entry, memopt_dtype dtype,
                    const void *x, const Weight &w, const void *bias,
                    memopt_dtype label_dtype, const void *labels,
                    const float *lse, const float *grad_loss, void *grad_x,
                    void *grad_w, void *grad_bias, void *scratch, int64_t rows,
                    int64_t dim, int64_t chunk, int64_t ignore_index,
                    memopt_loss_reduction reduction) {
  int64_t classes = w.classes;
  memopt_dtype w_dtype = w.dtype;
  if (!checkBlasRange(ctx, entry, rows, dim, chunk))
    return;
  int64_t count =
      countLabels(ctx, entry, label_dtype, labels, rows, classes, ignore_index);
  if (count < 0)
    return;
  double gradScale = *grad_loss;
  if (reduction == MEMOPT_REDUCTION_MEAN)
    gradScale = count ? gradScale / static_cast<double>(count) : 0.0;
  float g = static_cast<float>(gradScale);
  if (rows == 0) {
    // dlogits is empty, so grad_w and grad_bias are zero. The checks allow
    // null buffers without rows: only the ones given are written.
    std::vector<float> zeros(
        static_cast<size_t>(classes * std::max<int64_t>(dim, 1)), 0.0f);
    if (grad_w)
      storeF32(w_dtype, zeros.data(), grad_w, classes * dim);
    if (grad_bias)
      storeF32(dtype, zeros.data(), grad_bias, classes);
    return;
  }
  Scratch parts(scratch, dtype, rows, dim, chunk, 1);
  LinearInputs in(ctx, dtype, x, w, bias, parts, rows, dim, chunk);
  bool f32 = dtype == MEMOPT_F32;
  float *gradX = f32 ? static_cast<float *>(grad_x) : parts.gradX();
  std::fill(gradX, gradX + rows * dim, 0.0f);
  std::vector<double> columnSums(static_cast<size_t>(grad_bias ? chunk : 0));
  size_t elementSize = dtypeSize(dtype);
  for (int64_t c0 = 0; c0 < classes; c0 += chunk) {
    int64_t cur = std::min(chunk, classes - c0);
    const float *wChunk = in.weightChunk(c0, cur);
    float *dlogits = parts.logits();
    in.logits(c0, cur, wChunk, dlogits);
    logitsToGradients(label_dtype, labels, ignore_index, lse, g, rows, c0, cur,
                      dlogits);
    if (!f32) {
      // The GEMMs read dlogits as rounded to dtype.
      storeF32(dtype, dlogits, parts.chunk16(), rows * cur);
      loadF32(dtype, parts.chunk16(), dlogits, rows * cur);
    }
    if (grad_bias)
      storeColumnSums(dtype, dlogits, rows, c0, cur, columnSums.data(),
                      grad_bias);
    sgemm(false, false, rows, dim, cur, 1.0f, dlogits, cur, wChunk, dim, 1.0f,
          gradX, dim);
    if (!grad_w)
      continue;
    // A 16-bit grad_w's chunk goes through the staging of w's, which grad_x
    // has finished reading.
    bool gradWF32 = w_dtype == MEMOPT_F32;
    float *gradW = gradWF32 ? static_cast<float *>(grad_w) + c0 * dim
                            : in.stagingBuffer();
    sgemm(true, false, cur, dim, rows, 1.0f, dlogits, cur, in.rowsF32(), dim,
          0.0f, gradW, dim);
    if (!gradWF32)
      storeF32(dtype, gradW,
               static_cast<char *>(grad_w) + c0 * dim * elementSize, cur * dim);
  }
  if (!f32)
    storeF32(dtype, gradX, grad_x, rows * dim);
}

} // namespace

void memopt_linear_cross_entropy(memopt_context *ctx, memopt_dtype dtype,
                                 const void *x, const void *w,
                                 memopt_dtype w_dtype, const void *bias,
                                 memopt_dtype label_dtype, const void *labels,
                                 float *loss, float *lse, void *scratch,
                                 uint64_t scratch_bytes, int64_t rows,
                                 int64_t dim, int64_t classes, int64_t chunk,
                                 int64_t ignore_index,
                                 memopt_loss_reduction reduction) {
  const char *entry = "memopt_linear_cross_entropy";
  if (checkLinearCrossEntropy(ctx, entry, dtype, w_dtype, label_dtype,
                              reduction, rows, dim, classes, chunk, scratch,
                              scratch_bytes, 0, loss, {x, w, labels, lse}))
    linearLoss(ctx, entry, dtype, x, Weight{w, w_dtype, false, classes}, bias,
               label_dtype, labels, loss, lse, scratch, rows, dim, chunk,
               ignore_index, reduction);
}

void memopt_linear_cross_entropy_grad(
    memopt_context *ctx, memopt_dtype dtype, const void *x, const void *w,
    memopt_dtype w_dtype, const void *bias, memopt_dtype label_dtype,
    const void *labels, const float *lse, const float *grad_loss, void *grad_x,
    void *grad_w, void *grad_bias, void *scratch, uint64_t scratch_bytes,
    int64_t rows, int64_t dim, int64_t classes, int64_t chunk,
    int64_t ignore_index, memopt_loss_reduction reduction) {
  const char *entry = "memopt_linear_cross_entropy_grad";
  if (checkLinearCrossEntropy(ctx, entry, dtype, w_dtype, label_dtype,
                              reduction, rows, dim, classes, chunk, scratch,
                              scratch_bytes, 1, grad_loss,
                              {x, w, labels, lse, grad_x, grad_w}))
    linearLossGrad(ctx, entry, dtype, x, Weight{w, w_dtype, false, classes},
                   bias, label_dtype, labels, lse, grad_loss, grad_x, grad_w,
                   grad_bias, scratch, rows, dim, chunk, ignore_index,
                   reduction);
}

void memopt_nf4_linear_cross_entropy(
    memopt_context *ctx, memopt_dtype dtype, const void *x, const void *w,
    const void *bias, memopt_dtype label_dtype, const void *labels,
    float *loss, float *lse, void *scratch, uint64_t scratch_bytes,
    int64_t rows, int64_t dim, int64_t classes, int64_t chunk,
    int64_t ignore_index, memopt_loss_reduction reduction) {
  const char *entry = "memopt_nf4_linear_cross_entropy";
  if (checkNf4LinearCrossEntropy(ctx, entry, dtype, label_dtype, reduction,
                                 rows, dim, classes, chunk, scratch,
                                 scratch_bytes, 0, loss, {x, w, labels, lse}))
    linearLoss(ctx, entry, dtype, x, Weight{w, dtype, true, classes}, bias,
               label_dtype, labels, loss, lse, scratch, rows, dim, chunk,
               ignore_index, reduction);
}

void memopt_nf4_linear_cross_entropy_grad(
    memopt_context *ctx, memopt_dtype dtype, const void *x, const void *w,
    const void *bias, memopt_dtype label_dtype, const void *labels,
    const float *lse, const float *grad_loss, void *grad_x, void *grad_bias,
    void *scratch, uint64_t scratch_bytes, int64_t rows, int64_t dim,
    int64_t classes, int64_t chunk, int64_t ignore_index,
    memopt_loss_reduction reduction) {
  const char *entry = "memopt_nf4_linear_cross_entropy_grad";
  if (checkNf4LinearCrossEntropy(ctx, entry, dtype, label_dtype, reduction,
                                 rows, dim, classes, chunk, scratch,
                                 scratch_bytes, 1, grad_loss,
                                 {x, w, labels, lse, grad_x}))
    linearLossGrad(ctx, entry, dtype, x, Weight{w, dtype, true, classes},
                   bias, label_dtype, labels, lse, grad_loss, grad_x,
                   /*grad_w=*/nullptr, grad_bias, scratch, rows, dim, chunk,
                   ignore_index, reduction);
}
