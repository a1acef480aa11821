//===- QuantizeMath.h - 8-bit optimizer state formulas ----------*- C++ -*-===//
//
// AdamW with its moments stored in 8 bits (Dettmers et al., "8-bit
// Optimizers via Block-wise Quantization", 2022), written once for the host
// loops and the CUDA kernels.
//
// Each moment of a parameter of N elements is one byte tensor, "packed":
// one record of 4 + B bytes per block of B elements,
//
//   [b (4 + B), + 4)        the f32 absmax of block b
//   [b (4 + B) + 4, + B)    one code per element of the block (past N in
//                           the last block: the code of 0)
//
// and element i holds code[c_i] * absmax[i / B], code the dynamic code:
// 256 values sorted ascending, in 7 decades 10^-6 .. 10^0, decade d holding
// the midpoints of 2^d equal steps of [0.1, 1] (both signs: the first
// moment) or 2^(d+1) steps (non-negative: the second), and 0 and 1. A
// block's update dequantizes its B elements, runs AdamW in f32 exactly as
// the 32-bit update (OptimizerMath.h), takes the new absmax of each moment
// and quantizes each element to the nearest code (the lower on a tie).
// B = 256: a 2 KiB block of torchao's choice rather than the paper's 2048,
// so that one outlier widens the step of 255 neighbours, not 2047; its
// absmaxes cost 4 / 256 bytes per element. A block's record is contiguous,
// so the moment of any run of whole blocks is a contiguous run of bytes:
// ZeRO's shard of a moment (docs/DataParallel.md) is a byte range of the
// whole tensor, as an f32 moment's is.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_QUANTIZEMATH_H
#define MEMOPT_RUNTIME_QUANTIZEMATH_H

#include "memopt/runtime/HostDevice.h"
#include "memopt/runtime/OptimizerMath.h"

#include <cmath>
#include <cstdint>

