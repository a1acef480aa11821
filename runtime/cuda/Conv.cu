//===- Conv.cu - convolutions through cuDNN -------------------------------===//
//
// memopt_conv2d, memopt_conv2d_grad_input and memopt_conv2d_grad_filter are
// cudnnConvolutionForward, cudnnConvolutionBackwardData and
// cudnnConvolutionBackwardFilter (cuDNN's legacy convolution API) on NCHW
// tensors, with the group count, strides, padding and dilation set on the
// convolution descriptor and beta = 0, so each entry overwrites its result.
//
// A plan per entry and shape (ConvPlan.h has its key and descriptor
// arguments) owns the descriptors and the algorithm, chosen once from
// cuDNN's heuristic: the first deterministic one whose workspace fits the
// library slice. A steady-state step only runs the convolutions.
//
// Numerics: f32 data computes in f32 with FMA math (no TF32 unless
// MEMOPT_CUDA_ALLOW_TF32=1, the switch the GEMMs read); f16 and bf16 data
// compute in f32 (the descriptor's compute type) and may use tensor cores.
// The library may clobber its workspace slice, never the scratch slice.
//
//===----------------------------------------------------------------------===//

#include "ConvPlan.h"
#include "CudaRuntime.h"
#include "memopt/runtime/PlanCache.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

using namespace memopt::cuda;

namespace {

cudnnDataType_t toCudnnType(memopt_dtype dtype) {
  switch (dtype) {
  case MEMOPT_F16:
    return CUDNN_DATA_HALF;
  case MEMOPT_BF16:
    return CUDNN_DATA_BFLOAT16;
  default:
    return CUDNN_DATA_FLOAT;
  }
}

const char *directionCall(ConvDirection direction) {
  switch (direction) {
  case ConvDirection::Forward:
    return "cudnnConvolutionForward";
  case ConvDirection::BackwardData:
    return "cudnnConvolutionBackwardData";
  case ConvDirection::BackwardFilter:
    return "cudnnConvolutionBackwardFilter";
  }
  return "";
}

/// "input [n, c, h, w], filter [...], stride (..), ..." for error messages.
std::string describeShape(const ConvShape &s, memopt_dtype dtype) {
  char text[320];
  std::snprintf(text, sizeof(text),
                "input [%lld, %lld, %lld, %lld], filter [%lld, %lld, %lld, "
                "%lld], stride (%lld, %lld), padding (%lld, %lld), dilation "
                "(%lld, %lld), groups %lld, %s",
                static_cast<long long>(s.n), static_cast<long long>(s.c),
                static_cast<long long>(s.h), static_cast<long long>(s.w),
                static_cast<long long>(s.o), static_cast<long long>(s.cg()),
                static_cast<long long>(s.kh), static_cast<long long>(s.kw),
                static_cast<long long>(s.sh), static_cast<long long>(s.sw),
                static_cast<long long>(s.ph), static_cast<long long>(s.pw),
                static_cast<long long>(s.dh), static_cast<long long>(s.dw),
                static_cast<long long>(s.groups), dtypeName(dtype));
  return text;
}

/// One heuristic result, whatever the direction's perf struct.
struct RankedAlgo {
  int algo = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  ConvAlgoCandidate candidate;
};

/// A strict f32 convolution (FMA math) takes no tensor-op result; the other
/// dtypes take the math type cuDNN ranked.
bool mathAllowed(cudnnMathType_t math, bool strictF32) {
  return !strictF32 || (math != CUDNN_TENSOR_OP_MATH &&
                        math != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION);
}

template <typename Perf>
int collect(const Perf *perf, int returned, bool strictF32, RankedAlgo *out) {
  for (int i = 0; i < returned; ++i) {
    out[i].algo = static_cast<int>(perf[i].algo);
    out[i].math = perf[i].mathType;
    out[i].candidate.succeeded = perf[i].status == CUDNN_STATUS_SUCCESS;
    out[i].candidate.deterministic = perf[i].determinism == CUDNN_DETERMINISTIC;
    out[i].candidate.mathAllowed = mathAllowed(perf[i].mathType, strictF32);
    out[i].candidate.workspaceBytes = perf[i].memory;
  }
  return returned;
}

/// The most results any direction's heuristic returns.
constexpr int kMaxAlgos = 16;
static_assert(CUDNN_CONVOLUTION_FWD_ALGO_COUNT <= kMaxAlgos &&
                  CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT <= kMaxAlgos &&
                  CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT <= kMaxAlgos,
              "kMaxAlgos is too small");

} // namespace

