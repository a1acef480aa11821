//===- Loss.cpp - host loss kernels ---------------------------------------===//
//
// Softmax cross-entropy with ignore_index and label smoothing, and mean
// squared error, with their gradients. Losses are computed per element and
// summed in double in row order; the result is an f32 scalar. Under mean
// reduction a cross-entropy whose every row is ignored is NaN (0 / 0, as
// PyTorch) and its gradient is zero. Label smoothing eps mixes the one-hot
// target with the uniform one, (1 - eps) onehot + eps / classes, as
// F.cross_entropy(label_smoothing=eps). The formulas are LossMath.h's,
// shared with the CUDA kernels.
//
//===----------------------------------------------------------------------===//

#include "HostRuntime.h"
#include "Parallel.h"

#include "memopt/runtime/LossMath.h"

#include <cmath>
#include <vector>

using namespace memopt::host;
using namespace memopt::runtime;

int64_t memopt::host::countLabels(memopt_context *ctx, const char *entry,
                                  memopt_dtype labelDtype, const void *labels,
                                  int64_t rows, int64_t classes,
                                  int64_t ignoreIndex) {
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t label = loadIndex(labelDtype, labels, r);
    if (label == ignoreIndex)
      continue;
    if (label < 0 || label >= classes) {
      setError(ctx, MEMOPT_ERROR_INDEX_OUT_OF_RANGE, entry,
               "label %lld of row %lld out of range [0, %lld)",
               static_cast<long long>(label), static_cast<long long>(r),
               static_cast<long long>(classes));
      return -1;
    }
    ++count;
  }
  return count;
}

namespace {

/// log(sum(exp(row))) with the maximum subtracted first, in double.
double logSumExp(const float *row, int64_t classes) {
  float maxValue = -INFINITY;
  for (int64_t j = 0; j < classes; ++j)
    maxValue = std::fmax(maxValue, row[j]);
  double sum = 0.0;
  for (int64_t j = 0; j < classes; ++j)
    sum += logSumExpTerm<double>(row[j], maxValue);
  return logSumExpValue(maxValue, sum);
}

/// The cross-entropy of one row against the smoothed target: lse - (1 - eps)
/// row[label] - eps * mean(row), in double.
double rowLoss(const float *row, int64_t classes, int64_t label, double eps) {
  double lse = logSumExp(row, classes);
  double sum = 0.0;
  if (eps != 0.0)
    for (int64_t j = 0; j < classes; ++j)
      sum += row[j];
  return crossEntropyRowLoss(lse, row[label], sum, eps, classes);
}

} // namespace

void memopt_label_count(memopt_context *ctx, memopt_dtype label_dtype,
                        const void *labels, float *count, int64_t n,
                        int64_t ignore_index) {
  const char *entry = "memopt_label_count";
  if (!checkLabelCount(ctx, entry, label_dtype, labels, count, n))
    return;
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i)
    kept += loadIndex(label_dtype, labels, i) != ignore_index;
  *count = static_cast<float>(kept);
}

void memopt_cross_entropy(memopt_context *ctx, memopt_dtype dtype,
                          const void *logits, memopt_dtype label_dtype,
                          const void *labels, float *loss, int64_t rows,
                          int64_t classes, int64_t ignore_index,
                          memopt_loss_reduction reduction,
                          double label_smoothing) {
  const char *entry = "memopt_cross_entropy";
  if (!checkCrossEntropy(ctx, entry, dtype, label_dtype, reduction, rows,
                         classes, loss, {logits, labels}, label_smoothing))
    return;
  int64_t count =
      countLabels(ctx, entry, label_dtype, labels, rows, classes, ignore_index);
  if (count < 0)
    return;
  F32Input x(ctx, dtype, logits, rows * classes);
  // The rows' losses in parallel, their sum in row order.
  std::vector<double> rowLosses(static_cast<size_t>(rows), 0.0);
  parallelFor(rows, rowGrain(classes), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      int64_t label = loadIndex(label_dtype, labels, r);
      if (label != ignore_index)
        rowLosses[r] =
            rowLoss(x.get() + r * classes, classes, label, label_smoothing);
    }
  });
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r)
    if (loadIndex(label_dtype, labels, r) != ignore_index)
      total += rowLosses[r];
  *loss = static_cast<float>(reducedLoss(total, static_cast<double>(count),
                                         reduction == MEMOPT_REDUCTION_MEAN));
}

void memopt_cross_entropy_grad(memopt_context *ctx, memopt_dtype dtype,
                               const void *logits, memopt_dtype label_dtype,
                               const void *labels, const float *grad_loss,
                               void *out, int64_t rows, int64_t classes,
                               int64_t ignore_index,
                               memopt_loss_reduction reduction,
                               double label_smoothing) {
  const char *entry = "memopt_cross_entropy_grad";
  if (!checkCrossEntropy(ctx, entry, dtype, label_dtype, reduction, rows,
                         classes, grad_loss, {logits, labels, out},
                         label_smoothing))
    return;
  int64_t count =
      countLabels(ctx, entry, label_dtype, labels, rows, classes, ignore_index);
  if (count < 0)
    return;
  float s =
      crossEntropyGradScale(*grad_loss, reduction == MEMOPT_REDUCTION_MEAN,
                            static_cast<double>(count));
  SmoothedTarget target = smoothedTarget(label_smoothing, classes);
  F32Input x(ctx, dtype, logits, rows * classes);
  F32Output dx(ctx, dtype, out, rows * classes);
  parallelFor(rows, rowGrain(classes), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      int64_t label = loadIndex(label_dtype, labels, r);
      const float *row = x.get() + r * classes;
      float *drow = dx.get() + r * classes;
      if (label == ignore_index) {
        for (int64_t j = 0; j < classes; ++j)
          drow[j] = 0.0f;
        continue;
      }
      double lse = logSumExp(row, classes);
      for (int64_t j = 0; j < classes; ++j)
        drow[j] = crossEntropyGradValue(row[j], lse, j == label, s, target);
    }
  });
  dx.commit();
}

void memopt_mse_loss(memopt_context *ctx, memopt_dtype dtype, const void *input,
                     const void *target, float *loss, int64_t n,
                     memopt_loss_reduction reduction) {
  const char *entry = "memopt_mse_loss";
  if (!checkMseLoss(ctx, entry, dtype, reduction, n, loss, {input, target}))
    return;
  F32Input x(ctx, dtype, input, n);
  F32Input t(ctx, dtype, target, n);
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i)
    total += squaredErrorTerm<double>(x[i], t[i]);
  *loss = static_cast<float>(reducedLoss(total, static_cast<double>(n),
                                         reduction == MEMOPT_REDUCTION_MEAN));
}

void memopt_mse_loss_grad(memopt_context *ctx, memopt_dtype dtype,
                          const void *input, const void *target,
                          const float *grad_loss, void *out, int64_t n,
                          memopt_loss_reduction reduction) {
  const char *entry = "memopt_mse_loss_grad";
  if (!checkMseLoss(ctx, entry, dtype, reduction, n, grad_loss,
                    {input, target, out}))
    return;
  float s = mseGradScale(*grad_loss, reduction == MEMOPT_REDUCTION_MEAN, n);
  F32Input x(ctx, dtype, input, n);
  F32Input t(ctx, dtype, target, n);
  F32Output dx(ctx, dtype, out, n);
  parallelFor(n, kElementGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      dx[i] = mseGradValue(s, x[i], t[i]);
  });
  dx.commit();
}
