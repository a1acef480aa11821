//===- CostModel.h - FLOPs, bytes and roofline time of a step ----*- C++ -*-===//
//
// What a training step costs to run, without running it: the FLOPs and the
// bytes each op moves, named GPU profiles from vendor datasheets, and a
// roofline estimate of each op's time (max(flops / peak, bytes / bandwidth)
// with documented efficiency factors), summed over the step with the trip
// counts of the loops around each op. Good enough to rank combinations of
// techniques without a GPU; the figures and the model are in
// docs/Budget.md.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_ANALYSIS_COSTMODEL_H
#define MEMOPT_ANALYSIS_COSTMODEL_H

#include "mlir/IR/BuiltinTypeInterfaces.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>

namespace memopt {

class KernelOp;

//===----------------------------------------------------------------------===//
// Devices
//===----------------------------------------------------------------------===//

/// One GPU, by its datasheet: memory, dense peak throughput per math mode and
/// memory bandwidth. docs/Budget.md cites the source of every figure.
struct DeviceProfile {
  /// The name `--device=` accepts, e.g. "a100-40gb".
  llvm::StringRef name;
  /// The product, e.g. "NVIDIA A100 40GB SXM4".
  llvm::StringRef description;
  /// Device memory in bytes.
  int64_t memoryBytes = 0;
  /// Dense peak FLOP/s: FP32 on CUDA cores, TF32 and BF16/FP16 (FP32
  /// accumulation) on tensor cores.
  double fp32Flops = 0;
  double tf32Flops = 0;
  double halfFlops = 0;
  /// Memory bandwidth in bytes/s.
  double bandwidth = 0;
  /// The link to host memory ("PCIe 4.0 x16", "NVLink-C2C") and its
  /// bandwidth in bytes/s in each direction: what moving a tensor between
  /// device and host memory (offload) takes.
  llvm::StringRef hostLink;
  double hostLinkBandwidth = 0;
};

/// Seconds to move `bytes` between `device` and host memory, one way.
double estimateHostTransferSeconds(int64_t bytes, const DeviceProfile &device);

/// The bytes a copy of a value of `type` between the memories moves: its
/// elements at their storage size (at least one byte each), saturating at
/// INT64_MAX (a buffer that large is buffer planning's error to report);
/// 0 for a dynamic shape or an element type other than an integer or float.
int64_t getCopyBytes(mlir::ShapedType type);

/// Every known device profile, in the order --help lists them.
llvm::ArrayRef<DeviceProfile> getDeviceProfiles();

/// The profile named `name` (case-insensitive), or null.
const DeviceProfile *lookupDeviceProfile(llvm::StringRef name);

/// The bytes of device memory a step may not use: the CUDA context, the
/// cuBLASLt workspace and the allocator's slack. 1 GiB plus 5% of the
/// device's memory.
int64_t getDeviceReserveBytes(const DeviceProfile &device);

/// The default memory budget on `device`: its memory less the reserve.
int64_t getDefaultBudgetBytes(const DeviceProfile &device);

//===----------------------------------------------------------------------===//
// Per-op cost
//===----------------------------------------------------------------------===//

/// What one op (a memopt tensor op or a `memopt.kernel`) costs, once.
struct OpCost {
  /// Floating-point operations (a multiply-add counts 2).
  int64_t flops = 0;
  /// Bytes read (every operand) plus bytes written (every result or `outs`
  /// buffer).
  int64_t bytes = 0;
  /// Whether the op is a GEMM (matmul, convolution) that runs on the math
  /// units the precision selects; every other op runs at the FP32 rate.
  bool isGemm = false;
  /// Whether a GEMM's operands are f16 or bf16 (tensor cores, half peak).
  bool lowPrecision = false;
  /// A GEMM's smallest dimension (M with the batch folded in when the
  /// right operand is shared, N or K): what limits its efficiency.
  int64_t gemmMinDim = 0;
  /// The part of `flops` a fused backward spends recomputing forward values
  /// it never stored: the attention scores (memopt.attention_grad), the
  /// logits (memopt.linear_cross_entropy_grad).
  int64_t recomputeFlops = 0;
};

/// The cost of `op`: a `memopt.kernel` by the op it computes, a memopt
/// tensor op by itself, anything else (allocs, views, returns) zero.
OpCost getOpCost(mlir::Operation *op);

/// How many times `op` runs in one step: the product of the trip counts of
/// the `scf.for` loops around it (a loop of non-constant bounds counts
/// once).
int64_t getRunsPerStep(mlir::Operation *op);

/// The FLOPs of one kernel, by the op it computes: 2·M·N·K for a matmul
/// (times the batch), 2 · output elements · (C/groups · KH · KW) for a 2-D
/// convolution and both its gradients, 0 for kernels that only move or
/// create data (reshape, transpose, broadcast, slice, concat, embedding,
/// constant, cast, increment), and the element count of the largest operand
/// for every other (elementwise, reduction, normalization, loss, optimizer)
/// kernel. Saturates at INT64_MAX.
int64_t getKernelFlops(KernelOp kernel);

//===----------------------------------------------------------------------===//
// Roofline
//===----------------------------------------------------------------------===//

/// How GEMMs in FP32 operands run: on CUDA cores (PyTorch's default since
/// 1.12) or as TF32 on tensor cores.
enum class Fp32MathMode { Fp32, Tf32 };

/// The efficiency factors of the roofline estimate (docs/Budget.md says
/// where each comes from).
struct CostModelOptions {
  /// Fraction of the dense peak a large GEMM reaches.
  double gemmEfficiency = 0.75;
  /// The GEMM dimension at which efficiency is half of gemmEfficiency:
  /// efficiency(d) = gemmEfficiency · d / (d + gemmHalfDim).
  double gemmHalfDim = 64;
  /// Fraction of the FP32 peak an elementwise or reduction kernel's
  /// arithmetic reaches (it is nearly always bandwidth-bound anyway).
  double vectorEfficiency = 0.5;
  /// Fraction of the datasheet bandwidth a streaming kernel reaches.
  double bandwidthEfficiency = 0.8;
  /// Fixed cost of one kernel launch, in seconds.
  double launchSeconds = 4e-6;
  /// Fixed cost of one copy over the host link, in seconds: its launch and
  /// the wait for it (memopt_transfer returns when the copy is complete),
  /// what a small pinned cudaMemcpyAsync and a stream synchronize take.
  double transferLatencySeconds = 10e-6;
  /// FP32 GEMMs on CUDA cores or as TF32.
  Fp32MathMode fp32Math = Fp32MathMode::Fp32;
  /// Optimizer offload: the bytes per second the host's optimizer update
  /// streams (a server CPU's DRAM bandwidth, about what 16 cores sustain).
  double hostBandwidth = 50e9;
};

/// The efficiency of a GEMM whose smallest dimension is `minDim`.
double getGemmEfficiency(int64_t minDim, const CostModelOptions &options);

/// The roofline time of `cost` on `device`, in seconds: the larger of its
/// compute time and its memory time, plus the launch overhead. Zero for an
/// op that neither computes nor moves data.
double estimateOpSeconds(const OpCost &cost, const DeviceProfile &device,
                         const CostModelOptions &options = {});

/// The seconds one run of an op of cost `cost` takes where it runs: on the
/// host (`onHost`, memopt.on_host) its bytes at
/// CostModelOptions::hostBandwidth, else its roofline time on `device`.
double estimateRunSeconds(const OpCost &cost, bool onHost,
                          const DeviceProfile &device,
                          const CostModelOptions &options = {});

/// The cost of a whole step (a function after any pass of the pipeline).
struct StepCost {
  /// FLOPs and bytes executed: each op's count times the trip count of the
  /// `scf.for` loops around it (1 for a loop of unknown trip count).
  int64_t flops = 0;
  int64_t bytes = 0;
  /// Ops that cost anything, executed.
  int64_t numKernels = 0;
  /// Estimated seconds: the sum of the ops' roofline times.
  double seconds = 0;
  /// The part of `seconds` spent in GEMMs.
  double gemmSeconds = 0;
  /// Offload: the seconds the copies take on the host link
  /// (`memopt.transfer`, one way each, on the device's link, with its
  /// latency; hidden behind compute in part when asynchronous), the part
  /// of `seconds` spent in the ops that run on the host (at
  /// CostModelOptions::hostBandwidth), and the bytes the copies move.
  double transferSeconds = 0;
  double hostSeconds = 0;
  /// The part of `seconds` the device waits for copies: a synchronous
  /// copy's whole time, an asynchronous one's (--memopt-overlap-transfers)
  /// beyond the compute issued between its start and its wait.
  double exposedTransferSeconds = 0;
  int64_t transferBytes = 0;
};

/// Estimates `func` on `device`.
StepCost estimateStepCost(mlir::Operation *func, const DeviceProfile &device,
                          const CostModelOptions &options = {});

} // namespace memopt

#endif // MEMOPT_ANALYSIS_COSTMODEL_H
