//===- Loss.cpp - host loss kernels ---------------------------------------===//
//
// Softmax cross-entropy with ignore_index and label smoothing, and mean
// squared error, with their gradients. Losses are computed per element and
// summed in double in row order; the result is an f32 scalar. Under mean
// reduction a cross-entropy whose every row is ignored is NaN (0 / 0, as
// PyTorch) and its gradient is zero. Label smoothing eps mixes the one-hot
// target with the uniform one, (1 - eps) onehot + eps / classes, as
// F.cross_entropy(label_smoothing=eps).
//
//===----------------------------------------------------------------------===//

#include "HostRuntime.h"
#include "Parallel.h"

#include <cmath>
#include <limits>
#include <vector>

using namespace memopt::host;

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
    sum += std::exp(static_cast<double>(row[j]) - maxValue);
  return maxValue + std::log(sum);
}

/// The cross-entropy of one row against the smoothed target: lse - (1 - eps)
/// row[label] - eps * mean(row), in double.
double rowLoss(const float *row, int64_t classes, int64_t label, double eps) {
  double lse = logSumExp(row, classes);
  if (eps == 0.0)
    return lse - row[label];
  double sum = 0.0;
  for (int64_t j = 0; j < classes; ++j)
    sum += row[j];
  return lse - (1.0 - eps) * row[label] - eps * sum / classes;
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
  if (reduction == MEMOPT_REDUCTION_MEAN)
    total = count ? total / static_cast<double>(count)
                  : std::numeric_limits<double>::quiet_NaN();
  *loss = static_cast<float>(total);
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
  double scale = *grad_loss;
  if (reduction == MEMOPT_REDUCTION_MEAN)
    scale = count ? scale / static_cast<double>(count) : 0.0;
  float s = static_cast<float>(scale);
  // The smoothed target: `on` at the label, `off` elsewhere (1 and 0
  // without smoothing).
  double offTarget = classes ? label_smoothing / classes : 0.0;
  float off = static_cast<float>(offTarget);
  float on = static_cast<float>(1.0 - label_smoothing + offTarget);
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
      for (int64_t j = 0; j < classes; ++j) {
        float p =
            static_cast<float>(std::exp(static_cast<double>(row[j]) - lse));
        drow[j] = s * (p - (j == label ? on : off));
      }
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
  for (int64_t i = 0; i < n; ++i) {
    float d = x[i] - t[i];
    total += static_cast<double>(d) * d;
  }
  if (reduction == MEMOPT_REDUCTION_MEAN)
    total = n ? total / static_cast<double>(n)
              : std::numeric_limits<double>::quiet_NaN();
  *loss = static_cast<float>(total);
}

void memopt_mse_loss_grad(memopt_context *ctx, memopt_dtype dtype,
                          const void *input, const void *target,
                          const float *grad_loss, void *out, int64_t n,
                          memopt_loss_reduction reduction) {
  const char *entry = "memopt_mse_loss_grad";
  if (!checkMseLoss(ctx, entry, dtype, reduction, n, grad_loss,
                    {input, target, out}))
    return;
  double scale = 2.0 * *grad_loss;
  if (reduction == MEMOPT_REDUCTION_MEAN && n)
    scale /= static_cast<double>(n);
  float s = static_cast<float>(scale);
  F32Input x(ctx, dtype, input, n);
  F32Input t(ctx, dtype, target, n);
  F32Output dx(ctx, dtype, out, n);
  parallelFor(n, kElementGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      dx[i] = s * (x[i] - t[i]);
  });
  dx.commit();
}