namespace memopt {
namespace cuda {

/// A convolution's descriptors (released with it) and its algorithm.
struct ConvPlan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t filter = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  /// The direction's cudnnConvolution*Algo_t.
  int algo = 0;
  size_t workspaceBytes = 0;
  /// cuDNN's ranking, for moving to the next qualifying algorithm when the
  /// chosen one fails to run (ConvPlan.h); `chosen` indexes it.
  RankedAlgo ranked[kMaxAlgos];
  int count = 0, chosen = -1;
  bool strictF32 = false;

  ConvPlan() = default;
  ConvPlan(const ConvPlan &) = delete;
  ConvPlan &operator=(const ConvPlan &) = delete;
  ~ConvPlan() {
    if (conv)
      cudnnDestroyConvolutionDescriptor(conv);
    if (filter)
      cudnnDestroyFilterDescriptor(filter);
    if (y)
      cudnnDestroyTensorDescriptor(y);
    if (x)
      cudnnDestroyTensorDescriptor(x);
  }
};

struct ConvPlans {
  runtime::PlanCache<ConvKey, ConvPlan> plans;
  /// MEMOPT_CUDA_FAIL_CONV_RUNS=N: the context's first N convolution runs
  /// report cuDNN's EXECUTION_FAILED without running (for the tests of the
  /// fallback to the next algorithm).
  long injectedFailures = 0;
};

} // namespace cuda
} // namespace memopt

