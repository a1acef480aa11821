//===- DTypeRulesTest.cpp - the dtype table, runtime and verifiers agree --===//
//
// Walks every row of the runtime's dtype table (memopt/runtime/DTypeRules.h)
// over every combination of the six dtypes in its slots, twice:
//
//  - against the host runtime: calls the row's entry with tiny valid buffers
//    and expects it to record an error exactly when the row rejects the
//    combination, with the row's message (the calls and the walk are in
//    unittests/Runtime/DTypeRuleCalls.h, which the CUDA tests run too);
//  - against the compiler: writes each op bound to the row
//    (memopt/Dialect/Memopt/IR/RuntimeDTypes.h) with those element types and
//    expects its verifier to fail exactly when the row rejects them, naming
//    the entry. Combinations that the op's ODS type constraints already
//    reject are skipped and counted.
//
// So a rule that the runtime and the verifier read differently fails here in
// either direction, as does an entry or an op that has no case, a binding
// to an entry without a row, or a memopt op with dtype arguments and no
// binding.
//
//===----------------------------------------------------------------------===//

#include "DTypeRuleCalls.h"

#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"
#include "memopt/Dialect/Memopt/IR/MemoptOps.h"
#include "memopt/Dialect/Memopt/IR/RuntimeDTypes.h"
#include "memopt/runtime.h"
#include "memopt/runtime/DTypeRules.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/StringSet.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

using namespace mlir;
using namespace memopt;
using runtime::DTypeRule;
using namespace memopt::test;

