//===- CostModel.cpp - FLOPs, bytes and roofline time of a step -----------===//
//
// A roofline model (Williams, Waterman and Patterson 2009) per op:
//
//   time(op) = max(flops / (peak · efficiency), bytes / (bandwidth · 0.8))
//              + launch overhead
//
// where the peak is the math mode's dense datasheet figure (FP32 on CUDA
// cores, TF32 or BF16/FP16 tensor cores for GEMMs) and a GEMM's efficiency
// falls with its smallest dimension (a saturating curve, d / (d + 64)),
// which is how smaller micro-batches cost time: the weight-gradient GEMMs
// contract over the micro-batch's tokens. The step is the sum over its ops,
// each counted as many times as the `scf.for` loops around it run, so
// recomputed ops and accumulation loops are costed by what they execute.
// O(n) for n ops. docs/Budget.md states and justifies every factor.
//
//===----------------------------------------------------------------------===//

#include "memopt/Analysis/CostModel.h"
#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"
#include "memopt/Dialect/Memopt/IR/MemoptOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Matchers.h"
#include "llvm/Support/CheckedArithmetic.h"

#include <algorithm>
#include <limits>

using namespace mlir;
using namespace memopt;

static constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();
static constexpr int64_t kGiB = int64_t(1) << 30;

static int64_t saturatingAdd(int64_t a, int64_t b) {
  return llvm::checkedAdd(a, b).value_or(kMaxInt64);
}

static int64_t saturatingMul(int64_t a, int64_t b) {
  return llvm::checkedMul(a, b).value_or(kMaxInt64);
}

//===----------------------------------------------------------------------===//
// Devices
//===----------------------------------------------------------------------===//

// Dense (no structured sparsity) peaks, memory and host-link bandwidth from
// the vendor datasheets cited in docs/Budget.md; memory is the datasheet's
// capacity read as GiB, a host link's bandwidth is one direction's.
static const DeviceProfile kDevices[] = {
    {"a100-40gb", "NVIDIA A100 40GB SXM4", 40 * kGiB, 19.5e12, 156e12, 312e12,
     1555e9, "PCIe 4.0 x16", 32e9},
    {"a100-80gb", "NVIDIA A100 80GB SXM4", 80 * kGiB, 19.5e12, 156e12, 312e12,
     2039e9, "PCIe 4.0 x16", 32e9},
    {"h100-80gb", "NVIDIA H100 80GB SXM5", 80 * kGiB, 67e12, 494.5e12,
     989.5e12, 3350e9, "PCIe 5.0 x16", 64e9},
    {"h200-141gb", "NVIDIA H200 141GB SXM", 141 * kGiB, 67e12, 494.5e12,
     989.5e12, 4800e9, "PCIe 5.0 x16", 64e9},
    {"gh200-96gb", "NVIDIA GH200 Grace Hopper Superchip 96GB", 96 * kGiB,
     67e12, 494.5e12, 989.5e12, 4000e9, "NVLink-C2C", 450e9},
    {"rtx4090-24gb", "NVIDIA GeForce RTX 4090 24GB", 24 * kGiB, 82.6e12,
     82.6e12, 165.2e12, 1008e9, "PCIe 4.0 x16", 32e9},
};

ArrayRef<DeviceProfile> memopt::getDeviceProfiles() { return kDevices; }

const DeviceProfile *memopt::lookupDeviceProfile(llvm::StringRef name) {
  for (const DeviceProfile &device : kDevices)
    if (device.name.equals_insensitive(name))
      return &device;
  return nullptr;
}

double memopt::estimateHostTransferSeconds(int64_t bytes,
                                           const DeviceProfile &device) {
  return device.hostLinkBandwidth > 0
             ? static_cast<double>(bytes) / device.hostLinkBandwidth
             : 0.0;
}

int64_t memopt::getDeviceReserveBytes(const DeviceProfile &device) {
  return kGiB + device.memoryBytes / 20;
}

int64_t memopt::getDefaultBudgetBytes(const DeviceProfile &device) {
  return std::max<int64_t>(0,
                           device.memoryBytes - getDeviceReserveBytes(device));
}

//===----------------------------------------------------------------------===//
// Per-op cost
//===----------------------------------------------------------------------===//

