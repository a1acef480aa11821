//===- QuantizeFrozen.cpp - frozen matmul weights in NF4 ------------------===//
//
// QLoRA's storage of a fine-tune's frozen base (docs/Quantization.md): a
// frozen argument that the loss function reads only as the right-hand
// matrix of memopt.matmul or as the weight of the fused LM-head loss becomes
// the i8 tensor of its NF4-packed bytes, marked memopt.nf4_of with its
// shape, and each of its users the NF4 form: memopt.nf4_matmul,
// memopt.nf4_linear_cross_entropy. Everything else the weight would need (a
// gradient, a master copy, optimizer state) a frozen argument already
// lacks, so the rewrite is local: the argument's type and its users.
// Autodiff then differentiates the NF4 ops for their other operands only.
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"
#include "memopt/Dialect/Memopt/IR/MemoptOps.h"
#include "memopt/Dialect/Memopt/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace memopt {
#define GEN_PASS_DEF_QUANTIZEFROZENPASS
#include "memopt/Dialect/Memopt/Transforms/Passes.h.inc"
} // namespace memopt

using namespace mlir;
using namespace memopt;

namespace {
struct QuantizeFrozenPass
    : public memopt::impl::QuantizeFrozenPassBase<QuantizeFrozenPass> {
  using Base::Base;

  void runOnOperation() override;
};
} // namespace

/// Whether `user` reads `weight` as the right-hand matrix of a product that
/// memopt.nf4_matmul computes (not transposed on the left, the result in
/// the operands' element type) or as the weight of a fused LM-head loss.
static bool isQuantizableUse(Operation *user, Value weight) {
  if (auto loss = dyn_cast<LinearCrossEntropyOp>(user))
    return loss.getW() == weight &&
           llvm::count(loss->getOperands(), weight) == 1;
  auto matmul = dyn_cast<MatmulOp>(user);
  return matmul && matmul.getRhs() == weight && matmul.getLhs() != weight &&
         !matmul.getTransposeLhs() &&
         matmul.getType().getElementType() ==
             matmul.getLhs().getType().getElementType();
}

/// Replaces `user` of the now packed `weight` of shape `shape` by its NF4
/// form.
static void rewriteUse(Operation *user, Value weight, ArrayRef<int64_t> shape) {
  OpBuilder builder(user);
  Operation *replacement;
  if (auto loss = dyn_cast<LinearCrossEntropyOp>(user)) {
    replacement = Nf4LinearCrossEntropyOp::create(
        builder, loss.getLoc(), loss->getResultTypes(), loss.getX(), weight,
        shape, loss.getLabels(), loss.getBias(), loss.getChunk(),
        loss.getIgnoreIndex(), loss.getReduction());
  } else {
    auto matmul = cast<MatmulOp>(user);
    replacement = Nf4MatmulOp::create(builder, matmul.getLoc(),
                                      matmul.getType(), matmul.getLhs(),
                                      weight, shape, matmul.getTransposeRhs());
  }
  replacement->setDiscardableAttrs(user->getDiscardableAttrDictionary());
  user->replaceAllUsesWith(replacement->getResults());
  user->erase();
}

/// Whether argument `index` of `loss` is a frozen weight to store in NF4.
static bool isQuantizable(func::FuncOp loss, unsigned index) {
  auto role =
      loss.getArgAttrOfType<StringAttr>(index, MemoptDialect::kRoleAttrName);
  BlockArgument arg = loss.getArgument(index);
  auto type = dyn_cast<RankedTensorType>(arg.getType());
  return role &&
         role.getValue() == stringifyArgumentRole(ArgumentRole::Frozen) &&
         type && type.getRank() == 2 && !arg.use_empty() &&
         llvm::all_of(arg.getUsers(), [&](Operation *user) {
           return isQuantizableUse(user, arg);
         });
}

void QuantizeFrozenPass::runOnOperation() {
  ModuleOp module = getOperation();
  FailureOr<FunctionOpInterface> found =
      findLossFunction(module, "--memopt-quantize-frozen");
  auto loss = succeeded(found) ? dyn_cast<func::FuncOp>(found->getOperation())
                               : func::FuncOp();
  if (!loss)
    return signalPassFailure();
  SmallVector<Type> argTypes(loss.getArgumentTypes());
  unsigned quantized = 0;
  for (unsigned i = 0; i < loss.getNumArguments(); ++i) {
    if (!isQuantizable(loss, i))
      continue;
    BlockArgument arg = loss.getArgument(i);
    auto type = cast<RankedTensorType>(arg.getType());
    auto packed = RankedTensorType::get(
        {static_cast<int64_t>(
            memopt_nf4_packed_bytes(type.getNumElements()))},
        IntegerType::get(&getContext(), 8));
    SmallVector<Operation *> users(arg.getUsers());
    arg.setType(packed);
    argTypes[i] = packed;
    loss.setArgAttr(i, MemoptDialect::kNf4OfAttrName,
                    DenseI64ArrayAttr::get(&getContext(), type.getShape()));
    for (Operation *user : users)
      rewriteUse(user, arg, type.getShape());
    ++quantized;
  }
  if (quantized)
    loss.setFunctionType(FunctionType::get(&getContext(), argTypes,
                                           loss.getResultTypes()));
  numQuantized = quantized;
}
