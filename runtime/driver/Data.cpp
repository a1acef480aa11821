//===- Data.cpp - where OUT/train's batches come from ---------------------===//

#include "Data.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace memopt::driver;

BatchSource::~BatchSource() = default;

uint64_t memopt::driver::getWindowOffset(uint64_t seed, uint64_t batch,
                                         uint64_t row, uint64_t rows,
                                         uint64_t range) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (batch * rows + row + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return z % range;
}

namespace {

/// The first of the `count` elements of type T at `data` outside [0, bound)
/// and other than `ignoreIndex`, or `count` when there is none.
template <typename T>
uint64_t findOutOfBound(const unsigned char *data, uint64_t count,
                        int64_t bound, std::optional<int64_t> ignoreIndex) {
  for (uint64_t i = 0; i < count; ++i) {
    T value;
    std::memcpy(&value, data + i * sizeof(T), sizeof(T));
    // One unsigned comparison catches negatives too.
    if (static_cast<uint64_t>(static_cast<int64_t>(value)) >=
            static_cast<uint64_t>(bound) &&
        ignoreIndex != static_cast<int64_t>(value))
      return i;
  }
  return count;
}

/// Checks that `data`, the bytes of `tensor` read from `path`, holds only
/// values its bound allows; else sets `error` to one naming the element.
bool checkBound(const BatchTensor &tensor,
                const std::vector<unsigned char> &data, const std::string &path,
                std::string &error) {
  if (!tensor.bound)
    return true;
  bool wide = tensor.dtype == TensorDtype::I64;
  uint64_t count = data.size() / (wide ? 8 : 4);
  uint64_t at = wide
                    ? findOutOfBound<int64_t>(data.data(), count, *tensor.bound,
                                              tensor.ignoreIndex)
                    : findOutOfBound<int32_t>(data.data(), count, *tensor.bound,
                                              tensor.ignoreIndex);
  if (at == count)
    return true;
  int64_t value;
  if (wide) {
    std::memcpy(&value, data.data() + 8 * at, 8);
  } else {
    int32_t narrow;
    std::memcpy(&narrow, data.data() + 4 * at, 4);
    value = narrow;
  }
  error = "tensor '" + tensor.name + "' in '" + path + "' holds " +
          std::to_string(value) + " at element " + std::to_string(at) +
          ", outside [0, " + std::to_string(*tensor.bound) + ")";
  if (tensor.ignoreIndex)
    error += " and not the ignore_index " + std::to_string(*tensor.ignoreIndex);
  return false;
}

/// Batch files: one file (the same batch every step) or a directory's.
class FileSource : public BatchSource {
public:
  FileSource(std::vector<std::string> paths, std::vector<BatchTensor> tensors)
      : paths(std::move(paths)), tensors(std::move(tensors)) {}

  /// Opens every file's header and checks the tensors in it.
  bool check(std::string &error) {
    for (const std::string &path : paths) {
      SafetensorsReader reader;
      if (!bind(reader, path, error))
        return false;
    }
    return true;
  }

  bool read(uint64_t k, std::vector<std::vector<unsigned char>> &out,
            std::string &error) override {
    const std::string &path = paths[k % paths.size()];
    SafetensorsReader reader;
    if (!bind(reader, path, error))
      return false;
    out.resize(tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
      const SafetensorsEntry &entry = *reader.lookup(tensors[i].name);
      out[i].resize(entry.byteSize());
      if (!reader.readData(entry, out[i].data(), error)) {
        error = "cannot read '" + path + "': " + error;
        return false;
      }
      if (!checkBound(tensors[i], out[i], path, error))
        return false;
    }
    return true;
  }

  uint64_t getNumBatches() const override { return paths.size(); }

private:
  /// Opens `path` and checks each tensor's name, dtype and shape.
  bool bind(SafetensorsReader &reader, const std::string &path,
            std::string &error) {
    if (!reader.open(path, error)) {
      error = "cannot read '" + path + "': " + error;
      return false;
    }
    for (const BatchTensor &tensor : tensors) {
      const SafetensorsEntry *entry = reader.lookup(tensor.name);
      if (!entry) {
        error = "tensor '" + tensor.name + "' not found in '" + path + "'";
        return false;
      }
      if (entry->dtype != tensor.dtype || entry->shape != tensor.shape) {
        error = "tensor '" + tensor.name + "' in '" + path + "' is " +
                getSafetensorsDtypeName(entry->dtype) + " " +
                formatShape(entry->shape) + ", the step reads " +
                getSafetensorsDtypeName(tensor.dtype) + " " +
                formatShape(tensor.shape);
        return false;
      }
    }
    return true;
  }

  std::vector<std::string> paths;
  std::vector<BatchTensor> tensors;
};

/// Windows of a memory-mapped token file.
class TokenSource : public BatchSource {
public:
  ~TokenSource() override {
    if (data)
      munmap(const_cast<void *>(data), bytes);
  }