namespace {

/// Creates and sets `plan`'s descriptors from `d` (host calls only).
bool setDescriptors(memopt_context *ctx, const char *entry,
                    const ConvDescriptors &d, cudnnDataType_t type,
                    cudnnMathType_t math, ConvPlan &plan) {
  const ConvTensor4d &x = d.x, &y = d.y;
  return MEMOPT_CUDNN_CHECK(ctx, entry, cudnnCreateTensorDescriptor(&plan.x)) &&
         MEMOPT_CUDNN_CHECK(ctx, entry, cudnnCreateTensorDescriptor(&plan.y)) &&
         MEMOPT_CUDNN_CHECK(ctx, entry,
                            cudnnCreateFilterDescriptor(&plan.filter)) &&
         MEMOPT_CUDNN_CHECK(ctx, entry,
                            cudnnCreateConvolutionDescriptor(&plan.conv)) &&
         MEMOPT_CUDNN_CHECK(ctx, entry,
                            cudnnSetTensor4dDescriptorEx(
                                plan.x, type, x.dims[0], x.dims[1], x.dims[2],
                                x.dims[3], x.strides[0], x.strides[1],
                                x.strides[2], x.strides[3])) &&
         MEMOPT_CUDNN_CHECK(ctx, entry,
                            cudnnSetTensor4dDescriptorEx(
                                plan.y, type, y.dims[0], y.dims[1], y.dims[2],
                                y.dims[3], y.strides[0], y.strides[1],
                                y.strides[2], y.strides[3])) &&
         MEMOPT_CUDNN_CHECK(
             ctx, entry,
             cudnnSetFilter4dDescriptor(plan.filter, type, CUDNN_TENSOR_NCHW,
                                        d.filter[0], d.filter[1], d.filter[2],
                                        d.filter[3])) &&
         MEMOPT_CUDNN_CHECK(ctx, entry,
                            cudnnSetConvolution2dDescriptor(
                                plan.conv, d.pad[0], d.pad[1], d.stride[0],
                                d.stride[1], d.dilation[0], d.dilation[1],
                                CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT)) &&
         MEMOPT_CUDNN_CHECK(
             ctx, entry, cudnnSetConvolutionGroupCount(plan.conv, d.groups)) &&
         MEMOPT_CUDNN_CHECK(ctx, entry,
                            cudnnSetConvolutionMathType(plan.conv, math));
}

/// The output dims cuDNN computes from `plan`'s descriptors.
bool outputDims(memopt_context *ctx, const char *entry, const ConvPlan &plan,
                int dims[4]) {
  return MEMOPT_CUDNN_CHECK(ctx, entry,
                            cudnnGetConvolution2dForwardOutputDim(
                                plan.conv, plan.x, plan.filter, &dims[0],
                                &dims[1], &dims[2], &dims[3]));
}

/// Sets `plan`'s descriptors for `s` and checks that cuDNN computes the
/// output memopt does.
bool describePlan(memopt_context *ctx, const char *entry, memopt_dtype dtype,
                  const ConvShape &s, cudnnMathType_t math, ConvPlan &plan) {
  ConvDescriptors d;
  if (!describeConv(s, d)) {
    setError(ctx, MEMOPT_ERROR_INVALID_ARGUMENT, entry,
             "cuDNN's convolutions take tensors of fewer than 2^31 elements: "
             "%s",
             describeShape(s, dtype).c_str());
    return false;
  }
  int dims[4] = {0, 0, 0, 0};
  if (!setDescriptors(ctx, entry, d, toCudnnType(dtype), math, plan) ||
      !outputDims(ctx, entry, plan, dims))
    return false;
  if (std::memcmp(dims, d.y.dims, sizeof(dims)) != 0) {
    setError(ctx, MEMOPT_ERROR_DEVICE, entry,
             "cuDNN computes the output [%d, %d, %d, %d], memopt [%d, %d, "
             "%d, %d] for %s",
             dims[0], dims[1], dims[2], dims[3], d.y.dims[0], d.y.dims[1],
             d.y.dims[2], d.y.dims[3], describeShape(s, dtype).c_str());
    return false;
  }
  return true;
}

/// cuDNN's heuristic ranking for `direction` (it runs nothing), into `out`;
/// the number of results, or -1 after recording an error.
int rankAlgorithms(memopt_context *ctx, const char *entry,
                   ConvDirection direction, const ConvPlan &plan,
                   bool strictF32, RankedAlgo *out) {
  int returned = 0;
  switch (direction) {
  case ConvDirection::Forward: {
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    if (!MEMOPT_CUDNN_CHECK(ctx, entry,
                            cudnnGetConvolutionForwardAlgorithm_v7(
                                ctx->dnn, plan.x, plan.filter, plan.conv,
                                plan.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                &returned, perf)))
      return -1;
    return collect(perf, returned, strictF32, out);
  }
  case ConvDirection::BackwardData: {
    cudnnConvolutionBwdDataAlgoPerf_t
        perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    if (!MEMOPT_CUDNN_CHECK(ctx, entry,
                            cudnnGetConvolutionBackwardDataAlgorithm_v7(
                                ctx->dnn, plan.filter, plan.y, plan.conv,
                                plan.x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                                &returned, perf)))
      return -1;
    return collect(perf, returned, strictF32, out);
  }
  case ConvDirection::BackwardFilter: {
    cudnnConvolutionBwdFilterAlgoPerf_t
        perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    if (!MEMOPT_CUDNN_CHECK(
            ctx, entry,
            cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                ctx->dnn, plan.x, plan.y, plan.conv, plan.filter,
                CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &returned, perf)))
      return -1;
    return collect(perf, returned, strictF32, out);
  }
  }
  return 0;
}

/// The workspace `plan.algo` needs under the descriptor's final math type
/// (the heuristic's figure is an estimate).
bool workspaceSize(memopt_context *ctx, const char *entry,
                   ConvDirection direction, const ConvPlan &plan,
                   size_t &bytes) {
  switch (direction) {
  case ConvDirection::Forward:
    return MEMOPT_CUDNN_CHECK(
        ctx, entry,
        cudnnGetConvolutionForwardWorkspaceSize(
            ctx->dnn, plan.x, plan.filter, plan.conv, plan.y,
            static_cast<cudnnConvolutionFwdAlgo_t>(plan.algo), &bytes));
  case ConvDirection::BackwardData:
    return MEMOPT_CUDNN_CHECK(
        ctx, entry,
        cudnnGetConvolutionBackwardDataWorkspaceSize(
            ctx->dnn, plan.filter, plan.y, plan.conv, plan.x,
            static_cast<cudnnConvolutionBwdDataAlgo_t>(plan.algo), &bytes));
  case ConvDirection::BackwardFilter:
    return MEMOPT_CUDNN_CHECK(
        ctx, entry,
        cudnnGetConvolutionBackwardFilterWorkspaceSize(
            ctx->dnn, plan.x, plan.y, plan.conv, plan.filter,
            static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan.algo), &bytes));
  }
  return false;
}