/// Elements of a statically shaped type (saturating), or 0.
static int64_t getNumElements(Type type) {
  auto shaped = dyn_cast<ShapedType>(type);
  if (!shaped || !shaped.hasStaticShape())
    return 0;
  int64_t count = 1;
  for (int64_t dim : shaped.getShape())
    count = saturatingMul(count, dim);
  return count;
}

/// Bytes of a statically shaped type (i1 counts a byte), or 0.
static int64_t getNumBytes(Type type) {
  auto shaped = dyn_cast<ShapedType>(type);
  if (!shaped || !shaped.hasStaticShape() ||
      !shaped.getElementType().isIntOrFloat())
    return 0;
  int64_t elementBytes =
      (shaped.getElementType().getIntOrFloatBitWidth() + 7) / 8;
  return saturatingMul(getNumElements(type), elementBytes);
}

int64_t memopt::getCopyBytes(ShapedType type) { return getNumBytes(type); }

static bool isLowPrecision(Type type) {
  auto shaped = dyn_cast<ShapedType>(type);
  return shaped && (shaped.getElementType().isF16() ||
                    shaped.getElementType().isBF16());
}

/// 2 · `outputs` · (elements per output channel of `filterLike`): the
/// multiply-adds of a convolution whose filter (or filter gradient) is
/// `filterLike`, `[O, C / groups, KH, KW]`, producing `outputs` elements of
/// the forward output's shape.
static int64_t getConvFlops(int64_t outputs, Type filterLike) {
  auto type = dyn_cast<ShapedType>(filterLike);
  if (!type || !type.hasStaticShape() || type.getRank() < 1 ||
      type.getDimSize(0) <= 0)
    return 0;
  int64_t perOutput = getNumElements(filterLike) / type.getDimSize(0);
  return saturatingMul(2, saturatingMul(outputs, perOutput));
}

/// A product's cost: [batch..., M, N] outputs, each a dot product of
/// length K.
static OpCost getMatmulCost(OpCost cost, TypeRange ins, TypeRange outs,
                            DictionaryAttr attrs) {
  auto lhs = dyn_cast<ShapedType>(ins[0]);
  auto rhs = dyn_cast<ShapedType>(ins[1]);
  auto out = dyn_cast<ShapedType>(outs[0]);
  if (!lhs || !lhs.hasStaticShape() || lhs.getRank() < 2 || !rhs || !out ||
      !out.hasStaticShape() || out.getRank() < 2)
    return cost;
  bool transposeLhs = attrs && attrs.get("transpose_lhs");
  int64_t k = lhs.getDimSize(lhs.getRank() - (transposeLhs ? 2 : 1));
  int64_t outputs = getNumElements(out);
  cost.flops = saturatingMul(2, saturatingMul(outputs, k));
  cost.isGemm = true;
  cost.lowPrecision = isLowPrecision(lhs) && isLowPrecision(rhs);
  int64_t n = out.getDimSize(out.getRank() - 1);
  int64_t m = out.getDimSize(out.getRank() - 2);
  // A shared (2-D) right operand makes the batch part of M: one GEMM.
  if (rhs.getRank() == 2 && n > 0)
    m = outputs / n;
  cost.gemmMinDim = std::min({m, n, k});
  return cost;
}

/// A convolution's cost; the gradients cost what the forward convolution
/// costs: for them `ins[0]` is the gradient of the forward output.
static OpCost getConvCost(OpCost cost, llvm::StringRef name, TypeRange ins,
                          TypeRange outs) {
  bool forward = isOpNamed<Conv2DOp>(name);
  Type filter = isOpNamed<Conv2DGradFilterOp>(name) ? outs[0] : ins[1];
  int64_t outputs = getNumElements(forward ? outs[0] : ins[0]);
  cost.flops = getConvFlops(outputs, filter);
  cost.isGemm = true;
  cost.lowPrecision = isLowPrecision(ins[0]) && isLowPrecision(ins[1]);
  // As an implicit GEMM: [N·OH·OW] x [C/g·KH·KW] x [O].
  auto filterType = cast<ShapedType>(filter);
  if (filterType.hasStaticShape() && filterType.getRank() >= 1 &&
      filterType.getDimSize(0) > 0) {
    int64_t channels = filterType.getDimSize(0);
    int64_t reduction = getNumElements(filter) / channels;
    cost.gemmMinDim = std::min({outputs / channels, channels, reduction});
  }
  return cost;
}