namespace {

//===----------------------------------------------------------------------===//
// The runtime side
//===----------------------------------------------------------------------===//

TEST(DTypeRulesTest, HostRuntimeAcceptsExactlyTheTable) {
  // Host buffers: the storage, then the step and the scale.
  std::vector<uint64_t> storage((DTypeCallBuffers::kCount + 1) *
                                DTypeCallBuffers::kBytes / 8);
  auto *bytes = reinterpret_cast<unsigned char *>(storage.data());
  DTypeCallBuffers buffers;
  for (int i = 0; i < DTypeCallBuffers::kCount; ++i)
    buffers.data[i] = bytes + i * DTypeCallBuffers::kBytes;
  unsigned char *scalars =
      bytes + DTypeCallBuffers::kCount * DTypeCallBuffers::kBytes;
  buffers.step = reinterpret_cast<int64_t *>(scalars);
  buffers.scale = reinterpret_cast<float *>(scalars + 8);
  auto reset = [&] {
    std::fill(storage.begin(), storage.end(), 0);
    *buffers.step = 1;
    *buffers.scale = 1.0f;
  };

  memopt_context *ctx = memopt_context_create();
  ASSERT_NE(ctx, nullptr);
  int walked = walkDTypeRules(ctx, buffers, reset);
  memopt_context_destroy(ctx);
  int rejected = 0;
  for (const DTypeRule &rule : runtime::kDTypeRules)
    for (const std::vector<memopt_dtype> &dtypes :
         dtypeCombinations(rule.numSlots))
      rejected += !runtime::acceptsDTypes(rule, dtypes.data());
  std::cout << "host runtime: " << walked << " combinations of "
            << runtime::kNumDTypeRules << " rows, " << rejected
            << " rejected\n";
  EXPECT_GT(walked, 0);
}

//===----------------------------------------------------------------------===//
// The compiler side
//===----------------------------------------------------------------------===//

/// One op written with the element types of its entry's dtype arguments:
/// `$0` and `$1` stand for the element types of slots 0 and 1, `$z0` for a
/// zero of slot 0's type. `args` are the arguments of the enclosing
/// function, `body` the op.
struct OpCase {
  StringRef opName;
  LogicalResult (*odsConstraints)(Operation *);
  const char *args;
  const char *body;
};

template <typename OpT> LogicalResult odsConstraints(Operation *op) {
  return cast<OpT>(op).verifyInvariantsImpl();
}

template <typename OpT> OpCase opCase(const char *args, const char *body) {
  return {OpT::getOperationName(), &odsConstraints<OpT>, args, body};
}

std::vector<OpCase> opCases() {
  // The bodies of the families; the strings live as long as the cases.
  static const std::map<std::string, std::string> family = [] {
    std::map<std::string, std::string> bodies;
    for (StringRef op :
         {"neg", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu",
          "silu", "gelu", "hardswish", "hardsigmoid", "mish", "abs", "sign",
          "sin", "cos", "erf", "expm1", "log1p", "softplus", "tan", "asin",
          "acos", "atan", "floor", "ceil", "round", "trunc", "sinc"})
      bodies[op.str()] = "%r = memopt." + op.str() + " %x : tensor<4x$0>";
    for (StringRef op : {"add_scalar", "mul_scalar", "pow_scalar"})
      bodies[op.str()] = "%r = memopt." + op.str() + " %x, 2.0 : tensor<4x$0>";
    for (StringRef op : {"add", "sub", "mul", "div", "maximum", "relu_grad",
                         "silu_grad", "tanh_grad", "sigmoid_grad", "gelu_grad",
                         "hardswish_grad", "hardsigmoid_grad", "mish_grad"})
      bodies[op.str()] = "%r = memopt." + op.str() + " %x, %x : tensor<4x$0>";
    for (StringRef op : {"reduce_sum", "reduce_mean", "reduce_max",
                         "reduce_sum_squares"})
      bodies[op.str()] = "%r = memopt." + op.str() +
                         " %x dims [0] : tensor<2x3x$0> to tensor<3x$1>";
    for (StringRef op : {"softmax", "log_softmax"})
      bodies[op.str()] = "%r = memopt." + op.str() +
                         " %x dim 1 : "
                         "tensor<2x3x$0>";
    for (StringRef op : {"softmax_grad", "log_softmax_grad"})
      bodies[op.str()] = "%r = memopt." + op.str() +
                         " %x, %x dim 1 : "
                         "tensor<2x3x$0>";
    for (StringRef op : {"max_pool2d", "avg_pool2d"})
      bodies[op.str()] = "%r = memopt." + op.str() +
                         " %x kernel [2, 2] strides [2, 2] : "
                         "tensor<1x1x4x4x$0> to tensor<1x1x2x2x$0>";
    return bodies;
  }();
  auto body = [&](StringRef op) { return family.at(op.str()).c_str(); };
  const char *vec = "%x: tensor<4x$0>";
  const char *mat = "%x: tensor<2x3x$0>";
  const char *image = "%x: tensor<1x1x4x4x$0>";
  return {
      // Memory, casts and selection.
      opCase<ConstantOp>("", "%r = memopt.constant dense<$z0> : tensor<4x$0>"),
      opCase<CastOp>(vec, "%r = memopt.cast %x : tensor<4x$0> to tensor<4x$1>"),
      opCase<WhereOp>("%c: tensor<4xi1>, %x: tensor<4x$0>",
                      "%r = memopt.where %c, %x, %x : tensor<4xi1>, "
                      "tensor<4x$0>"),
      opCase<MaskedFillOp>("%x: tensor<4x$0>, %m: tensor<4xi1>",
                           "%r = memopt.masked_fill %x, %m, 1.0 : "
                           "tensor<4x$0>, tensor<4xi1>"),
      // Elementwise.
      opCase<CompareOp>(vec, "%r = memopt.compare lt, %x, %x : tensor<4x$0>"),
      opCase<NegOp>(vec, body("neg")),
      opCase<ExpOp>(vec, body("exp")),
      opCase<LogOp>(vec, body("log")),
      opCase<SqrtOp>(vec, body("sqrt")),
      opCase<RsqrtOp>(vec, body("rsqrt")),
      opCase<TanhOp>(vec, body("tanh")),
      opCase<SigmoidOp>(vec, body("sigmoid")),
      opCase<ReluOp>(vec, body("relu")),
      opCase<SiluOp>(vec, body("silu")),
      opCase<GeluOp>(vec, body("gelu")),
      opCase<HardswishOp>(vec, body("hardswish")),
      opCase<HardsigmoidOp>(vec, body("hardsigmoid")),
      opCase<MishOp>(vec, body("mish")),
      opCase<AbsOp>(vec, body("abs")),
      opCase<SignOp>(vec, body("sign")),
      opCase<SinOp>(vec, body("sin")),
      opCase<CosOp>(vec, body("cos")),
      opCase<ErfOp>(vec, body("erf")),
      opCase<Expm1Op>(vec, body("expm1")),
      opCase<Log1pOp>(vec, body("log1p")),
      opCase<SoftplusOp>(vec, body("softplus")),
      opCase<TanOp>(vec, body("tan")),
      opCase<AsinOp>(vec, body("asin")),
      opCase<AcosOp>(vec, body("acos")),
      opCase<AtanOp>(vec, body("atan")),
      opCase<FloorOp>(vec, body("floor")),
      opCase<CeilOp>(vec, body("ceil")),
      opCase<RoundOp>(vec, body("round")),
      opCase<TruncOp>(vec, body("trunc")),
      opCase<SincOp>(vec, body("sinc")),
      opCase<AddScalarOp>(vec, body("add_scalar")),
      opCase<MulScalarOp>(vec, body("mul_scalar")),
      opCase<PowScalarOp>(vec, body("pow_scalar")),
      opCase<AddOp>(vec, body("add")),
      opCase<SubOp>(vec, body("sub")),
      opCase<MulOp>(vec, body("mul")),
      opCase<DivOp>(vec, body("div")),
      opCase<MaximumOp>(vec, body("maximum")),
      opCase<ReluGradOp>(vec, body("relu_grad")),
      opCase<SiluGradOp>(vec, body("silu_grad")),
      opCase<TanhGradOp>(vec, body("tanh_grad")),
      opCase<SigmoidGradOp>(vec, body("sigmoid_grad")),
      opCase<GeluGradOp>(vec, body("gelu_grad")),
      opCase<HardswishGradOp>(vec, body("hardswish_grad")),
      opCase<HardsigmoidGradOp>(vec, body("hardsigmoid_grad")),
      opCase<MishGradOp>(vec, body("mish_grad")),
      opCase<ClampOp>(vec, "%r = memopt.clamp %x min -1.0 : tensor<4x$0>"),
      opCase<ClampGradOp>(vec, "%r = memopt.clamp_grad %x, %x min 0.0 max "
                               "6.0 inclusive = false : tensor<4x$0>"),
      opCase<ScaleByOp>("%x: tensor<4x$0>, %s: tensor<f32>",
                        "%r = memopt.scale_by %x, %s : tensor<4x$0>"),
      // Shapes.
      opCase<BroadcastOp>("%x: tensor<3x$0>",
                          "%r = memopt.broadcast %x dims [1] : tensor<3x$0> "
                          "to tensor<2x3x$0>"),
      opCase<TransposeOp>(mat, "%r = memopt.transpose %x perm [1, 0] : "
                               "tensor<2x3x$0> to tensor<3x2x$0>"),
      opCase<SliceOp>(vec, "%r = memopt.slice %x starts [1] limits [3] "
                           "strides [1] : tensor<4x$0> to tensor<2x$0>"),
      opCase<SliceGradOp>("%x: tensor<2x$0>",
                          "%r = memopt.slice_grad %x starts [1] limits [3] "
                          "strides [1] : tensor<2x$0> to tensor<4x$0>"),
      opCase<ConcatOp>("%x: tensor<2x$0>",
                       "%r = memopt.concat %x, %x dim 0 : tensor<2x$0>, "
                       "tensor<2x$0> -> tensor<4x$0>"),
      // Reductions, softmax, normalisation.
      opCase<ReduceSumOp>(mat, body("reduce_sum")),
      opCase<ReduceMeanOp>(mat, body("reduce_mean")),
      opCase<ReduceMaxOp>(mat, body("reduce_max")),
      opCase<ReduceSumSquaresOp>(mat, body("reduce_sum_squares")),
      opCase<SoftmaxOp>(mat, body("softmax")),
      opCase<LogSoftmaxOp>(mat, body("log_softmax")),
      opCase<SoftmaxGradOp>(mat, body("softmax_grad")),
      opCase<LogSoftmaxGradOp>(mat, body("log_softmax_grad")),
      opCase<LayerNormOp>("%x: tensor<2x4x$0>, %w: tensor<4x$1>",
                          "%y, %m, %s = memopt.layer_norm %x, %w, %w eps "
                          "1.0e-05 : tensor<2x4x$0>, tensor<4x$1> -> "
                          "tensor<2xf32>"),
      opCase<LayerNormGradOp>(
          "%g: tensor<2x4x$0>, %w: tensor<4x$1>, %m: tensor<2xf32>",
          "%gi, %gw, %gb = memopt.layer_norm_grad %g, %g, %w, %m, %m : "
          "tensor<2x4x$0>, tensor<4x$1>, tensor<2xf32>"),
      opCase<RmsNormOp>("%x: tensor<2x4x$0>, %w: tensor<4x$1>",
                        "%y, %s = memopt.rms_norm %x, %w eps 1.0e-06 : "
                        "tensor<2x4x$0>, tensor<4x$1> -> tensor<2xf32>"),
      opCase<RmsNormGradOp>(
          "%g: tensor<2x4x$0>, %w: tensor<4x$1>, %s: tensor<2xf32>",
          "%gi, %gw = memopt.rms_norm_grad %g, %g, %w, %s : tensor<2x4x$0>, "
          "tensor<4x$1>, tensor<2xf32>"),
      opCase<BatchNormOp>("%x: tensor<2x3x4x4x$0>, %c: tensor<3xf32>",
                          "%y, %m, %s, %rm, %rv = memopt.batch_norm %x, %c, "
                          "%c, %c, %c eps 1.0e-05 momentum 1.0e-01 : "
                          "tensor<2x3x4x4x$0>, tensor<3xf32>"),
      opCase<BatchNormGradOp>("%x: tensor<2x3x4x4x$0>, %c: tensor<3xf32>",
                              "%gi, %gw, %gb = memopt.batch_norm_grad %x, %x, "
                              "%c, %c, %c : tensor<2x3x4x4x$0>, "
                              "tensor<3xf32>"),
      // Products, embeddings, convolution, pooling.
      opCase<MatmulOp>("%a: tensor<2x3x$0>, %b: tensor<3x4x$0>",
                       "%r = memopt.matmul %a, %b : tensor<2x3x$0>, "
                       "tensor<3x4x$0> -> tensor<2x4x$1>"),
      // A [3, 64] weight: 96 bytes of codes, 3 absmax codes, 1 padding
      // byte, one scale and the offset.
      opCase<Nf4MatmulOp>("%a: tensor<2x64x$0>, %w: tensor<108xi8>",
                          "%r = memopt.nf4_matmul %a, %w shape [3, 64] "
                          "transpose_rhs : tensor<2x64x$0>, tensor<108xi8> "
                          "-> tensor<2x3x$0>"),
      opCase<EmbeddingOp>("%w: tensor<5x3x$0>, %i: tensor<2x$1>",
                          "%r = memopt.embedding %w, %i : tensor<5x3x$0>, "
                          "tensor<2x$1> -> tensor<2x3x$0>"),
      opCase<EmbeddingGradOp>("%g: tensor<2x3x$0>, %i: tensor<2x$1>",
                              "%r = memopt.embedding_grad %g, %i : "
                              "tensor<2x3x$0>, tensor<2x$1> -> "
                              "tensor<5x3x$0>"),
      opCase<Conv2DOp>("%x: tensor<1x2x4x4x$0>, %w: tensor<3x2x3x3x$0>",
                       "%r = memopt.conv2d %x, %w : tensor<1x2x4x4x$0>, "
                       "tensor<3x2x3x3x$0> -> tensor<1x3x2x2x$0>"),
      opCase<Conv2DGradInputOp>(
          "%g: tensor<1x3x2x2x$0>, %w: tensor<3x2x3x3x$0>",
          "%r = memopt.conv2d_grad_input %g, %w : tensor<1x3x2x2x$0>, "
          "tensor<3x2x3x3x$0> -> tensor<1x2x4x4x$0>"),
      opCase<Conv2DGradFilterOp>(
          "%g: tensor<1x3x2x2x$0>, %x: tensor<1x2x4x4x$0>",
          "%r = memopt.conv2d_grad_filter %g, %x : tensor<1x3x2x2x$0>, "
          "tensor<1x2x4x4x$0> -> tensor<3x2x3x3x$0>"),
      opCase<MaxPool2DOp>(image, body("max_pool2d")),
      opCase<AvgPool2DOp>(image, body("avg_pool2d")),
      opCase<MaxPool2DGradOp>(
          "%g: tensor<1x1x2x2x$0>, %x: tensor<1x1x4x4x$0>",
          "%r = memopt.max_pool2d_grad %g, %x kernel [2, 2] strides [2, 2] : "
          "tensor<1x1x2x2x$0>, tensor<1x1x4x4x$0>"),
      opCase<AvgPool2DGradOp>("%g: tensor<1x1x2x2x$0>",
                              "%r = memopt.avg_pool2d_grad %g kernel [2, 2] "
                              "strides [2, 2] : tensor<1x1x2x2x$0> to "
                              "tensor<1x1x4x4x$0>"),
      // Fused attention, randomness.
      opCase<AttentionOp>("%q: tensor<2x4x$0>",
                          "%o, %l = memopt.attention %q, %q, %q scale "
                          "5.0e-01 : tensor<2x4x$0>, tensor<2x4x$0>, "
                          "tensor<2x4x$0> -> tensor<2x4x$0>, tensor<2xf32>"),
      opCase<AttentionGradOp>("%q: tensor<2x4x$0>, %l: tensor<2xf32>",
                              "%gq, %gk, %gv = memopt.attention_grad %q, %q, "
                              "%q, %q, %l, %q scale 5.0e-01 : tensor<2x4x$0>, "
                              "tensor<2x4x$0>, tensor<2x4x$0>, "
                              "tensor<2x4x$0>, tensor<2xf32>"),
      opCase<DropoutOp>(vec, "%r = memopt.dropout %x p 1.0e-01 seed 0 stream "
                             "0 : tensor<4x$0>"),
      // Data parallelism's and ZeRO's collectives: only ever kernels, whose
      // verifier checks the runtime's row (the tensor ops are upstream's).
      OpCase{"shard.all_reduce", [](Operation *) { return success(); },
             "%x: memref<4x$0>",
             "memopt.kernel \"shard.all_reduce\" ins(%x : memref<4x$0>) "
             "outs(%x : memref<4x$0>) with {}"},
      OpCase{"shard.reduce_scatter", [](Operation *) { return success(); },
             "%x: memref<4x$0>, %y: memref<2x$0>",
             "memopt.kernel \"shard.reduce_scatter\" ins(%x : memref<4x$0>) "
             "outs(%y : memref<2x$0>) with {}"},
      OpCase{"shard.all_gather", [](Operation *) { return success(); },
             "%x: memref<2x$0>, %y: memref<4x$0>",
             "memopt.kernel \"shard.all_gather\" ins(%x : memref<2x$0>) "
             "outs(%y : memref<4x$0>) with {}"},
      OpCase{"shard.all_slice", [](Operation *) { return success(); },
             "%x: memref<4x$0>, %y: memref<2x$0>",
             "memopt.kernel \"shard.all_slice\" ins(%x : memref<4x$0>) "
             "outs(%y : memref<2x$0>) with {}"},
      // Losses.
      opCase<CrossEntropyOp>("%x: tensor<2x3x$0>, %y: tensor<2x$1>",
                             "%l = memopt.cross_entropy %x, %y : "
                             "tensor<2x3x$0>, tensor<2x$1>"),
      opCase<LabelCountOp>("%y: tensor<4x$0>",
                           "%n = memopt.label_count %y : tensor<4x$0>"),
      opCase<CrossEntropyGradOp>(
          "%x: tensor<2x3x$0>, %y: tensor<2x$1>, %g: tensor<f32>",
          "%r = memopt.cross_entropy_grad %x, %y, %g : tensor<2x3x$0>, "
          "tensor<2x$1>"),
      opCase<LinearCrossEntropyOp>(
          "%x: tensor<2x4x$0>, %w: tensor<3x4x$1>, %y: tensor<2x$2>",
          "%l, %s = memopt.linear_cross_entropy %x, %w, %y chunk 2 : "
          "tensor<2x4x$0>, tensor<3x4x$1>, tensor<2x$2> -> tensor<2xf32>"),
      opCase<LinearCrossEntropyGradOp>(
          "%x: tensor<2x4x$0>, %w: tensor<3x4x$1>, %y: tensor<2x$2>, "
          "%s: tensor<2xf32>, %g: tensor<f32>",
          "%gx, %gw = memopt.linear_cross_entropy_grad %x, %w, %y, %s, %g "
          "chunk 2 : tensor<2x4x$0>, tensor<3x4x$1>, tensor<2x$2>, "
          "tensor<2xf32> -> tensor<2x4x$0>, tensor<3x4x$1>"),
      // A [3, 4] NF4 weight: 6 bytes of codes, 1 absmax code, 1 padding
      // byte, one scale and the offset.
      opCase<Nf4LinearCrossEntropyOp>(
          "%x: tensor<2x4x$0>, %w: tensor<16xi8>, %y: tensor<2x$1>",
          "%l, %s = memopt.nf4_linear_cross_entropy %x, %w shape [3, 4], %y "
          "chunk 2 : tensor<2x4x$0>, tensor<16xi8>, tensor<2x$1> -> "
          "tensor<2xf32>"),
      opCase<Nf4LinearCrossEntropyGradOp>(
          "%x: tensor<2x4x$0>, %w: tensor<16xi8>, %y: tensor<2x$1>, "
          "%s: tensor<2xf32>, %g: tensor<f32>",
          "%gx = memopt.nf4_linear_cross_entropy_grad %x, %w shape [3, 4], "
          "%y, %s, %g chunk 2 : tensor<2x4x$0>, tensor<16xi8>, tensor<2x$1>, "
          "tensor<2xf32> -> tensor<2x4x$0>"),
      opCase<MseLossOp>(vec, "%l = memopt.mse_loss %x, %x : tensor<4x$0>"),
      opCase<MseLossGradOp>("%x: tensor<4x$0>, %g: tensor<f32>",
                            "%r = memopt.mse_loss_grad %x, %x, %g : "
                            "tensor<4x$0>"),
      // Optimizers and loss scaling.
      opCase<SgdUpdateOp>(vec, "%p, %b = memopt.sgd_update %x, %x, %x lr "
                               "1.0e-02 momentum 9.0e-01 weight_decay 0.0 : "
                               "tensor<4x$0>"),
      opCase<AdamWUpdateOp>("%x: tensor<4x$0>, %t: tensor<i64>",
                            "%p, %m, %v = memopt.adamw_update %x, %x, %x, %x "
                            "step %t lr 1.0e-03 betas(9.0e-01, 9.990000e-01) "
                            "eps 1.0e-08 weight_decay 1.0e-02 : "
                            "tensor<4x$0>"),
      opCase<UnscaleOp>("%s: tensor<f32>, %x: tensor<4x$0>",
                        "%g, %f = memopt.unscale %s, %x : tensor<4x$0>"),
  };
}

/// The memopt ops whose runtime entries take no dtype argument.
const llvm::StringSet<> kOpsWithoutDTypes = {
    "memopt.reshape",       // memopt_copy
    "memopt.increment",     // memopt_increment
    "memopt.scale_loss",    // memopt_scale_loss
    "memopt.update_scale",  // memopt_update_scale
    "memopt.transfer",      // memopt_transfer (bytes)
    "memopt.transfer_wait", // memopt_transfer_wait (a slot)
    "memopt.kernel",        // checks the op it names
};

std::string replaceAll(std::string text, const std::string &from,
                       const std::string &to) {
  for (size_t pos = text.find(from); pos != std::string::npos;
       pos = text.find(from, pos + to.size()))
    text.replace(pos, from.size(), to);
  return text;
}

/// `opCase` with the element types `dtypes`, inside a function.
std::string instantiate(const OpCase &opCase,
                        const std::vector<memopt_dtype> &dtypes) {
  std::string text = std::string("func.func @f(") + opCase.args + ") {\n  " +
                     opCase.body + "\n  return\n}\n";
  text = replaceAll(
      text, "$z0",
      runtime::inDTypeSet(runtime::kFloatDTypes, dtypes[0]) ? "0.0" : "0");
  for (size_t slot = 0; slot < dtypes.size(); ++slot)
    text = replaceAll(text, "$" + std::to_string(slot),
                      runtime::dtypeName(dtypes[slot]));
  return text;
}

class VerifierTest : public ::testing::Test {
protected:
  VerifierTest() {
    context.loadDialect<MemoptDialect, func::FuncDialect,
                        memref::MemRefDialect, shard::ShardDialect>();
    context.printOpOnDiagnostic(false);
  }

