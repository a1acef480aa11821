//===- Data.h - where OUT/train's batches come from -------------*- C++ -*-===//
//
// The batch sources of the driver (docs/Training.md, "Training on data"):
//
//  - one safetensors file (--batch / --data FILE): the same batch each step;
//  - a directory of safetensors batch files (--data DIR), used in name
//    order and cycled: batch k is file k mod count, of epoch k / count;
//  - a flat token file (--tokens FILE, uint16 or uint32 as nanoGPT writes
//    it), memory-mapped, for a model with one integer input and one integer
//    label of the same shape [B, T]: row b of batch k is the window of T
//    tokens at getWindowOffset(seed, k, b, B, n - T), the label the same
//    window one token later.
//
// A source fills whole-batch tensors by argument name; the driver copies
// each rank's share into the step's arguments. It checks each batch of a
// bounded tensor as it reads it (one comparison per element): a token id
// or a label beyond the vocabulary or the classes is an error naming the
// file and the offset or element, not a kernel's error in the step.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DRIVER_DATA_H
#define MEMOPT_DRIVER_DATA_H

#include "Safetensors.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace memopt::driver {

/// One tensor a batch source fills: its name, dtype and whole-batch shape,
/// and, for an integer input or label that indexes a table or labels
/// classes, the values it may hold: [0, bound), and `ignoreIndex`.
struct BatchTensor {
  std::string name;
  TensorDtype dtype = TensorDtype::I64;
  std::vector<int64_t> shape;
  std::optional<int64_t> bound;
  std::optional<int64_t> ignoreIndex;
};

/// A source of batches: batch k (0-based, counted over the whole training
/// run, resumed runs included) of the tensors it was opened for.
class BatchSource {
public:
  virtual ~BatchSource();
  /// Fills `out[i]` with the bytes of tensor i of batch `k`; on failure (a
  /// file that cannot be read, a value outside a tensor's bound) sets
  /// `error` to a message naming the file (and the tensor or offset).
  virtual bool read(uint64_t k, std::vector<std::vector<unsigned char>> &out,
                    std::string &error) = 0;
  /// How many distinct batches there are (0: unbounded, token windows).
  virtual uint64_t getNumBatches() const = 0;
};

/// Opens `path` (a safetensors file or a directory of them) for `tensors`,
/// checking every file's header for each tensor's name, dtype and shape.
std::unique_ptr<BatchSource>
openBatchFiles(const std::string &path, const std::vector<BatchTensor> &tensors,
               std::string &error);

/// Opens the token file `path` of `tokenBytes`-byte tokens (2 or 4) for an
/// input and a label of one shape [B, T] and integer dtype, with windows
/// drawn from `seed`. Fails on an empty, truncated or too short file; a
/// read fails on a token outside the input's or the label's bound.
std::unique_ptr<BatchSource>
openTokenFile(const std::string &path, unsigned tokenBytes,
              const BatchTensor &input, const BatchTensor &label,
              uint64_t seed, std::string &error);

/// The first token of row `row` of batch `batch` of `rows`, in [0, range):
/// splitmix64(seed + 0x9E3779B97F4A7C15 * (batch * rows + row + 1)) mod
/// range, the documented order another program reproduces.
uint64_t getWindowOffset(uint64_t seed, uint64_t batch, uint64_t row,
                         uint64_t rows, uint64_t range);

} // namespace memopt::driver

#endif // MEMOPT_DRIVER_DATA_H
