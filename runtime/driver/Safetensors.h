//===- Safetensors.h - safetensors reader and writer ------------*- C++ -*-===//
//
// The checkpoint format of the `train` driver: an 8-byte little-endian header
// length N, N bytes of JSON describing every tensor (dtype, shape, byte range
// in the data section) and optional string metadata, then the data. The
// reader validates the whole header before handing out any tensor, so that a
// truncated or corrupt file yields one clear message and never a crash.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DRIVER_SAFETENSORS_H
#define MEMOPT_DRIVER_SAFETENSORS_H

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace memopt::driver {

/// The element types the driver reads and writes.
/// U8: the packed bytes of 8-bit optimizer state.
enum class TensorDtype { F32, F16, BF16, I64, I32, Bool, U8 };

/// The safetensors spelling of `dtype` ("F32", ..., "BOOL").
const char *getSafetensorsDtypeName(TensorDtype dtype);

/// Parses a safetensors dtype name; false if it is not one of the seven above.
bool parseSafetensorsDtype(const std::string &name, TensorDtype &dtype);

/// Bytes per element of `dtype`.
uint64_t getDtypeSize(TensorDtype dtype);

/// Formats a shape as "[2, 3]" ("[]" for a scalar).
std::string formatShape(const std::vector<int64_t> &shape);

/// The number of elements of `shape`, or false if the count (or the byte size
/// in `elementBytes` units) does not fit in 64 bits.
bool getNumElements(const std::vector<int64_t> &shape, uint64_t elementBytes,
                    uint64_t &numElements);

/// One tensor of a safetensors file: its header entry and where its bytes
/// lie, relative to the start of the data section.
struct SafetensorsEntry {
  std::string name;
  TensorDtype dtype = TensorDtype::F32;
  std::vector<int64_t> shape;
  uint64_t dataBegin = 0;
  uint64_t dataEnd = 0;

  /// The size of the tensor's data in bytes.
  uint64_t byteSize() const { return dataEnd - dataBegin; }
};

/// An open, validated safetensors file. Tensor data is read on demand, so
/// loading a checkpoint never holds it twice in memory.
class SafetensorsReader {
public:
  SafetensorsReader() = default;
  ~SafetensorsReader();
  SafetensorsReader(const SafetensorsReader &) = delete;
  SafetensorsReader &operator=(const SafetensorsReader &) = delete;

  /// Opens `path` and validates its header: the header length, the JSON, each
  /// entry's dtype, shape and offsets (inside the data section, of the size
  /// the shape and dtype imply, not overlapping one another). On failure
  /// returns false and sets `error` to a message naming the problem (without
  /// the file name, which the caller adds).
  bool open(const std::string &path, std::string &error);

  /// The tensors, in the order of their data offsets.
  const std::vector<SafetensorsEntry> &getEntries() const { return entries; }

  /// The `__metadata__` map (empty if the file has none).
  const std::map<std::string, std::string> &getMetadata() const {
    return metadata;
  }

  /// The entry named `name`, or null.
  const SafetensorsEntry *lookup(const std::string &name) const;

  /// Reads the data of `entry` into `dst` (entry.byteSize() bytes). Returns
  /// false and sets `error` if the file cannot be read.
  bool readData(const SafetensorsEntry &entry, void *dst, std::string &error);

private:
  std::FILE *file = nullptr;
  uint64_t dataStart = 0;
  std::vector<SafetensorsEntry> entries;
  std::map<std::string, size_t> indexByName;
  std::map<std::string, std::string> metadata;
};

/// Validates a safetensors header (the JSON text between the length prefix
/// and the data) for a data section of `dataSize` bytes. Exposed for tests;
/// SafetensorsReader::open uses it.
bool parseSafetensorsHeader(const std::string &header, uint64_t dataSize,
                            std::vector<SafetensorsEntry> &entries,
                            std::map<std::string, std::string> &metadata,
                            std::string &error);

/// A tensor to write: a name, a dtype, a shape and `data` pointing at its
/// densely packed bytes (product(shape) * getDtypeSize(dtype) of them).
struct SafetensorsTensorRef {
  std::string name;
  TensorDtype dtype = TensorDtype::F32;
  std::vector<int64_t> shape;
  const void *data = nullptr;
};

/// Writes `tensors` (in the given order) and `metadata` to `path`: first to
/// `path.tmp.<pid>`, then renamed over `path`, so that a failure never leaves
/// a half-written file. Returns false and sets `error` on failure (duplicate
/// or empty names, a reserved name, I/O errors).
bool writeSafetensors(const std::string &path,
                      const std::vector<SafetensorsTensorRef> &tensors,
                      const std::map<std::string, std::string> &metadata,
                      std::string &error);

} // namespace memopt::driver

#endif // MEMOPT_DRIVER_SAFETENSORS_H