  MLIRContext context;
};

TEST_F(VerifierTest, EveryOpWithDTypeArgumentsIsBound) {
  for (const RuntimeDTypeBinding &binding : getRuntimeDTypeBindings()) {
    EXPECT_NE(binding.rule, nullptr)
        << binding.opName.str() << " is bound to " << binding.entry.str()
        << ", which has no row with " << binding.sources.size()
        << " dtype arguments";
  }
  for (RegisteredOperationName name : context.getRegisteredOperations()) {
    if (name.getDialectNamespace() != MemoptDialect::getDialectNamespace())
      continue;
    bool bound = lookupRuntimeDTypeBinding(name.getStringRef()) != nullptr;
    bool exempt = kOpsWithoutDTypes.contains(name.getStringRef());
    EXPECT_NE(bound, exempt)
        << name.getStringRef().str()
        << (bound ? " is bound and listed as having no dtype arguments"
                  : " has no binding to a runtime entry's dtype arguments "
                    "(lib/Dialect/Memopt/IR/RuntimeDTypes.cpp)");
  }
}

/// The runtime entries that read element i of each input before writing
/// element i of their output (runtime.h): their ops write in place.
const llvm::StringSet<> kElementwiseEntries = {
    "memopt_unary",           "memopt_binary",      "memopt_scalar",
    "memopt_activation_grad", "memopt_clamp",       "memopt_clamp_grad",
    "memopt_where",           "memopt_masked_fill", "memopt_dropout"};

/// The other ops whose entries runtime.h lets write over an operand: a
/// same-size cast, softmax, the clipping coefficient's multiply, and the
/// updates of the optimizer, the loss scale and the running statistics.
const llvm::StringSet<> kOtherInPlaceOps = {
    "memopt.cast",       "memopt.softmax",      "memopt.increment",
    "memopt.scale_loss", "memopt.sgd_update",   "memopt.adamw_update",
    "memopt.batch_norm", "memopt.update_scale", "memopt.unscale",
    "memopt.scale_by"};

TEST_F(VerifierTest, FamilyEntriesHaveOpCodes) {
  // An entry that serves several ops takes the op's code, the name of a
  // runtime.h enumerator with the family's prefix; the others take none.
  const std::map<std::string, std::string> prefixes = {
      {"memopt_unary", "MEMOPT_UNARY_"},
      {"memopt_binary", "MEMOPT_BINARY_"},
      {"memopt_scalar", "MEMOPT_SCALAR_"},
      {"memopt_activation_grad", "MEMOPT_GRAD_"},
      {"memopt_reduce", "MEMOPT_REDUCE_"}};
  std::set<std::string> codes;
  for (const RuntimeDTypeBinding &binding : getRuntimeDTypeBindings()) {
    auto it = prefixes.find(binding.entry.str());
    if (it == prefixes.end()) {
      EXPECT_TRUE(binding.opCode.empty()) << binding.opName.str();
      continue;
    }
    EXPECT_TRUE(binding.opCode.starts_with(it->second))
        << binding.opName.str() << " has op code '" << binding.opCode.str()
        << "' for " << binding.entry.str();
    EXPECT_TRUE(codes.insert(binding.opCode.str()).second)
        << binding.opCode.str() << " is the code of two ops";
  }
  // 30 unary ops (gelu's tanh form is its code's variant), 5 binary,
  // 3 scalar, 8 activation gradients, 4 reductions.
  EXPECT_EQ(codes.size(), 50u);
}

TEST_F(VerifierTest, InPlaceOpsAreTheRuntimesAliasingEntries) {
  int inPlace = 0;
  for (RegisteredOperationName name : context.getRegisteredOperations()) {
    if (name.getDialectNamespace() != MemoptDialect::getDialectNamespace())
      continue;
    const RuntimeDTypeBinding *binding =
        lookupRuntimeDTypeBinding(name.getStringRef());
    bool elementwise = binding && kElementwiseEntries.contains(binding->entry);
    bool expected =
        elementwise || kOtherInPlaceOps.contains(name.getStringRef());
    bool declared = name.hasInterface<InPlaceOpInterface>();
    inPlace += declared;
    EXPECT_EQ(declared, expected)
        << name.getStringRef().str()
        << (declared ? " writes in place, which its runtime entry does not "
                       "allow (runtime.h)"
                     : " lowers to an entry that may write in place but does "
                       "not declare InPlaceOpInterface (MemoptOps.td)");
  }
  EXPECT_EQ(inPlace, 51 + static_cast<int>(kOtherInPlaceOps.size()));
}

TEST_F(VerifierTest, UpdatesWriteEachStateOverItsOldValue) {
  // The (result, operand) pairs of the update ops, through the interface.
  const char *source = R"mlir(
    func.func @f(%p: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<4xf32>,
                 %v: tensor<4xf32>, %t: tensor<i64>, %s: tensor<f32>) {
      %a:3 = memopt.adamw_update %p, %g, %m, %v step %t lr 1.0e-03
          betas(0.9, 0.999) eps 1.0e-08 weight_decay 0.01 : tensor<4xf32>
      %b:2 = memopt.sgd_update %p, %g, %m lr 0.1 momentum 0.9
          weight_decay 0.0 : tensor<4xf32>
      %u:2, %inf2 = memopt.unscale %s, %g, %m : tensor<4xf32>, tensor<4xf32>
      return
    }
  )mlir";
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(source, ParserConfig(&context));
  ASSERT_TRUE(module) << "the test's IR does not parse";
  auto pairsOf = [](Operation *op) {
    std::set<std::pair<unsigned, unsigned>> pairs;
    auto inPlace = cast<InPlaceOpInterface>(op);
    for (unsigned r = 0; r < op->getNumResults(); ++r)
      for (unsigned o = 0; o < op->getNumOperands(); ++o)
        if (inPlace.mayWriteResultOver(r, o))
          pairs.insert({r, o});
    return pairs;
  };
  using Pairs = std::set<std::pair<unsigned, unsigned>>;
  std::map<std::string, Pairs> pairs;
  module->walk([&](InPlaceOpInterface op) {
    pairs[op->getName().getStringRef().str()] = pairsOf(op);
  });
  EXPECT_EQ(pairs["memopt.adamw_update"], (Pairs{{0, 0}, {1, 2}, {2, 3}}));
  EXPECT_EQ(pairs["memopt.sgd_update"], (Pairs{{0, 0}, {1, 2}}));
  EXPECT_EQ(pairs["memopt.unscale"], (Pairs{{0, 1}, {1, 2}}));
  EXPECT_EQ(pairs.size(), 3u);
}

