// RUN: memopt-opt %s -split-input-file -memopt-test-print-cost -o /dev/null | FileCheck %s
// RUN: memopt-opt %s -split-input-file -memopt-test-print-cost=device=a100-40gb -o /dev/null | FileCheck %s --check-prefix=A100
// RUN: not memopt-opt %s -memopt-test-print-cost=device=v100 -o /dev/null 2>&1 | FileCheck %s --check-prefix=DEVICE

// The cost model on tensors, every figure by hand (H100: FP32 67 TFLOP/s,
// 3.35 TB/s; efficiency 0.75 d / (d + 64) for GEMMs, 0.5 for the rest, 80%
// of the bandwidth, 4 us per launch):
//   matmul [4,16,64] x [192,64]^T: 2 * 12288 * 64 = 1572864 FLOP, (4096 +
//     12288 + 12288) * 4 = 114688 B; M = 64 (batch folded), N = 192, K = 64,
//     efficiency 0.375: 62.6 ns of compute > 42.8 ns of memory, + 4 us.
//   add of 256 floats: 256 FLOP, 3072 B, memory-bound: 1.15 ns + 4 us; run 4
//     times by the loop.
//   reshape: no FLOPs, 2048 B: 0.76 ns + 4 us.
// Step: 1572864 + 4 * 256 FLOP, 114688 + 4 * 3072 + 2048 B, 6 kernels.

// CHECK-LABEL: cost of @step on h100-80gb:
// CHECK-NEXT:    op 0 memopt.matmul flops=1572864 bytes=114688 gemm min=64 seconds=4.0626e-06
// CHECK-NEXT:    op 1 memopt.add flops=256 bytes=3072 seconds=4.0011e-06
// CHECK-NEXT:    op 2 memopt.reshape flops=0 bytes=2048 seconds=4.0008e-06
// CHECK-NEXT:    step: flops=1573888 bytes=129024 kernels=6 seconds=2.4068e-05 gemm_seconds=4.0626e-06
// A100: cost of @step on a100-40gb:
// A100: op 0 memopt.matmul flops=1572864 bytes=114688 gemm min=64
func.func @step(%x: tensor<4x16x64xf32>, %w: tensor<192x64xf32>, %a: tensor<256xf32>) {
  %y = memopt.matmul %x, %w transpose_rhs : tensor<4x16x64xf32>, tensor<192x64xf32> -> tensor<4x16x192xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.for %i = %c0 to %c4 step %c1 {
    %b = memopt.add %a, %a : tensor<256xf32>
  }
  %r = memopt.reshape %a : tensor<256xf32> to tensor<16x16xf32>
  return
}

// -----

// A bufferized kernel costs what its tensor op costs (32x64 + 64x32 bf16 +
// 32x32 f32 = 12288 B); bf16 operands run on
// the tensor cores.
// CHECK-LABEL: cost of @kernels on h100-80gb:
// CHECK-NEXT:    op 0 memopt.kernel memopt.matmul flops=131072 bytes=12288 gemm low min=32 seconds=
// CHECK-NEXT:    step: flops=131072 bytes=12288 kernels=1
func.func @kernels(%a: memref<32x64xbf16>, %b: memref<64x32xbf16>, %c: memref<32x32xf32>) {
  memopt.kernel "memopt.matmul" ins(%a, %b : memref<32x64xbf16>, memref<64x32xbf16>) outs(%c : memref<32x32xf32>) with {}
  return
}

// DEVICE: error: --memopt-test-print-cost: unknown device 'v100'
