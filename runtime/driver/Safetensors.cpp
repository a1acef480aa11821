//===- Safetensors.cpp - safetensors reader and writer --------------------===//
//
// The reader trusts nothing in the file: it checks the header length against
// the file size, parses the JSON with nlohmann-json (rejecting duplicate
// names through the parser callback), and checks every entry before any data
// is read: a known dtype, non-negative dimensions whose byte size fits in 64
// bits, offsets inside the data section that match that size, and no two
// non-empty tensors sharing bytes (sorting by offset, O(n log n)). Every
// nlohmann exception is caught here and becomes an error message.
//
// The writer lays the tensors out contiguously in the given order, pads the
// header with spaces to a multiple of 8 bytes (as the reference
// implementation does, so the data section stays aligned) and publishes the
// file with a rename: written to `path.tmp.<pid>`, synced, renamed over
// `path` and the directory synced, so that a full disk, a crash or a
// kill -9 leaves the previous file whole. A failed write removes its
// temporary; one a killed writer left behind, the next write to `path`
// removes.
//
//===----------------------------------------------------------------------===//

#include "Safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <limits>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

using namespace memopt::driver;

namespace {

/// The safetensors reference implementation's bound on the header size.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

constexpr const char *kMetadataKey = "__metadata__";

uint64_t readLittleEndian64(const unsigned char bytes[8]) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i)
    value = (value << 8) | bytes[i];
  return value;
}

void writeLittleEndian64(uint64_t value, unsigned char bytes[8]) {
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<unsigned char>(value >> (8 * i));
}

/// Drops nlohmann's "[json.exception.parse_error.101] " prefix.
std::string describeJsonError(const std::exception &e) {
  std::string message = e.what();
  if (!message.empty() && message[0] == '[') {
    size_t close = message.find("] ");
    if (close != std::string::npos)
      message = message.substr(close + 2);
  }
  return message;
}

/// Parses one header entry (everything but the name) into `entry`.
bool parseEntry(const std::string &name, const nlohmann::json &value,
                uint64_t dataSize, SafetensorsEntry &entry,
                std::string &error) {
  std::string where = "tensor '" + name + "'";
  if (!value.is_object()) {
    error = where + ": expected an object with dtype, shape and data_offsets";
    return false;
  }
  entry.name = name;

  auto dtype = value.find("dtype");
  if (dtype == value.end() || !dtype->is_string()) {
    error = where + ": missing or non-string 'dtype'";
    return false;
  }
  if (!parseSafetensorsDtype(dtype->get<std::string>(), entry.dtype)) {
    error = where + ": unsupported dtype '" + dtype->get<std::string>() +
            "' (expected F32, F16, BF16, I64, I32 or BOOL)";
    return false;
  }

  auto shape = value.find("shape");
  if (shape == value.end() || !shape->is_array()) {
    error = where + ": missing or non-array 'shape'";
    return false;
  }
  for (const nlohmann::json &dim : *shape) {
    if (!dim.is_number_unsigned() ||
        dim.get<uint64_t>() >
            static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      error = where + ": shape " + shape->dump() +
              " has a dimension that is not a non-negative integer";
      return false;
    }
    entry.shape.push_back(static_cast<int64_t>(dim.get<uint64_t>()));
  }

  auto offsets = value.find("data_offsets");
  if (offsets == value.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() ||
      !(*offsets)[1].is_number_unsigned()) {
    error = where + ": 'data_offsets' must be two non-negative integers";
    return false;
  }
  entry.dataBegin = (*offsets)[0].get<uint64_t>();
  entry.dataEnd = (*offsets)[1].get<uint64_t>();
  if (entry.dataBegin > entry.dataEnd) {
    error = where + ": data_offsets [" + std::to_string(entry.dataBegin) +
            ", " + std::to_string(entry.dataEnd) + "] are reversed";
    return false;
  }
  if (entry.dataEnd > dataSize) {
    error = where + ": data_offsets [" + std::to_string(entry.dataBegin) +
            ", " + std::to_string(entry.dataEnd) +
            "] lie outside the data section of " + std::to_string(dataSize) +
            " bytes";
    return false;
  }
  uint64_t numElements = 0;
  uint64_t elementBytes = getDtypeSize(entry.dtype);
  if (!getNumElements(entry.shape, elementBytes, numElements)) {
    error = where + ": shape " + formatShape(entry.shape) + " is too large";
    return false;
  }
  if (entry.byteSize() != numElements * elementBytes) {
    error = where + ": data_offsets [" + std::to_string(entry.dataBegin) +
            ", " + std::to_string(entry.dataEnd) + "] hold " +
            std::to_string(entry.byteSize()) + " bytes, but " +
            getSafetensorsDtypeName(entry.dtype) + " " +
            formatShape(entry.shape) + " needs " +
            std::to_string(numElements * elementBytes);
    return false;
  }
  return true;
}

} // namespace