TEST_F(VerifierTest, VerifiersAcceptExactlyTheTable) {
  std::vector<OpCase> cases = opCases();
  std::map<std::string, const OpCase *> byOp;
  for (const OpCase &opCase : cases) {
    EXPECT_NE(lookupRuntimeDTypeBinding(opCase.opName), nullptr)
        << opCase.opName.str() << " has a case here but no binding";
    byOp[opCase.opName.str()] = &opCase;
  }

  int walked = 0, skippedByOds = 0, rejected = 0;
  std::set<const DTypeRule *> rowsWalked;
  for (const RuntimeDTypeBinding &binding : getRuntimeDTypeBindings()) {
    auto it = byOp.find(binding.opName.str());
    if (it == byOp.end()) {
      ADD_FAILURE() << binding.opName.str() << " is bound but has no case here";
      continue;
    }
    if (!binding.rule)
      continue;
    const DTypeRule &rule = *binding.rule;
    rowsWalked.insert(&rule);
    for (const std::vector<memopt_dtype> &dtypes :
         dtypeCombinations(rule.numSlots)) {
      std::string text = instantiate(*it->second, dtypes);
      std::string diagnostics;
      ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
        diagnostics += diag.str() + "\n";
        return success();
      });
      OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(
          text, ParserConfig(&context, /*verifyAfterParse=*/false));
      ASSERT_TRUE(module) << text << diagnostics;
      Operation *op = nullptr;
      module->walk([&](Operation *nested) {
        auto kernel = dyn_cast<KernelOp>(nested);
        if (nested->getName().getStringRef() == binding.opName ||
            (kernel && kernel.getKernel() == binding.opName))
          op = nested;
      });
      ASSERT_NE(op, nullptr) << text;

      if (failed(it->second->odsConstraints(op))) {
        ++skippedByOds;
        continue;
      }
      diagnostics.clear();
      bool verified = succeeded(verify(op));
      bool accepted = runtime::acceptsDTypes(rule, dtypes.data());
      ++walked;
      if (accepted) {
        EXPECT_TRUE(verified)
            << binding.opName.str() << describeDTypes(dtypes) << ": "
            << rule.entry << " accepts it, the verifier says: " << diagnostics
            << text;
        continue;
      }
      ++rejected;
      EXPECT_FALSE(verified)
          << binding.opName.str() << describeDTypes(dtypes) << ": "
          << rule.entry << " rejects it, the verifier accepts it\n"
          << text;
      EXPECT_NE(diagnostics.find(std::string("rejected by the runtime's ") +
                                 rule.entry),
                std::string::npos)
          << binding.opName.str() << describeDTypes(dtypes)
          << ": the verifier fails for another reason: " << diagnostics;
    }
  }
  // Every row that an op lowers to is walked (memopt_fill through
  // memopt.constant), but memopt_adamw8bit_update's: memopt.adamw_update
  // lowers to it when its moments are 8-bit, and its f32 parameter is
  // within memopt_adamw_update's row.
  for (const DTypeRule &rule : runtime::kDTypeRules)
    EXPECT_TRUE(rowsWalked.count(&rule) ||
                std::string(rule.entry) == "memopt_adamw8bit_update")
        << rule.entry << " has a row that no op is bound to";
  std::cout << "verifiers: " << getRuntimeDTypeBindings().size() << " ops, "
            << walked << " combinations verified (" << rejected
            << " rejected by the table), " << skippedByOds
            << " skipped as the ODS constraints reject them\n";
  EXPECT_GT(walked, 0);
}

