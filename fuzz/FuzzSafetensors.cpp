//===- FuzzSafetensors.cpp - fuzz target: the safetensors reader ----------===//
//
// Writes the input to an in-memory file and opens it with the train
// driver's SafetensorsReader, exactly as `train --params/--batch` does; when
// the header is accepted, reads every tensor's data. An error message is the
// expected outcome for most inputs; a crash, an exception escaping the
// reader, a sanitizer report or a leak is a finding.
//
//===----------------------------------------------------------------------===//

#include "Safetensors.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

using namespace memopt::driver;

namespace {

/// The memfd that holds the current input, and its /proc path.
int getInputFd(std::string &path) {
  static int fd = -1;
  static std::string procPath;
  if (fd < 0) {
    fd = ::memfd_create("memopt-fuzz-safetensors", 0);
    if (fd < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    procPath = "/proc/self/fd/" + std::to_string(fd);
  }
  path = procPath;
  return fd;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string path;
  int fd = getInputFd(path);
  if (::ftruncate(fd, 0) != 0 ||
      (size && ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size))) {
    std::perror("writing the input");
    std::abort();
  }

  SafetensorsReader reader;
  std::string error;
  if (!reader.open(path, error)) {
    if (error.empty())
      std::abort(); // every rejection must say why
    return 0;
  }
  std::vector<unsigned char> buffer;
  for (const SafetensorsEntry &entry : reader.getEntries()) {
    // The header was validated against the file size: no entry can ask for
    // more bytes than the input holds.
    if (entry.byteSize() > size)
      std::abort();
    buffer.resize(entry.byteSize());
    if (!reader.readData(entry, buffer.data(), error))
      std::abort(); // validated offsets must be readable
    if (reader.lookup(entry.name) == nullptr)
      std::abort();
  }
  return 0;
}
