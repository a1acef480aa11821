//===- WorkspaceLayout.h - the CUDA workspace's slices ----------*- C++ -*-===//
//
// The CUDA context's one workspace allocation (MEMOPT_CUDA_WORKSPACE_BYTES)
// is three disjoint slices, each with one kind of user:
//
//   [ library | scratch | error record ]
//
// - library: the workspace of cuBLASLt matmuls and cuDNN convolutions. A
//   library call may write all of it, so no kernel keeps data there.
// - scratch: the runtime's own kernels' scratch (per-row losses, the
//   partial sums of two-pass reductions, the embedding gradient's sort keys
//   and CUB's sort storage, the fused linear cross-entropy's per-row state).
//   Data in it survives library calls, so an entry may keep state across the
//   GEMMs it runs.
// - error record: the device-side error record (kDeviceErrorBytes).
//
// Plain C++ (no CUDA headers), so that the unit tests check the layout
// without a device.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_CUDA_WORKSPACELAYOUT_H
#define MEMOPT_RUNTIME_CUDA_WORKSPACELAYOUT_H

#include <cstdint>

namespace memopt {
namespace cuda {

/// Bytes at the end of the workspace that hold the device error record.
constexpr uint64_t kDeviceErrorBytes = 256;

/// Every slice starts on this boundary (cuBLASLt's and cuDNN's preferred
/// operand alignment).
constexpr uint64_t kWorkspaceAlignment = 256;

struct WorkspaceLayout {
  uint64_t libraryOffset = 0;
  uint64_t libraryBytes = 0;
  uint64_t scratchOffset = 0;
  uint64_t scratchBytes = 0;
  uint64_t errorOffset = 0;
};

/// The slices of a `total`-byte workspace: the error record at the end, and
/// the bytes before it halved between the libraries and the scratch, the
/// libraries' half rounded up to the alignment (16 MiB of the runtime's 32).
/// Requires total >= kDeviceErrorBytes.
constexpr WorkspaceLayout layoutWorkspace(uint64_t total) {
  WorkspaceLayout layout;
  layout.errorOffset =
      (total - kDeviceErrorBytes) / kWorkspaceAlignment * kWorkspaceAlignment;
  layout.libraryBytes = (layout.errorOffset / 2 + kWorkspaceAlignment - 1) /
                        kWorkspaceAlignment * kWorkspaceAlignment;
  layout.scratchOffset = layout.libraryBytes;
  layout.scratchBytes = layout.errorOffset - layout.scratchOffset;
  return layout;
}

} // namespace cuda
} // namespace memopt

#endif // MEMOPT_RUNTIME_CUDA_WORKSPACELAYOUT_H