/// The case of the issue: BF16 training with a convolution bias sums the
/// bias gradient in two passes, the last from an f32 intermediate into the
/// bf16 result. The table, the runtime and the verifiers of the op and of
/// its kernel all accept it; a bf16 input into an f16 result stays rejected.
TEST_F(VerifierTest, SplitReductionIntoBF16) {
  const DTypeRule *rule = runtime::findDTypeRule("memopt_reduce");
  ASSERT_NE(rule, nullptr);
  const memopt_dtype intoBF16[] = {MEMOPT_F32, MEMOPT_BF16};
  const memopt_dtype bf16IntoF16[] = {MEMOPT_BF16, MEMOPT_F16};
  EXPECT_TRUE(runtime::acceptsDTypes(*rule, intoBF16));
  EXPECT_FALSE(runtime::acceptsDTypes(*rule, bf16IntoF16));

  memopt_context *ctx = memopt_context_create();
  float in[2] = {1.0f, 2.0f};
  uint16_t out[1] = {0};
  memopt_reduce(ctx, MEMOPT_REDUCE_SUM, MEMOPT_F32, in, MEMOPT_BF16, out, 1, 2,
                1);
  EXPECT_EQ(memopt_get_status(ctx), MEMOPT_OK) << memopt_get_error_message(ctx);
  EXPECT_EQ(out[0], 0x4040); // 3.0 in bf16
  memopt_context_destroy(ctx);

  const char *module = R"mlir(
    func.func @f(%x: tensor<8x4xf32>, %y: memref<8x4xf32>, %z: memref<4xbf16>,
                 %w: memref<4xf16>, %v: memref<8x4xbf16>) {
      %r = memopt.reduce_sum %x dims [0] : tensor<8x4xf32> to tensor<4xbf16>
      memopt.kernel "memopt.reduce_sum" ins(%y : memref<8x4xf32>) outs(%z : memref<4xbf16>) with {dims = array<i64: 0>}
      return
    })mlir";
  OwningOpRef<ModuleOp> parsed = parseSourceString<ModuleOp>(module, &context);
  EXPECT_TRUE(parsed);

  std::string diagnostics;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    diagnostics += diag.str();
    return success();
  });
  const char *rejectedKernel = R"mlir(
    func.func @f(%v: memref<8x4xbf16>, %w: memref<4xf16>) {
      memopt.kernel "memopt.reduce_sum" ins(%v : memref<8x4xbf16>) outs(%w : memref<4xf16>) with {dims = array<i64: 0>}
      return
    })mlir";
  EXPECT_FALSE(parseSourceString<ModuleOp>(rejectedKernel, &context));
  EXPECT_NE(diagnostics.find("element types bf16 (input #0 as in_dtype) and "
                             "f16 (output #0 as out_dtype) are rejected by "
                             "the runtime's memopt_reduce: result dtype f16 "
                             "is neither the input's (bf16) nor f32, and the "
                             "input is not f32"),
            std::string::npos)
      << diagnostics;
}

} // namespace