/// Records that no ranked algorithm qualifies, with what ruled each out.
void noAlgorithm(memopt_context *ctx, const char *entry,
                 ConvDirection direction, const ConvShape &s,
                 memopt_dtype dtype, const RankedAlgo *ranked, int count) {
  int failed = 0, nondeterministic = 0, math = 0, tooLarge = 0;
  for (int i = 0; i < count; ++i) {
    const ConvAlgoCandidate &c = ranked[i].candidate;
    failed += !c.succeeded;
    nondeterministic += c.succeeded && !c.deterministic;
    math += c.succeeded && c.deterministic && !c.mathAllowed;
    tooLarge += c.succeeded && c.deterministic && c.mathAllowed;
  }
  setError(ctx, MEMOPT_ERROR_DEVICE, entry,
           "no deterministic %s algorithm with a workspace within the "
           "%llu-byte library slice for %s (of %d ranked: %d unsupported, %d "
           "nondeterministic, %d TF32 or tensor-op, %d needing more "
           "workspace; MEMOPT_CUDA_ALLOW_NONDETERMINISTIC=1 accepts a "
           "nondeterministic one)",
           directionCall(direction),
           static_cast<unsigned long long>(ctx->libraryBytes),
           describeShape(s, dtype).c_str(), count, failed, nondeterministic,
           math, tooLarge);
}

/// Sets `plan`'s algorithm to the first ranked one from index `from` on that
/// qualifies (ConvPlan.h), under its math type, whose exact workspace fits;
/// false when none does (nothing recorded) or after recording an error.
bool selectAlgorithm(memopt_context *ctx, const char *entry,
                     ConvDirection direction, ConvPlan &plan, int from) {
  ConvAlgoCandidate candidates[kMaxAlgos];
  for (int i = 0; i < plan.count; ++i)
    candidates[i] = plan.ranked[i].candidate;
  bool any = allowNondeterministic();
  for (int i = pickConvAlgorithm(candidates, plan.count, ctx->libraryBytes,
                                 from, any);
       i >= 0; i = pickConvAlgorithm(candidates, plan.count, ctx->libraryBytes,
                                     i + 1, any)) {
    plan.algo = plan.ranked[i].algo;
    // Strict f32 keeps FMA math whatever the result says; the others run
    // the ranked algorithm under the math type it was ranked with.
    if (!plan.strictF32 &&
        !MEMOPT_CUDNN_CHECK(ctx, entry,
                            cudnnSetConvolutionMathType(
                                plan.conv, plan.ranked[i].math)))
      return false;
    size_t bytes = 0;
    if (!workspaceSize(ctx, entry, direction, plan, bytes))
      return false;
    if (bytes <= ctx->libraryBytes) {
      plan.workspaceBytes = bytes;
      plan.chosen = i;
      return true;
    }
  }
  return false;
}

/// Fills `plan`: descriptors, cuDNN's ranking, and the first algorithm that
/// qualifies.
bool makePlan(memopt_context *ctx, const char *entry, ConvDirection direction,
              memopt_dtype dtype, const ConvShape &s, ConvPlan &plan) {
  plan.strictF32 = dtype == MEMOPT_F32 && !allowTf32();
  cudnnMathType_t math = dtype != MEMOPT_F32 ? CUDNN_TENSOR_OP_MATH
                         : plan.strictF32    ? CUDNN_FMA_MATH
                                             : CUDNN_DEFAULT_MATH;
  if (!describePlan(ctx, entry, dtype, s, math, plan))
    return false;
  plan.count =
      rankAlgorithms(ctx, entry, direction, plan, plan.strictF32, plan.ranked);
  if (plan.count < 0)
    return false;
  if (selectAlgorithm(ctx, entry, direction, plan, 0))
    return true;
  if (memopt_get_status(ctx) == MEMOPT_OK)
    noAlgorithm(ctx, entry, direction, s, dtype, plan.ranked, plan.count);
  return false;
}