  bool open(const std::string &path, unsigned tokenBytes, BatchTensor inputs,
            BatchTensor labels, uint64_t seed, std::string &error) {
    this->path = path;
    this->tokenBytes = tokenBytes;
    this->input = std::move(inputs);
    this->label = std::move(labels);
    this->seed = seed;
    auto fail = [&](const std::string &why) {
      error = "token file '" + path + "': " + why;
      return false;
    };
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      return fail(std::strerror(errno));
    struct stat info;
    if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
      ::close(fd);
      return fail("not a regular file");
    }
    bytes = static_cast<size_t>(info.st_size);
    if (bytes % tokenBytes) {
      ::close(fd);
      return fail(std::to_string(bytes) + " bytes is not a whole number of " +
                  std::to_string(tokenBytes) + "-byte tokens (truncated, or " +
                  "another --token-dtype)");
    }
    count = bytes / tokenBytes;
    rows = static_cast<uint64_t>(input.shape[0]);
    width = static_cast<uint64_t>(input.shape[1]);
    if (count < width + 1) {
      ::close(fd);
      return fail(std::to_string(count) + " tokens hold no window of " +
                  std::to_string(width) + " tokens and its next one");
    }
    data = mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (data == MAP_FAILED) {
      data = nullptr;
      return fail(std::string("cannot map it: ") + std::strerror(errno));
    }
    return true;
  }

  bool read(uint64_t k, std::vector<std::vector<unsigned char>> &out,
            std::string &error) override {
    out.resize(2);
    uint64_t elementBytes = getDtypeSize(input.dtype);
    out[0].resize(rows * width * elementBytes);
    out[1].resize(rows * width * elementBytes);
    for (uint64_t b = 0; b < rows; ++b) {
      uint64_t start = getWindowOffset(seed, k, b, rows, count - width);
      for (uint64_t t = 0; t < width; ++t) {
        uint64_t at = (b * width + t) * elementBytes;
        uint64_t x = token(start + t), y = token(start + t + 1);
        if (!allows(input, x))
          return outOfVocabulary(start + t, x, input, "input", error);
        if (!allows(label, y))
          return outOfVocabulary(start + t + 1, y, label, "label", error);
        store(out[0].data() + at, x);
        store(out[1].data() + at, y);
      }
    }
    return true;
  }

  uint64_t getNumBatches() const override { return 0; }

private:
  /// Whether token `value` lies in `tensor`'s bound or is its ignore_index
  /// (tokens are unsigned: a negative ignore_index is never one).
  static bool allows(const BatchTensor &tensor, uint64_t value) {
    return !tensor.bound || value < static_cast<uint64_t>(*tensor.bound) ||
           (tensor.ignoreIndex && *tensor.ignoreIndex >= 0 &&
            value == static_cast<uint64_t>(*tensor.ignoreIndex));
  }

  /// Sets `error` for token `value` at token offset `at`, outside the bound
  /// of `tensor`, the step's input or label (`role`); returns false.
  bool outOfVocabulary(uint64_t at, uint64_t value, const BatchTensor &tensor,
                       const char *role, std::string &error) const {
    error = "token id " + std::to_string(value) + " at offset " +
            std::to_string(at) + " (in tokens; byte " +
            std::to_string(at * tokenBytes) + ") of '" + path +
            "' is outside the vocabulary [0, " + std::to_string(*tensor.bound) +
            ") of " + role + " '" + tensor.name + "'";
    return false;
  }

  uint64_t token(uint64_t i) const {
    if (tokenBytes == 2) {
      uint16_t value;
      std::memcpy(&value, static_cast<const char *>(data) + 2 * i, 2);
      return value;
    }
    uint32_t value;
    std::memcpy(&value, static_cast<const char *>(data) + 4 * i, 4);
    return value;
  }

  void store(unsigned char *dst, uint64_t value) const {
    if (input.dtype == TensorDtype::I64) {
      int64_t v = static_cast<int64_t>(value);
      std::memcpy(dst, &v, sizeof(v));
    } else {
      int32_t v = static_cast<int32_t>(value);
      std::memcpy(dst, &v, sizeof(v));
    }
  }

  std::string path;
  unsigned tokenBytes = 2;
  BatchTensor input, label;
  uint64_t seed = 0;
  const void *data = nullptr;
  size_t bytes = 0;
  uint64_t count = 0, rows = 0, width = 0;
};

} // namespace

std::unique_ptr<BatchSource>
memopt::driver::openBatchFiles(const std::string &path,
                               const std::vector<BatchTensor> &tensors,
                               std::string &error) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<std::string> paths;
  if (fs::is_directory(path, ec)) {
    for (const fs::directory_entry &entry : fs::directory_iterator(path, ec))
      if (entry.path().extension() == ".safetensors")
        paths.push_back(entry.path().string());
    if (ec) {
      error = "cannot list '" + path + "': " + ec.message();
      return nullptr;
    }
    if (paths.empty()) {
      error = "directory '" + path + "' holds no .safetensors batch file";
      return nullptr;
    }
    std::sort(paths.begin(), paths.end());
  } else {
    paths.push_back(path);
  }
  auto source = std::make_unique<FileSource>(std::move(paths), tensors);
  if (!source->check(error))
    return nullptr;
  return source;
}

std::unique_ptr<BatchSource>
memopt::driver::openTokenFile(const std::string &path, unsigned tokenBytes,
                              const BatchTensor &input,
                              const BatchTensor &label, uint64_t seed,
                              std::string &error) {
  auto source = std::make_unique<TokenSource>();
  if (!source->open(path, tokenBytes, input, label, seed, error))
    return nullptr;
  return source;
}
