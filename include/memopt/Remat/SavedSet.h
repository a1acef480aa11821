//===- SavedSet.h - the least bytes the backward must keep ------*- C++ -*-===//
//
// Which forward values to keep for the backward so that the bytes kept are
// least, when the backward may recompute the cheap ones (elementwise ops,
// casts, views, broadcasts, norms) from what is kept but never a matmul or a
// convolution: a minimum s-t cut, as torch.compile's default partitioner
// decides, on memopt's exact byte account. Plain C++ on plain data,
// unit-tested in unittests/Remat and applied by --memopt-remat.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_REMAT_SAVEDSET_H
#define MEMOPT_REMAT_SAVEDSET_H

#include <cstdint>
#include <vector>

namespace memopt {

/// One forward value (the results of one forward op, together).
struct SavedSetValue {
  /// Bytes kept when the backward reads it as it is.
  int64_t bytes = 0;
  /// The backward may recompute it from its operands (a cheap, pure op).
  bool recomputable = false;
  /// Forward values it is computed from (indices into the same list).
  /// Operands that are always available (arguments, values that need no
  /// keeping) are not listed.
  std::vector<int64_t> operands;
  /// The backward reads it.
  bool readByBackward = false;
};

/// keep[i]: value i is kept for the backward. The kept set is a minimum
/// weight vertex cut between the values that only the forward can compute
/// (not recomputable) and the values the backward reads: every value the
/// backward reads is kept or recomputable from kept values through
/// recomputable ones. Among cuts of equal bytes it keeps the values the
/// backward reads itself (least recompute). O(V^2 E) in the worst case
/// (Dinic's max flow); linear-ish on forward graphs.
std::vector<bool> chooseSavedSet(const std::vector<SavedSetValue> &values);

} // namespace memopt

#endif // MEMOPT_REMAT_SAVEDSET_H