namespace memopt {
namespace runtime {

/// Elements per block of quantized optimizer state.
constexpr int64_t kQuantBlock = 256;

/// Parameters below this many elements keep 32-bit state (their state is
/// small, and the blocks' rounding costs them the most).
constexpr int64_t kQuantMinElements = 4096;

/// Blocks of a moment of `n` elements.
MEMOPT_HOST_DEVICE constexpr int64_t quantizedBlocks(int64_t n) {
  return (n + kQuantBlock - 1) / kQuantBlock;
}

/// Bytes of the record of one block: its absmax, then its codes.
constexpr int64_t kQuantRecordBytes = 4 + kQuantBlock;

/// Bytes of one packed moment of `n` elements.
MEMOPT_HOST_DEVICE constexpr int64_t quantizedStateBytes(int64_t n) {
  return kQuantRecordBytes * quantizedBlocks(n);
}

/// The record of block `b` of a packed moment: its absmax (f32, 4-byte
/// aligned when the moment is) and then its codes.
MEMOPT_HOST_DEVICE inline float *quantizedAbsmax(uint8_t *packed, int64_t b) {
  return reinterpret_cast<float *>(packed + b * kQuantRecordBytes);
}
MEMOPT_HOST_DEVICE inline const float *quantizedAbsmax(const uint8_t *packed,
                                                       int64_t b) {
  return reinterpret_cast<const float *>(packed + b * kQuantRecordBytes);
}
MEMOPT_HOST_DEVICE inline uint8_t *quantizedCodes(uint8_t *packed, int64_t b) {
  return packed + b * kQuantRecordBytes + 4;
}
MEMOPT_HOST_DEVICE inline const uint8_t *quantizedCodes(const uint8_t *packed,
                                                        int64_t b) {
  return packed + b * kQuantRecordBytes + 4;
}

/// The dynamic codes, ascending: signed (the first moment) and
/// non-negative (the second).
#define MEMOPT_DYNAMIC_SIGNED_CODE                                             \
  {                                                                            \
    -0x1.fc66660000000p-1f, -0x1.f533340000000p-1f, -0x1.ee00000000000p-1f, -0x1.e6cccc0000000p-1f, \
    -0x1.df999a0000000p-1f, -0x1.d866660000000p-1f, -0x1.d133340000000p-1f, -0x1.ca00000000000p-1f, \
    -0x1.c2cccc0000000p-1f, -0x1.bb999a0000000p-1f, -0x1.b466660000000p-1f, -0x1.ad33340000000p-1f, \
    -0x1.a600000000000p-1f, -0x1.9ecccc0000000p-1f, -0x1.97999a0000000p-1f, -0x1.9066660000000p-1f, \
    -0x1.8933340000000p-1f, -0x1.8200000000000p-1f, -0x1.7acccc0000000p-1f, -0x1.73999a0000000p-1f, \
    -0x1.6c66660000000p-1f, -0x1.6533340000000p-1f, -0x1.5e00000000000p-1f, -0x1.56cccc0000000p-1f, \
    -0x1.4f999a0000000p-1f, -0x1.4866660000000p-1f, -0x1.4133340000000p-1f, -0x1.3a00000000000p-1f, \
    -0x1.32cccc0000000p-1f, -0x1.2b999a0000000p-1f, -0x1.2466660000000p-1f, -0x1.1d33340000000p-1f, \
    -0x1.1600000000000p-1f, -0x1.0ecccc0000000p-1f, -0x1.07999a0000000p-1f, -0x1.0066660000000p-1f, \
    -0x1.f266660000000p-2f, -0x1.e400000000000p-2f, -0x1.d5999a0000000p-2f, -0x1.c733340000000p-2f, \
    -0x1.b8cccc0000000p-2f, -0x1.aa66660000000p-2f, -0x1.9c00000000000p-2f, -0x1.8d999a0000000p-2f, \
    -0x1.7f33340000000p-2f, -0x1.70cccc0000000p-2f, -0x1.6266660000000p-2f, -0x1.5400000000000p-2f, \
    -0x1.45999a0000000p-2f, -0x1.3733340000000p-2f, -0x1.28cccc0000000p-2f, -0x1.1a66660000000p-2f, \
    -0x1.0c00000000000p-2f, -0x1.fb33340000000p-3f, -0x1.de66660000000p-3f, -0x1.c1999a0000000p-3f, \
    -0x1.a4cccc0000000p-3f, -0x1.8800000000000p-3f, -0x1.6b33340000000p-3f, -0x1.4e66660000000p-3f, \
    -0x1.31999a0000000p-3f, -0x1.14cccc0000000p-3f, -0x1.f000000000000p-4f, -0x1.b666660000000p-4f, \
    -0x1.93d70a0000000p-4f, -0x1.8851ec0000000p-4f, -0x1.7ccccc0000000p-4f, -0x1.7147ae0000000p-4f, \
    -0x1.65c2900000000p-4f, -0x1.5a3d700000000p-4f, -0x1.4eb8520000000p-4f, -0x1.4333340000000p-4f, \
    -0x1.37ae140000000p-4f, -0x1.2c28f60000000p-4f, -0x1.20a3d80000000p-4f, -0x1.151eb80000000p-4f, \
    -0x1.09999a0000000p-4f, -0x1.fc28f60000000p-5f, -0x1.e51eb80000000p-5f, -0x1.ce147a0000000p-5f, \
    -0x1.b70a3e0000000p-5f, -0x1.a000000000000p-5f, -0x1.88f5c20000000p-5f, -0x1.71eb860000000p-5f, \
    -0x1.5ae1480000000p-5f, -0x1.43d70a0000000p-5f, -0x1.2ccccc0000000p-5f, -0x1.15c2900000000p-5f, \
    -0x1.fd70a40000000p-6f, -0x1.cf5c280000000p-6f, -0x1.a147ae0000000p-6f, -0x1.7333340000000p-6f, \
    -0x1.451eb80000000p-6f, -0x1.170a3e0000000p-6f, -0x1.d1eb860000000p-7f, -0x1.75c2900000000p-7f, \
    -0x1.3e76c80000000p-7f, -0x1.2c08320000000p-7f, -0x1.19999a0000000p-7f, -0x1.072b020000000p-7f, \
    -0x1.e978d40000000p-8f, -0x1.c49ba60000000p-8f, -0x1.9fbe760000000p-8f, -0x1.7ae1480000000p-8f, \
    -0x1.5604180000000p-8f, -0x1.3126ea0000000p-8f, -0x1.0c49ba0000000p-8f, -0x1.ced9160000000p-9f, \
    -0x1.851eb80000000p-9f, -0x1.3b645a0000000p-9f, -0x1.e353f80000000p-10f, -0x1.4fdf3c0000000p-10f, \
    -0x1.eecbfc0000000p-11f, -0x1.b3d07c0000000p-11f, -0x1.78d4fe0000000p-11f, -0x1.3dd9800000000p-11f, \
    -0x1.02de000000000p-11f, -0x1.8fc5040000000p-12f, -0x1.19ce080000000p-12f, -0x1.47ae140000000p-13f, \
    -0x1.743e960000000p-14f, -0x1.15df660000000p-14f, -0x1.6f00680000000p-15f, -0x1.64840e0000000p-16f, \
    -0x1.040bfe0000000p-17f, -0x1.b435260000000p-19f, -0x1.27476c0000000p-21f, 0x0.0p+0f, \
    0x1.27476c0000000p-21f, 0x1.b435260000000p-19f, 0x1.040bfe0000000p-17f, 0x1.64840e0000000p-16f, \
    0x1.6f00680000000p-15f, 0x1.15df660000000p-14f, 0x1.743e960000000p-14f, 0x1.47ae140000000p-13f, \
    0x1.19ce080000000p-12f, 0x1.8fc5040000000p-12f, 0x1.02de000000000p-11f, 0x1.3dd9800000000p-11f, \
    0x1.78d4fe0000000p-11f, 0x1.b3d07c0000000p-11f, 0x1.eecbfc0000000p-11f, 0x1.4fdf3c0000000p-10f, \
    0x1.e353f80000000p-10f, 0x1.3b645a0000000p-9f, 0x1.851eb80000000p-9f, 0x1.ced9160000000p-9f, \
    0x1.0c49ba0000000p-8f, 0x1.3126ea0000000p-8f, 0x1.5604180000000p-8f, 0x1.7ae1480000000p-8f, \
    0x1.9fbe760000000p-8f, 0x1.c49ba60000000p-8f, 0x1.e978d40000000p-8f, 0x1.072b020000000p-7f, \
    0x1.19999a0000000p-7f, 0x1.2c08320000000p-7f, 0x1.3e76c80000000p-7f, 0x1.75c2900000000p-7f, \
    0x1.d1eb860000000p-7f, 0x1.170a3e0000000p-6f, 0x1.451eb80000000p-6f, 0x1.7333340000000p-6f, \
    0x1.a147ae0000000p-6f, 0x1.cf5c280000000p-6f, 0x1.fd70a40000000p-6f, 0x1.15c2900000000p-5f, \
    0x1.2ccccc0000000p-5f, 0x1.43d70a0000000p-5f, 0x1.5ae1480000000p-5f, 0x1.71eb860000000p-5f, \
    0x1.88f5c20000000p-5f, 0x1.a000000000000p-5f, 0x1.b70a3e0000000p-5f, 0x1.ce147a0000000p-5f, \
    0x1.e51eb80000000p-5f, 0x1.fc28f60000000p-5f, 0x1.09999a0000000p-4f, 0x1.151eb80000000p-4f, \
    0x1.20a3d80000000p-4f, 0x1.2c28f60000000p-4f, 0x1.37ae140000000p-4f, 0x1.4333340000000p-4f, \
    0x1.4eb8520000000p-4f, 0x1.5a3d700000000p-4f, 0x1.65c2900000000p-4f, 0x1.7147ae0000000p-4f, \
    0x1.7ccccc0000000p-4f, 0x1.8851ec0000000p-4f, 0x1.93d70a0000000p-4f, 0x1.b666660000000p-4f, \
    0x1.f000000000000p-4f, 0x1.14cccc0000000p-3f, 0x1.31999a0000000p-3f, 0x1.4e66660000000p-3f, \
    0x1.6b33340000000p-3f, 0x1.8800000000000p-3f, 0x1.a4cccc0000000p-3f, 0x1.c1999a0000000p-3f, \
    0x1.de66660000000p-3f, 0x1.fb33340000000p-3f, 0x1.0c00000000000p-2f, 0x1.1a66660000000p-2f, \
    0x1.28cccc0000000p-2f, 0x1.3733340000000p-2f, 0x1.45999a0000000p-2f, 0x1.5400000000000p-2f, \
    0x1.6266660000000p-2f, 0x1.70cccc0000000p-2f, 0x1.7f33340000000p-2f, 0x1.8d999a0000000p-2f, \
    0x1.9c00000000000p-2f, 0x1.aa66660000000p-2f, 0x1.b8cccc0000000p-2f, 0x1.c733340000000p-2f, \
    0x1.d5999a0000000p-2f, 0x1.e400000000000p-2f, 0x1.f266660000000p-2f, 0x1.0066660000000p-1f, \
    0x1.07999a0000000p-1f, 0x1.0ecccc0000000p-1f, 0x1.1600000000000p-1f, 0x1.1d33340000000p-1f, \
    0x1.2466660000000p-1f, 0x1.2b999a0000000p-1f, 0x1.32cccc0000000p-1f, 0x1.3a00000000000p-1f, \
    0x1.4133340000000p-1f, 0x1.4866660000000p-1f, 0x1.4f999a0000000p-1f, 0x1.56cccc0000000p-1f, \
    0x1.5e00000000000p-1f, 0x1.6533340000000p-1f, 0x1.6c66660000000p-1f, 0x1.73999a0000000p-1f, \
    0x1.7acccc0000000p-1f, 0x1.8200000000000p-1f, 0x1.8933340000000p-1f, 0x1.9066660000000p-1f, \
    0x1.97999a0000000p-1f, 0x1.9ecccc0000000p-1f, 0x1.a600000000000p-1f, 0x1.ad33340000000p-1f, \
    0x1.b466660000000p-1f, 0x1.bb999a0000000p-1f, 0x1.c2cccc0000000p-1f, 0x1.ca00000000000p-1f, \
    0x1.d133340000000p-1f, 0x1.d866660000000p-1f, 0x1.df999a0000000p-1f, 0x1.e6cccc0000000p-1f, \
    0x1.ee00000000000p-1f, 0x1.f533340000000p-1f, 0x1.fc66660000000p-1f, 0x1.0000000000000p+0f, \
  }
#define MEMOPT_DYNAMIC_UNSIGNED_CODE                                           \
  {                                                                            \
    0x0.0p+0f, 0x1.5cf7520000000p-22f, 0x1.a013300000000p-21f, 0x1.1d36720000000p-19f, \
    0x1.2599ee0000000p-18f, 0x1.bc98a20000000p-18f, 0x1.29cbac0000000p-17f, 0x1.0624de0000000p-16f, \
    0x1.c2e33e0000000p-16f, 0x1.3fd0d00000000p-15f, 0x1.9e30020000000p-15f, 0x1.fc8f320000000p-15f, \
    0x1.2d77320000000p-14f, 0x1.5ca6ca0000000p-14f, 0x1.8bd6620000000p-14f, 0x1.0cb2960000000p-13f, \
    0x1.82a9940000000p-13f, 0x1.f8a0900000000p-13f, 0x1.374bc60000000p-12f, 0x1.7247460000000p-12f, \
    0x1.ad42c40000000p-12f, 0x1.e83e420000000p-12f, 0x1.119ce00000000p-11f, 0x1.2f1aa00000000p-11f, \
    0x1.4c98600000000p-11f, 0x1.6a161e0000000p-11f, 0x1.8793de0000000p-11f, 0x1.a5119c0000000p-11f, \
    0x1.c28f5c0000000p-11f, 0x1.e00d1c0000000p-11f, 0x1.fd8ada0000000p-11f, 0x1.2b020c0000000p-10f, \
    0x1.74bc6a0000000p-10f, 0x1.be76c80000000p-10f, 0x1.0418940000000p-9f, 0x1.28f5c20000000p-9f, \
    0x1.4dd2f20000000p-9f, 0x1.72b0200000000p-9f, 0x1.978d500000000p-9f, 0x1.bc6a7e0000000p-9f, \
    0x1.e147ae0000000p-9f, 0x1.03126e0000000p-8f, 0x1.1581060000000p-8f, 0x1.27ef9e0000000p-8f, \
    0x1.3a5e360000000p-8f, 0x1.4ccccc0000000p-8f, 0x1.5f3b640000000p-8f, 0x1.71a9fc0000000p-8f, \
    0x1.8418940000000p-8f, 0x1.96872c0000000p-8f, 0x1.a8f5c20000000p-8f, 0x1.bb645a0000000p-8f, \
    0x1.cdd2f20000000p-8f, 0x1.e0418a0000000p-8f, 0x1.f2b0200000000p-8f, 0x1.028f5c0000000p-7f, \
    0x1.0bc6a80000000p-7f, 0x1.14fdf40000000p-7f, 0x1.1e35400000000p-7f, 0x1.276c8c0000000p-7f, \
    0x1.30a3d80000000p-7f, 0x1.39db220000000p-7f, 0x1.43126e0000000p-7f, 0x1.5eb8520000000p-7f, \
    0x1.8ccccc0000000p-7f, 0x1.bae1480000000p-7f, 0x1.e8f5c20000000p-7f, 0x1.0b851e0000000p-6f, \
    0x1.228f5c0000000p-6f, 0x1.39999a0000000p-6f, 0x1.50a3d80000000p-6f, 0x1.67ae140000000p-6f, \
    0x1.7eb8520000000p-6f, 0x1.95c2900000000p-6f, 0x1.accccc0000000p-6f, 0x1.c3d70a0000000p-6f, \
    0x1.dae1480000000p-6f, 0x1.f1eb860000000p-6f, 0x1.047ae20000000p-5f, 0x1.1000000000000p-5f, \
    0x1.1b851e0000000p-5f, 0x1.270a3e0000000p-5f, 0x1.328f5c0000000p-5f, 0x1.3e147a0000000p-5f, \
    0x1.49999a0000000p-5f, 0x1.551eb80000000p-5f, 0x1.60a3d80000000p-5f, 0x1.6c28f60000000p-5f, \
    0x1.77ae140000000p-5f, 0x1.8333340000000p-5f, 0x1.8eb8520000000p-5f, 0x1.9a3d700000000p-5f, \
    0x1.a5c2900000000p-5f, 0x1.b147ae0000000p-5f, 0x1.bccccc0000000p-5f, 0x1.c851ec0000000p-5f, \
    0x1.d3d70a0000000p-5f, 0x1.df5c280000000p-5f, 0x1.eae1480000000p-5f, 0x1.f666660000000p-5f, \
    0x1.00f5c20000000p-4f, 0x1.06b8520000000p-4f, 0x1.0c7ae20000000p-4f, 0x1.123d700000000p-4f, \
    0x1.1800000000000p-4f, 0x1.1dc2900000000p-4f, 0x1.23851e0000000p-4f, 0x1.2947ae0000000p-4f, \
    0x1.2f0a3e0000000p-4f, 0x1.34cccc0000000p-4f, 0x1.3a8f5c0000000p-4f, 0x1.4051ec0000000p-4f, \
    0x1.46147a0000000p-4f, 0x1.4bd70a0000000p-4f, 0x1.51999a0000000p-4f, 0x1.575c280000000p-4f, \
    0x1.5d1eb80000000p-4f, 0x1.62e1480000000p-4f, 0x1.68a3d80000000p-4f, 0x1.6e66660000000p-4f, \
    0x1.7428f60000000p-4f, 0x1.79eb860000000p-4f, 0x1.7fae140000000p-4f, 0x1.8570a40000000p-4f, \
    0x1.8b33340000000p-4f, 0x1.90f5c20000000p-4f, 0x1.96b8520000000p-4f, 0x1.a800000000000p-4f, \
    0x1.c4cccc0000000p-4f, 0x1.e1999a0000000p-4f, 0x1.fe66660000000p-4f, 0x1.0d999a0000000p-3f, \
    0x1.1c00000000000p-3f, 0x1.2a66660000000p-3f, 0x1.38cccc0000000p-3f, 0x1.4733340000000p-3f, \
    0x1.55999a0000000p-3f, 0x1.6400000000000p-3f, 0x1.7266660000000p-3f, 0x1.80cccc0000000p-3f, \
    0x1.8f33340000000p-3f, 0x1.9d999a0000000p-3f, 0x1.ac00000000000p-3f, 0x1.ba66660000000p-3f, \
    0x1.c8cccc0000000p-3f, 0x1.d733340000000p-3f, 0x1.e5999a0000000p-3f, 0x1.f400000000000p-3f, \
    0x1.0133340000000p-2f, 0x1.0866660000000p-2f, 0x1.0f999a0000000p-2f, 0x1.16cccc0000000p-2f, \
    0x1.1e00000000000p-2f, 0x1.2533340000000p-2f, 0x1.2c66660000000p-2f, 0x1.33999a0000000p-2f, \
    0x1.3acccc0000000p-2f, 0x1.4200000000000p-2f, 0x1.4933340000000p-2f, 0x1.5066660000000p-2f, \
    0x1.57999a0000000p-2f, 0x1.5ecccc0000000p-2f, 0x1.6600000000000p-2f, 0x1.6d33340000000p-2f, \
    0x1.7466660000000p-2f, 0x1.7b999a0000000p-2f, 0x1.82cccc0000000p-2f, 0x1.8a00000000000p-2f, \
    0x1.9133340000000p-2f, 0x1.9866660000000p-2f, 0x1.9f999a0000000p-2f, 0x1.a6cccc0000000p-2f, \
    0x1.ae00000000000p-2f, 0x1.b533340000000p-2f, 0x1.bc66660000000p-2f, 0x1.c3999a0000000p-2f, \
    0x1.cacccc0000000p-2f, 0x1.d200000000000p-2f, 0x1.d933340000000p-2f, 0x1.e066660000000p-2f, \
    0x1.e7999a0000000p-2f, 0x1.eecccc0000000p-2f, 0x1.f600000000000p-2f, 0x1.fd33340000000p-2f, \
    0x1.0233340000000p-1f, 0x1.05cccc0000000p-1f, 0x1.0966660000000p-1f, 0x1.0d00000000000p-1f, \
    0x1.10999a0000000p-1f, 0x1.1433340000000p-1f, 0x1.17cccc0000000p-1f, 0x1.1b66660000000p-1f, \
    0x1.1f00000000000p-1f, 0x1.22999a0000000p-1f, 0x1.2633340000000p-1f, 0x1.29cccc0000000p-1f, \
    0x1.2d66660000000p-1f, 0x1.3100000000000p-1f, 0x1.34999a0000000p-1f, 0x1.3833340000000p-1f, \
    0x1.3bcccc0000000p-1f, 0x1.3f66660000000p-1f, 0x1.4300000000000p-1f, 0x1.46999a0000000p-1f, \
    0x1.4a33340000000p-1f, 0x1.4dcccc0000000p-1f, 0x1.5166660000000p-1f, 0x1.5500000000000p-1f, \
    0x1.58999a0000000p-1f, 0x1.5c33340000000p-1f, 0x1.5fcccc0000000p-1f, 0x1.6366660000000p-1f, \
    0x1.6700000000000p-1f, 0x1.6a999a0000000p-1f, 0x1.6e33340000000p-1f, 0x1.71cccc0000000p-1f, \
    0x1.7566660000000p-1f, 0x1.7900000000000p-1f, 0x1.7c999a0000000p-1f, 0x1.8033340000000p-1f, \
    0x1.83cccc0000000p-1f, 0x1.8766660000000p-1f, 0x1.8b00000000000p-1f, 0x1.8e999a0000000p-1f, \
    0x1.9233340000000p-1f, 0x1.95cccc0000000p-1f, 0x1.9966660000000p-1f, 0x1.9d00000000000p-1f, \
    0x1.a0999a0000000p-1f, 0x1.a433340000000p-1f, 0x1.a7cccc0000000p-1f, 0x1.ab66660000000p-1f, \
    0x1.af00000000000p-1f, 0x1.b2999a0000000p-1f, 0x1.b633340000000p-1f, 0x1.b9cccc0000000p-1f, \
    0x1.bd66660000000p-1f, 0x1.c100000000000p-1f, 0x1.c4999a0000000p-1f, 0x1.c833340000000p-1f, \
    0x1.cbcccc0000000p-1f, 0x1.cf66660000000p-1f, 0x1.d300000000000p-1f, 0x1.d6999a0000000p-1f, \
    0x1.da33340000000p-1f, 0x1.ddcccc0000000p-1f, 0x1.e166660000000p-1f, 0x1.e500000000000p-1f, \
    0x1.e8999a0000000p-1f, 0x1.ec33340000000p-1f, 0x1.efcccc0000000p-1f, 0x1.f366660000000p-1f, \
    0x1.f700000000000p-1f, 0x1.fa999a0000000p-1f, 0x1.fe33340000000p-1f, 0x1.0000000000000p+0f, \
  }

/// The index of the code nearest `x` in the ascending `code` of `size`
/// values, at most 256 (the lower on a tie): a binary search for the first
/// code above x, then the nearer of it and the one below. The 8-bit state
/// uses the 256 dynamic codes, NF4 weights (Nf4Math.h) their 16 levels.
MEMOPT_HOST_DEVICE inline uint8_t nearestCode(const float *code, float x,
                                              int size = 256) {
  int low = 0, high = size; // the first code > x is in [low, high]
  while (low < high) {
    int mid = (low + high) / 2;
    if (code[mid] > x)
      high = mid;
    else
      low = mid + 1;
  }
  if (low == 0)
    return 0;
  if (low == size)
    return static_cast<uint8_t>(size - 1);
  float below = x - code[low - 1], above = code[low] - x;
  return static_cast<uint8_t>(above < below ? low : low - 1);
}

/// Quantizes `count` values of one block to `codes`, returning the block's
/// absmax (all codes of a zero block are the code of 0).
MEMOPT_HOST_DEVICE inline float quantizeBlock(const float *code,
                                              const float *values,
                                              int64_t count, uint8_t *codes) {
  float absmax = 0.0f;
  for (int64_t i = 0; i < count; ++i)
    absmax = std::fmax(absmax, std::fabs(values[i]));
  float scale = absmax > 0.0f ? 1.0f / absmax : 0.0f;
  for (int64_t i = 0; i < count; ++i)
    codes[i] = nearestCode(code, values[i] * scale);
  return absmax;
}

/// One block of the 8-bit AdamW update: elements [begin, begin + count) of
/// the parameter, their moments dequantized from `m`/`v` codes and the
/// block's absmaxes, updated as adamwElement does, and quantized back.
/// `newM`, `newV` (B floats each) are scratch.
MEMOPT_HOST_DEVICE inline void
adamw8bitBlock(const AdamWCoefficients &c, const float *signedCode,
               const float *unsignedCode, const float *param,
               const float *grad, const uint8_t *mCodes, float mAbsmax,
               const uint8_t *vCodes, float vAbsmax, int64_t count,
               float *newParam, float *newM, float *newV, uint8_t *newMCodes,
               float &newMAbsmax, uint8_t *newVCodes, float &newVAbsmax) {
  for (int64_t i = 0; i < count; ++i) {
    float m = signedCode[mCodes[i]] * mAbsmax;
    float v = unsignedCode[vCodes[i]] * vAbsmax;
    newParam[i] = adamwElement(c, param[i], grad[i], m, v);
    newM[i] = m;
    newV[i] = v;
  }
  newMAbsmax = quantizeBlock(signedCode, newM, count, newMCodes);
  newVAbsmax = quantizeBlock(unsignedCode, newV, count, newVCodes);
}

} // namespace runtime
} // namespace memopt

#endif // MEMOPT_RUNTIME_QUANTIZEMATH_H