/// One run of `plan`'s algorithm on its two operands (the entry's, in
/// argument order) into `result`, overwriting it.
cudnnStatus_t execute(memopt_context *ctx, ConvDirection direction,
                      const ConvPlan &plan, const void *a, const void *b,
                      void *result) {
  const float alpha = 1.0f, beta = 0.0f;
  void *workspace = plan.workspaceBytes ? ctx->library : nullptr;
  switch (direction) {
  case ConvDirection::Forward: // a = input, b = filter
    return cudnnConvolutionForward(
        ctx->dnn, &alpha, plan.x, a, plan.filter, b, plan.conv,
        static_cast<cudnnConvolutionFwdAlgo_t>(plan.algo), workspace,
        plan.workspaceBytes, &beta, plan.y, result);
  case ConvDirection::BackwardData: // a = output gradient, b = filter
    return cudnnConvolutionBackwardData(
        ctx->dnn, &alpha, plan.filter, b, plan.y, a, plan.conv,
        static_cast<cudnnConvolutionBwdDataAlgo_t>(plan.algo), workspace,
        plan.workspaceBytes, &beta, plan.x, result);
  case ConvDirection::BackwardFilter: // a = output gradient, b = input
    return cudnnConvolutionBackwardFilter(
        ctx->dnn, &alpha, plan.x, b, plan.y, a, plan.conv,
        static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan.algo), workspace,
        plan.workspaceBytes, &beta, plan.filter, result);
  }
  return CUDNN_STATUS_BAD_PARAM;
}

/// Runs `plan`; an algorithm that cannot run the problem here (cuDNN's
/// NOT_SUPPORTED or EXECUTION_FAILED) gives way to the next one that
/// qualifies, which the plan keeps for later calls (ConvPlan.h).
void runPlan(memopt_context *ctx, const char *entry, ConvDirection direction,
             ConvPlan &plan, const void *a, const void *b, void *result) {
  cudnnStatus_t last = CUDNN_STATUS_SUCCESS;
  auto run = [&](int) {
    last = ctx->convPlans->injectedFailures > 0
               ? (--ctx->convPlans->injectedFailures,
                  CUDNN_STATUS_EXECUTION_FAILED)
               : execute(ctx, direction, plan, a, b, result);
    if (last == CUDNN_STATUS_SUCCESS)
      return ConvRunOutcome::Done;
    if (last == CUDNN_STATUS_NOT_SUPPORTED ||
        last == CUDNN_STATUS_EXECUTION_FAILED)
      return ConvRunOutcome::Unsupported;
    checkCudnn(ctx, entry, directionCall(direction), last);
    return ConvRunOutcome::Failed;
  };
  auto next = [&](int index) {
    return selectAlgorithm(ctx, entry, direction, plan, index + 1)
               ? plan.chosen
               : -1;
  };
  if (runWithFallbacks(plan.chosen, next, run) >= 0) {
    checkLaunch(ctx, entry, directionCall(direction));
    return;
  }
  if (memopt_get_status(ctx) == MEMOPT_OK)
    setError(ctx, MEMOPT_ERROR_DEVICE, entry,
             "%s: no qualifying algorithm runs this convolution (the last, "
             "algorithm %d, returned %s)",
             directionCall(direction), plan.algo, cudnnGetErrorString(last));
}