//===----------------------------------------------------------------------===//
// Dtypes and shapes
//===----------------------------------------------------------------------===//

const char *memopt::driver::getSafetensorsDtypeName(TensorDtype dtype) {
  switch (dtype) {
  case TensorDtype::F32:
    return "F32";
  case TensorDtype::F16:
    return "F16";
  case TensorDtype::BF16:
    return "BF16";
  case TensorDtype::I64:
    return "I64";
  case TensorDtype::I32:
    return "I32";
  case TensorDtype::Bool:
    return "BOOL";
  case TensorDtype::U8:
    return "U8";
  }
  return "?";
}

bool memopt::driver::parseSafetensorsDtype(const std::string &name,
                                           TensorDtype &dtype) {
  static const std::pair<const char *, TensorDtype> kNames[] = {
      {"F32", TensorDtype::F32},   {"F16", TensorDtype::F16},
      {"BF16", TensorDtype::BF16}, {"I64", TensorDtype::I64},
      {"I32", TensorDtype::I32},   {"BOOL", TensorDtype::Bool},
      {"U8", TensorDtype::U8}};
  for (const auto &[spelling, value] : kNames) {
    if (name == spelling) {
      dtype = value;
      return true;
    }
  }
  return false;
}

uint64_t memopt::driver::getDtypeSize(TensorDtype dtype) {
  switch (dtype) {
  case TensorDtype::F32:
  case TensorDtype::I32:
    return 4;
  case TensorDtype::F16:
  case TensorDtype::BF16:
    return 2;
  case TensorDtype::I64:
    return 8;
  case TensorDtype::Bool:
  case TensorDtype::U8:
    return 1;
  }
  return 0;
}