/// Fused attention: per (query, key) pair not skipped by causality, 2 D
/// for q k^T and 2 Dv for p v in the forward. The backward, as the CUDA
/// kernels run it (one pass for dq, one for dk and dv), computes q k^T twice
/// and dO v^T twice besides dq, dk and dv: 2 (4 D + 3 Dv), of which
/// 2 (2 D + Dv) recompute what the unfused ops would have stored.
static OpCost getAttentionCost(OpCost cost, llvm::StringRef name, TypeRange ins,
                               DictionaryAttr attrs) {
  auto q = dyn_cast<ShapedType>(ins[0]);
  auto k = dyn_cast<ShapedType>(ins[1]);
  auto v = dyn_cast<ShapedType>(ins[2]);
  if (!q || !k || !v || !q.hasStaticShape() || !k.hasStaticShape() ||
      !v.hasStaticShape() || q.getRank() < 2)
    return cost;
  int64_t rank = q.getRank();
  int64_t sq = q.getDimSize(rank - 2), d = q.getDimSize(rank - 1);
  int64_t sk = k.getDimSize(rank - 2), dv = v.getDimSize(rank - 1);
  int64_t problems = sq > 0 ? getNumElements(q) / (sq * d > 0 ? sq * d : 1) : 0;
  int64_t pairs = sq * sk;
  if (attrs && attrs.get("causal"))
    for (int64_t i = 0, masked = 0; i < sq; ++i, pairs -= masked)
      masked = std::max<int64_t>(sk - i - 1, 0);
  bool forward = isOpNamed<AttentionOp>(name);
  int64_t perPair = forward ? 2 * (d + dv) : 2 * (4 * d + 3 * dv);
  int64_t computed = saturatingMul(problems, pairs);
  cost.flops = saturatingMul(computed, perPair);
  if (!forward)
    cost.recomputeFlops = saturatingMul(computed, 2 * (2 * d + dv));
  cost.isGemm = true;
  cost.lowPrecision = isLowPrecision(q);
  cost.gemmMinDim = std::min({sq, sk, d});
  return cost;
}

/// The fused LM-head loss: rows x classes logits of width D, one product
/// in the forward; in the backward the logits again, then grad_x and
/// grad_w (none for an NF4 weight, whose shape is the `w_shape` attribute).
static OpCost getLinearLossCost(OpCost cost, llvm::StringRef name,
                                TypeRange ins, DictionaryAttr attrs) {
  auto x = dyn_cast<ShapedType>(ins[0]);
  auto w = dyn_cast<ShapedType>(ins[1]);
  auto nf4Shape =
      attrs ? attrs.getAs<DenseI64ArrayAttr>("w_shape") : DenseI64ArrayAttr();
  if (!x || !x.hasStaticShape() ||
      !(nf4Shape ? nf4Shape.size() == 2
                 : w && w.hasStaticShape() && w.getRank() == 2))
    return cost;
  int64_t products = saturatingMul(2, getNumElements(x)); // 2 rows D
  int64_t classes = nf4Shape ? nf4Shape[0] : w.getDimSize(0);
  int64_t logits = saturatingMul(products, classes);
  bool forward = isOpNamed<LinearCrossEntropyOp, Nf4LinearCrossEntropyOp>(name);
  cost.flops = saturatingMul(forward ? 1 : nf4Shape ? 2 : 3, logits);
  if (!forward)
    cost.recomputeFlops = logits;
  cost.isGemm = true;
  cost.lowPrecision = isLowPrecision(x);
  int64_t width = x.getRank() ? x.getDimSize(x.getRank() - 1) : 0;
  cost.gemmMinDim =
      std::min({width > 0 ? getNumElements(x) / width : 0, classes, width});
  return cost;
}

/// The NF4 product: the GEMM of its result (2 M N K), the weight's bytes
/// the packed ones; one chunk of the weight's columns at a time.
static OpCost getNf4MatmulCost(OpCost cost, TypeRange ins, TypeRange outs) {
  auto lhs = dyn_cast<ShapedType>(ins[0]);
  auto result = dyn_cast<ShapedType>(outs[0]);
  if (!lhs || !result || !lhs.hasStaticShape() || !result.hasStaticShape() ||
      lhs.getRank() < 2)
    return cost;
  int64_t k = lhs.getDimSize(lhs.getRank() - 1);
  cost.flops = saturatingMul(2, saturatingMul(getNumElements(result), k));
  cost.isGemm = true;
  cost.lowPrecision = isLowPrecision(lhs);
  int64_t m = k > 0 ? getNumElements(lhs) / k : 0;
  cost.gemmMinDim = std::min(
      {m, result.getDimSize(result.getRank() - 1), k});
  return cost;
}