/// The body of the three entries: `direction`'s result from operands `a`
/// and `b` (the entry's, in argument order) of geometry `s`.
void convolve(memopt_context *ctx, const char *entry, ConvDirection direction,
              memopt_dtype dtype, ConvShape s, const void *a, const void *b,
              void *result) {
  if (!checkConv(ctx, entry, dtype, s))
    return;
  int64_t resultSize = direction == ConvDirection::Forward ? s.outputSize()
                       : direction == ConvDirection::BackwardData
                           ? s.inputSize()
                           : s.filterSize();
  if (!checkPointers(ctx, entry, resultSize, {a, b, result}) ||
      isEmpty({resultSize}))
    return;
  // The operands are the two other tensors. An empty one leaves every sum
  // empty: the result is zero, and cuDNN (no zero extents) is not asked.
  if (isEmpty({s.inputSize(), s.filterSize(), s.outputSize()})) {
    MEMOPT_CUDA_CHECK(
        ctx, entry,
        cudaMemsetAsync(result, 0, resultSize * dtypeSize(dtype), ctx->stream));
    return;
  }
  if (!ctx->convPlans) {
    ctx->convPlans = new ConvPlans();
    if (const char *fail = std::getenv("MEMOPT_CUDA_FAIL_CONV_RUNS"))
      ctx->convPlans->injectedFailures = std::atol(fail);
  }
  ConvPlan *plan = ctx->convPlans->plans.get(
      makeConvKey(direction, dtype, s), [&](ConvPlan &fresh) {
        return makePlan(ctx, entry, direction, dtype, s, fresh);
      });
  if (plan)
    runPlan(ctx, entry, direction, *plan, a, b, result);
}

} // namespace

void memopt_conv2d(memopt_context *ctx, memopt_dtype dtype, const void *input,
                   const void *filter, void *out, int64_t n, int64_t c,
                   int64_t h, int64_t w, int64_t o, int64_t kh, int64_t kw,
                   int64_t stride_h, int64_t stride_w, int64_t pad_h,
                   int64_t pad_w, int64_t dil_h, int64_t dil_w,
                   int64_t groups) {
  convolve(ctx, "memopt_conv2d", ConvDirection::Forward, dtype,
           {n, c, h, w, o, kh, kw, stride_h, stride_w, pad_h, pad_w, dil_h,
            dil_w, groups, 0, 0},
           input, filter, out);
}

void memopt_conv2d_grad_input(memopt_context *ctx, memopt_dtype dtype,
                              const void *grad, const void *filter,
                              void *grad_input, int64_t n, int64_t c, int64_t h,
                              int64_t w, int64_t o, int64_t kh, int64_t kw,
                              int64_t stride_h, int64_t stride_w, int64_t pad_h,
                              int64_t pad_w, int64_t dil_h, int64_t dil_w,
                              int64_t groups) {
  convolve(ctx, "memopt_conv2d_grad_input", ConvDirection::BackwardData, dtype,
           {n, c, h, w, o, kh, kw, stride_h, stride_w, pad_h, pad_w, dil_h,
            dil_w, groups, 0, 0},
           grad, filter, grad_input);
}

void memopt_conv2d_grad_filter(memopt_context *ctx, memopt_dtype dtype,
                               const void *grad, const void *input,
                               void *grad_filter, int64_t n, int64_t c,
                               int64_t h, int64_t w, int64_t o, int64_t kh,
                               int64_t kw, int64_t stride_h, int64_t stride_w,
                               int64_t pad_h, int64_t pad_w, int64_t dil_h,
                               int64_t dil_w, int64_t groups) {
  convolve(ctx, "memopt_conv2d_grad_filter", ConvDirection::BackwardFilter,
           dtype,
           {n, c, h, w, o, kh, kw, stride_h, stride_w, pad_h, pad_w, dil_h,
            dil_w, groups, 0, 0},
           grad, input, grad_filter);
}

bool memopt::cuda::cudnnConvOutputDims(memopt_context *ctx, const char *entry,
                                       memopt_dtype dtype, const ConvShape &s,
                                       int dims[4]) {
  ConvDescriptors d;
  ConvPlan plan;
  return describeConv(s, d) &&
         setDescriptors(ctx, entry, d, toCudnnType(dtype), CUDNN_FMA_MATH,
                        plan) &&
         outputDims(ctx, entry, plan, dims);
}

size_t memopt::cuda::convPlanCount(const memopt_context *ctx) {
  return ctx && ctx->convPlans ? ctx->convPlans->plans.size() : 0;
}

void memopt::cuda::destroyPlans(ConvPlans *plans) { delete plans; }