std::string memopt::driver::formatShape(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

bool memopt::driver::getNumElements(const std::vector<int64_t> &shape,
                                    uint64_t elementBytes,
                                    uint64_t &numElements) {
  uint64_t count = 1;
  // Bound the byte size, not only the count, so that callers may multiply.
  uint64_t limit = std::numeric_limits<uint64_t>::max() /
                   std::max<uint64_t>(elementBytes, 1);
  for (int64_t dim : shape) {
    if (dim < 0)
      return false;
    if (dim == 0) {
      numElements = 0;
      return true;
    }
  }
  for (int64_t dim : shape) {
    if (count > limit / static_cast<uint64_t>(dim))
      return false;
    count *= static_cast<uint64_t>(dim);
  }
  numElements = count;
  return true;
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

bool memopt::driver::parseSafetensorsHeader(
    const std::string &header, uint64_t dataSize,
    std::vector<SafetensorsEntry> &entries,
    std::map<std::string, std::string> &metadata, std::string &error) {
  entries.clear();
  metadata.clear();
  try {
    // nlohmann keeps the last of duplicate keys; a checkpoint with two
    // tensors of one name is corrupt, so catch them while parsing.
    std::set<std::string> seen;
    std::string duplicate;
    auto callback = [&](int depth, nlohmann::json::parse_event_t event,
                        nlohmann::json &parsed) {
      if (depth == 1 && event == nlohmann::json::parse_event_t::key &&
          !seen.insert(parsed.get<std::string>()).second && duplicate.empty())
        duplicate = parsed.get<std::string>();
      return true;
    };
    nlohmann::json json = nlohmann::json::parse(header, callback);
    if (!duplicate.empty()) {
      error = "header names '" + duplicate + "' twice";
      return false;
    }
    if (!json.is_object()) {
      error = "header is not a JSON object";
      return false;
    }
    for (auto it = json.begin(); it != json.end(); ++it) {
      if (it.key() == kMetadataKey) {
        if (!it->is_object()) {
          error = "'__metadata__' is not an object";
          return false;
        }
        for (auto meta = it->begin(); meta != it->end(); ++meta) {
          if (!meta->is_string()) {
            error =
                "'__metadata__' value of '" + meta.key() + "' is not a string";
            return false;
          }
          metadata[meta.key()] = meta->get<std::string>();
        }
        continue;
      }
      SafetensorsEntry entry;
      if (!parseEntry(it.key(), *it, dataSize, entry, error))
        return false;
      entries.push_back(std::move(entry));
    }
  } catch (const std::exception &e) {
    error = "invalid JSON header: " + describeJsonError(e);
    return false;
  }

  std::stable_sort(entries.begin(), entries.end(),
                   [](const SafetensorsEntry &a, const SafetensorsEntry &b) {
                     return a.dataBegin < b.dataBegin;
                   });
  const SafetensorsEntry *furthest = nullptr;
  for (const SafetensorsEntry &entry : entries) {
    if (entry.byteSize() == 0)
      continue;
    if (furthest && entry.dataBegin < furthest->dataEnd) {
      error = "tensors '" + furthest->name + "' and '" + entry.name +
              "' overlap in the data section";
      return false;
    }
    if (!furthest || entry.dataEnd > furthest->dataEnd)
      furthest = &entry;
  }
  return true;
}

SafetensorsReader::~SafetensorsReader() {
  if (file)
    std::fclose(file);
}

bool SafetensorsReader::open(const std::string &path, std::string &error) {
  if (file) {
    std::fclose(file);
    file = nullptr;
  }
  entries.clear();
  indexByName.clear();
  metadata.clear();

  struct stat info;
  if (::stat(path.c_str(), &info) != 0) {
    error = std::strerror(errno);
    return false;
  }
  if (!S_ISREG(info.st_mode)) {
    error = "not a regular file";
    return false;
  }
  file = std::fopen(path.c_str(), "rb");
  if (!file) {
    error = std::strerror(errno);
    return false;
  }
  uint64_t fileSize = static_cast<uint64_t>(info.st_size);
  unsigned char prefix[8];
  if (fileSize < 8 || std::fread(prefix, 1, 8, file) != 8) {
    error = "file is too short (" + std::to_string(fileSize) +
            " bytes) for the 8-byte safetensors header length";
    return false;
  }
  uint64_t headerBytes = readLittleEndian64(prefix);
  if (headerBytes == 0) {
    error = "header length is 0";
    return false;
  }
  if (headerBytes > fileSize - 8) {
    error = "header length " + std::to_string(headerBytes) + " exceeds the " +
            std::to_string(fileSize - 8) + " bytes after the length prefix";
    return false;
  }
  if (headerBytes > kMaxHeaderBytes) {
    error = "header length " + std::to_string(headerBytes) +
            " exceeds the limit of " + std::to_string(kMaxHeaderBytes) +
            " bytes";
    return false;
  }
  std::string header(headerBytes, '\0');
  if (std::fread(&header[0], 1, headerBytes, file) != headerBytes) {
    error = "cannot read the " + std::to_string(headerBytes) +
            "-byte header: " + std::strerror(errno);
    return false;
  }
  dataStart = 8 + headerBytes;
  if (!parseSafetensorsHeader(header, fileSize - dataStart, entries, metadata,
                              error))
    return false;
  for (size_t i = 0; i < entries.size(); ++i)
    indexByName[entries[i].name] = i;
  return true;
}

const SafetensorsEntry *
SafetensorsReader::lookup(const std::string &name) const {
  auto it = indexByName.find(name);
  return it == indexByName.end() ? nullptr : &entries[it->second];
}

bool SafetensorsReader::readData(const SafetensorsEntry &entry, void *dst,
                                 std::string &error) {
  if (!file) {
    error = "file is not open";
    return false;
  }
  if (entry.byteSize() == 0)
    return true;
  uint64_t offset = dataStart + entry.dataBegin;
  errno = 0;
  if (offset > static_cast<uint64_t>(std::numeric_limits<off_t>::max()) ||
      ::fseeko(file, static_cast<off_t>(offset), SEEK_SET) != 0 ||
      std::fread(dst, 1, entry.byteSize(), file) != entry.byteSize()) {
    error = "cannot read the data of tensor '" + entry.name +
            "': " + (errno ? std::strerror(errno) : "unexpected end of file");
    return false;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

namespace {

/// The directory that holds `path`.
std::filesystem::path getDirectory(const std::string &path) {
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  return dir.empty() ? std::filesystem::path(".") : dir;
}

/// Removes the temporaries `path.tmp.<pid>` that writers killed mid-write
/// (kill -9, a crash) left behind: those whose process no longer exists on
/// this machine. A live writer's, and any other file, is kept.
void removeStaleTemporaries(const std::string &path) {
  namespace fs = std::filesystem;
  std::string prefix = fs::path(path).filename().string() + ".tmp.";
  std::error_code ec;
  for (fs::directory_iterator it(getDirectory(path), ec), end; !ec && it != end;
       it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.size() <= prefix.size() || name.size() > prefix.size() + 9 ||
        name.compare(0, prefix.size(), prefix) != 0 ||
        !std::all_of(name.begin() + prefix.size(), name.end(),
                     [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    pid_t pid = static_cast<pid_t>(std::stol(name.substr(prefix.size())));
    if (pid > 0 && pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH) {
      std::error_code ignored;
      fs::remove(it->path(), ignored);
    }
  }
}

/// Makes the rename of `path` durable: fsync of its directory. Best effort,
/// as some file systems cannot sync a directory; the file is in place.
void syncDirectory(const std::string &path) {
  int fd =
      ::open(getDirectory(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return;
  ::fsync(fd);
  ::close(fd);
}

} // namespace

bool memopt::driver::writeSafetensors(
    const std::string &path, const std::vector<SafetensorsTensorRef> &tensors,
    const std::map<std::string, std::string> &metadata, std::string &error) {
  std::string header;
  std::vector<uint64_t> sizes;
  try {
    nlohmann::ordered_json json = nlohmann::ordered_json::object();
    if (!metadata.empty()) {
      nlohmann::ordered_json meta = nlohmann::ordered_json::object();
      for (const auto &[key, value] : metadata)
        meta[key] = value;
      json[kMetadataKey] = std::move(meta);
    }
    uint64_t offset = 0;
    std::set<std::string> names;
    for (const SafetensorsTensorRef &tensor : tensors) {
      if (tensor.name.empty() || tensor.name == kMetadataKey) {
        error = "invalid tensor name '" + tensor.name + "'";
        return false;
      }
      if (!names.insert(tensor.name).second) {
        error = "tensor '" + tensor.name + "' is written twice";
        return false;
      }
      uint64_t numElements = 0;
      uint64_t elementBytes = getDtypeSize(tensor.dtype);
      if (!getNumElements(tensor.shape, elementBytes, numElements) ||
          offset > std::numeric_limits<uint64_t>::max() -
                       numElements * elementBytes) {
        error = "tensor '" + tensor.name + "' of shape " +
                formatShape(tensor.shape) + " is too large";
        return false;
      }
      uint64_t bytes = numElements * elementBytes;
      if (bytes && !tensor.data) {
        error = "tensor '" + tensor.name + "' has no data";
        return false;
      }
      nlohmann::ordered_json entry;
      entry["dtype"] = getSafetensorsDtypeName(tensor.dtype);
      entry["shape"] = tensor.shape;
      entry["data_offsets"] = {offset, offset + bytes};
      json[tensor.name] = std::move(entry);
      sizes.push_back(bytes);
      offset += bytes;
    }
    header = json.dump();
  } catch (const std::exception &e) {
    // Only invalid UTF-8 in a name or a metadata string gets here.
    error = "cannot encode the header: " + describeJsonError(e);
    return false;
  }
  header.append((8 - header.size() % 8) % 8, ' ');

  removeStaleTemporaries(path);
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::FILE *out = std::fopen(tmp.c_str(), "wb");
  if (!out) {
    error = "cannot create '" + tmp + "': " + std::strerror(errno);
    return false;
  }
  // The first failure and its errno: a full disk (ENOSPC), the file size
  // limit (EFBIG) or an I/O error shows at a write, at the flush of stdio's
  // buffer, at fsync or at close. Until the rename, `path` is untouched.
  const char *failed = nullptr;
  int failedErrno = 0;
  auto check = [&](bool ok, const char *what) {
    if (!ok && !failed) {
      failed = what;
      failedErrno = errno ? errno : EIO;
    }
    return !failed;
  };
  errno = 0;
  unsigned char prefix[8];
  writeLittleEndian64(header.size(), prefix);
  check(std::fwrite(prefix, 1, 8, out) == 8 &&
            std::fwrite(header.data(), 1, header.size(), out) == header.size(),
        "write");
  for (size_t i = 0; !failed && i < tensors.size(); ++i)
    check(sizes[i] == 0 ||
              std::fwrite(tensors[i].data, 1, sizes[i], out) == sizes[i],
          "write");
  if (check(std::fflush(out) == 0, "write"))
    check(::fsync(::fileno(out)) == 0, "sync");
  check(std::fclose(out) == 0, "close");
  if (failed) {
    std::remove(tmp.c_str());
    error = std::string("cannot ") + failed + " '" + tmp +
            "': " + std::strerror(failedErrno);
    return false;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int renameErrno = errno;
    std::remove(tmp.c_str());
    error = "cannot rename '" + tmp + "' to '" + path +
            "': " + std::strerror(renameErrno);
    return false;
  }
  syncDirectory(path);
  return true;
}