/// The cost of the op `name` with operand types `ins`, result (or `outs`)
/// types `outs` and attributes `attrs`: the one place the formulas live.
/// Bytes are what the op reads and writes; the GEMM-like ops have their
/// FLOPs above, data movement none, and every other op one per element of
/// its largest operand or result.
static OpCost computeCost(llvm::StringRef name, TypeRange ins, TypeRange outs,
                          DictionaryAttr attrs) {
  OpCost cost;
  for (Type type : ins)
    cost.bytes = saturatingAdd(cost.bytes, getNumBytes(type));
  for (Type type : outs)
    cost.bytes = saturatingAdd(cost.bytes, getNumBytes(type));

  if (isOpNamed<MatmulOp>(name) && ins.size() == 2 && outs.size() == 1)
    return getMatmulCost(cost, ins, outs, attrs);
  if (isOpNamed<Nf4MatmulOp>(name) && ins.size() == 2 && !outs.empty())
    return getNf4MatmulCost(cost, ins, outs);
  if (ins.size() == 2 && outs.size() == 1 &&
      isOpNamed<Conv2DOp, Conv2DGradInputOp, Conv2DGradFilterOp>(name))
    return getConvCost(cost, name, ins, outs);
  if (isOpNamed<AttentionOp, AttentionGradOp>(name) && ins.size() >= 3)
    return getAttentionCost(cost, name, ins, attrs);
  if (isOpNamed<LinearCrossEntropyOp, LinearCrossEntropyGradOp,
                Nf4LinearCrossEntropyOp, Nf4LinearCrossEntropyGradOp>(name) &&
      ins.size() >= 2)
    return getLinearLossCost(cost, name, ins, attrs);

  if (isOpNamed<ConstantOp, ReshapeOp, TransposeOp, BroadcastOp, SliceOp,
                SliceGradOp, ConcatOp, EmbeddingOp, CastOp, IncrementOp>(name))
    return cost;
  int64_t largest = 0;
  for (Type type : ins)
    largest = std::max(largest, getNumElements(type));
  for (Type type : outs)
    largest = std::max(largest, getNumElements(type));
  cost.flops = largest;
  return cost;
}

OpCost memopt::getOpCost(Operation *op) {
  if (!op)
    return {};
  if (auto kernel = dyn_cast<KernelOp>(op))
    return computeCost(kernel.getKernel(), kernel.getIns().getTypes(),
                       kernel.getOuts().getTypes(), kernel.getOpAttributes());
  if (!isa<MemoptDialect>(op->getDialect()))
    return {};
  return computeCost(op->getName().getStringRef(), op->getOperandTypes(),
                     op->getResultTypes(), op->getAttrDictionary());
}

int64_t memopt::getKernelFlops(KernelOp kernel) {
  return getOpCost(kernel).flops;
}

//===----------------------------------------------------------------------===//
// Roofline
//===----------------------------------------------------------------------===//

double memopt::getGemmEfficiency(int64_t minDim,
                                 const CostModelOptions &options) {
  if (minDim <= 0)
    return options.gemmEfficiency;
  double d = static_cast<double>(minDim);
  return options.gemmEfficiency * d / (d + options.gemmHalfDim);
}

double memopt::estimateOpSeconds(const OpCost &cost,
                                 const DeviceProfile &device,
                                 const CostModelOptions &options) {
  if (cost.flops == 0 && cost.bytes == 0)
    return 0;
  double computeSeconds = 0;
  if (cost.flops > 0) {
    double rate;
    if (cost.isGemm) {
      double peak = cost.lowPrecision ? device.halfFlops
                    : options.fp32Math == Fp32MathMode::Tf32
                        ? device.tf32Flops
                        : device.fp32Flops;
      rate = peak * getGemmEfficiency(cost.gemmMinDim, options);
    } else {
      rate = device.fp32Flops * options.vectorEfficiency;
    }
    computeSeconds = static_cast<double>(cost.flops) / rate;
  }
  double memorySeconds = static_cast<double>(cost.bytes) /
                         (device.bandwidth * options.bandwidthEfficiency);
  return std::max(computeSeconds, memorySeconds) + options.launchSeconds;
}

