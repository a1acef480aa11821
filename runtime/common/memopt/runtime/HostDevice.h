//===- HostDevice.h - functions both runtimes compile -----------*- C++ -*-===//
//
// MEMOPT_HOST_DEVICE marks the shared formulas (ActivationMath.h, NormMath.h,
// LossMath.h, EmbeddingMath.h, PoolMath.h, OptimizerMath.h): __host__
// __device__ under nvcc, nothing for a host compiler, so that the host
// runtime and its tests run the very functions the CUDA kernels run.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_HOSTDEVICE_H
#define MEMOPT_RUNTIME_HOSTDEVICE_H

#ifdef __CUDACC__
#define MEMOPT_HOST_DEVICE __host__ __device__
#else
#define MEMOPT_HOST_DEVICE
#endif

#endif // MEMOPT_RUNTIME_HOSTDEVICE_H