double memopt::estimateRunSeconds(const OpCost &cost, bool onHost,
                                  const DeviceProfile &device,
                                  const CostModelOptions &options) {
  // The host streams the update's bytes at its memory bandwidth.
  if (onHost)
    return static_cast<double>(cost.bytes) / options.hostBandwidth;
  return estimateOpSeconds(cost, device, options);
}

/// The trip count of `loop` when its bounds and step are constants, else 1.
static int64_t getTripCount(scf::ForOp loop) {
  APInt lower, upper, step;
  if (!matchPattern(loop.getLowerBound(), m_ConstantInt(&lower)) ||
      !matchPattern(loop.getUpperBound(), m_ConstantInt(&upper)) ||
      !matchPattern(loop.getStep(), m_ConstantInt(&step)) ||
      step.getSExtValue() <= 0)
    return 1;
  int64_t span = upper.getSExtValue() - lower.getSExtValue();
  if (span <= 0)
    return 0;
  return (span + step.getSExtValue() - 1) / step.getSExtValue();
}

int64_t memopt::getRunsPerStep(Operation *op) {
  int64_t times = 1;
  for (auto loop = op->getParentOfType<scf::ForOp>(); loop;
       loop = loop->getParentOfType<scf::ForOp>())
    times = saturatingMul(times, getTripCount(loop));
  return times;
}

StepCost memopt::estimateStepCost(Operation *func, const DeviceProfile &device,
                                  const CostModelOptions &options) {
  StepCost step;
  // The asynchronous copies in flight (--memopt-overlap-transfers), by
  // slot: the seconds each still takes beyond the compute issued since its
  // start, which its wait adds to the step.
  llvm::DenseMap<int64_t, double> inFlight;
  auto overlap = [&](double seconds) {
    for (auto &entry : inFlight)
      entry.second = std::max(0.0, entry.second - seconds);
  };
  func->walk<WalkOrder::PreOrder>([&](Operation *op) {
    int64_t times = getRunsPerStep(op);
    if (auto wait = dyn_cast<TransferWaitOp>(op)) {
      auto found = inFlight.find(wait.getSlot());
      if (found == inFlight.end())
        return;
      double exposed = found->second * static_cast<double>(times);
      step.exposedTransferSeconds += exposed;
      step.seconds += exposed;
      inFlight.erase(found);
      return;
    }
    // A copy over the host link: its bytes at the link's bandwidth, and its
    // latency.
    auto kernel = dyn_cast<KernelOp>(op);
    if (isa<TransferOp>(op) ||
        (kernel && isOpNamed<TransferOp>(kernel.getKernel()))) {
      int64_t bytes = getCopyBytes(cast<ShapedType>(
          kernel ? kernel.getOuts()[0].getType() : op->getResult(0).getType()));
      double once = estimateHostTransferSeconds(bytes, device) +
                    options.transferLatencySeconds;
      double seconds = once * static_cast<double>(times);
      step.transferSeconds += seconds;
      step.transferBytes =
          saturatingAdd(step.transferBytes, saturatingMul(bytes, times));
      if (std::optional<int64_t> slot = getTransferSlot(op)) {
        // Copies share one stream: this one starts after those in flight.
        double queued = 0;
        for (auto &entry : inFlight)
          queued = std::max(queued, entry.second);
        inFlight[*slot] = queued + once;
        return;
      }
      step.exposedTransferSeconds += seconds;
      step.seconds += seconds;
      return;
    }
    OpCost cost = getOpCost(op);
    if (cost.flops == 0 && cost.bytes == 0)
      return;
    bool onHost = runsOnHost(op);
    double seconds = estimateRunSeconds(cost, onHost, device, options);
    overlap(seconds);
    if (onHost) {
      step.bytes = saturatingAdd(step.bytes, saturatingMul(cost.bytes, times));
      step.hostSeconds += seconds * static_cast<double>(times);
      step.seconds += seconds * static_cast<double>(times);
      return;
    }
    step.flops = saturatingAdd(step.flops, saturatingMul(cost.flops, times));
    step.bytes = saturatingAdd(step.bytes, saturatingMul(cost.bytes, times));
    step.numKernels = saturatingAdd(step.numKernels, times);
    step.seconds += seconds * static_cast<double>(times);
    if (cost.isGemm)
      step.gemmSeconds += seconds * static_cast<double>(times);
  });
  return step;
}
