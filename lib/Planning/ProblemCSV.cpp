//===- ProblemCSV.cpp - Placement problems as CSV files -------------------===//
//
// A strict line-by-line reader: every malformed line is reported with its
// line number instead of being skipped, so a truncated or hand-edited file
// never yields a silently different problem.
//
//===----------------------------------------------------------------------===//

#include "memopt/Planning/ProblemCSV.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <unordered_map>

using namespace memopt;

namespace {

std::string trim(const std::string &s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos)
    return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

std::vector<std::string> splitFields(const std::string &line) {
  std::vector<std::string> fields;
  size_t start = 0;
  while (true) {
    size_t comma = line.find(',', start);
    fields.push_back(trim(line.substr(start, comma - start)));
    if (comma == std::string::npos)
      return fields;
    start = comma + 1;
  }
}

bool parseInteger(const std::string &text, int64_t &value) {
  if (text.empty())
    return false;
  errno = 0;
  char *end = nullptr;
  long long parsed = std::strtoll(text.c_str(), &end, 10);
  // The whole field must be the number: a NUL byte inside it must not end
  // the parse early.
  if (errno == ERANGE || end == text.c_str() ||
      end != text.c_str() + text.size())
    return false;
  value = parsed;
  return true;
}

/// `text` with every byte outside printable ASCII as \xNN, so that a
/// message quoting a corrupt field stays one readable line.
std::string escape(const std::string &text) {
  static const char hex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : text) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

} // namespace

bool memopt::parseProblemCSV(std::istream &input, const std::string &name,
                             std::vector<Buffer> &buffers, std::string &error) {
  buffers.clear();
  auto fail = [&](size_t lineNo, const std::string &message) {
    error = name + ":" + std::to_string(lineNo) + ": " + message;
    return false;
  };

  std::string line;
  size_t lineNo = 0;
  size_t numFields = 0;
  std::unordered_map<int64_t, size_t> lineOfId;
  int64_t totalSize = 0;
  while (std::getline(input, line)) {
    ++lineNo;
    if (trim(line).empty())
      continue;
    std::vector<std::string> fields = splitFields(line);
    if (numFields == 0) {
      std::string header;
      for (size_t i = 0; i < fields.size(); ++i)
        header += (i ? "," : "") + fields[i];
      if (header != "id,lower,upper,size" &&
          header != "id,lower,upper,size,offset")
        return fail(lineNo, "expected the header 'id,lower,upper,size' "
                            "(optionally followed by ',offset'), got '" +
                                escape(trim(line)) + "'");
      numFields = fields.size();
      continue;
    }
    if (fields.size() != numFields)
      return fail(lineNo, "expected " + std::to_string(numFields) +
                              " fields, got " + std::to_string(fields.size()));
    static const char *const names[] = {"id", "lower", "upper", "size"};
    int64_t values[4];
    for (size_t i = 0; i < 4; ++i)
      if (!parseInteger(fields[i], values[i]))
        return fail(lineNo, std::string("field '") + names[i] +
                                "' is not a 64-bit integer: '" + escape(fields[i]) +
                                "'");
    Buffer b{values[0], values[1], values[2], values[3]};
    if (b.size < 0)
      return fail(lineNo, "negative size " + std::to_string(b.size) +
                              " for buffer " + std::to_string(b.id));
    if (b.size > kMaxBufferSize)
      return fail(lineNo, "size " + std::to_string(b.size) + " of buffer " +
                              std::to_string(b.id) +
                              " exceeds the limit of 2^40 bytes");
    if (b.upper <= b.lower)
      return fail(lineNo, "empty lifetime for buffer " + std::to_string(b.id) +
                              ": upper (" + std::to_string(b.upper) +
                              ") must be greater than lower (" +
                              std::to_string(b.lower) + ")");
    auto inserted = lineOfId.emplace(b.id, lineNo);
    if (!inserted.second)
      return fail(lineNo, "duplicate id " + std::to_string(b.id) +
                              " (first defined on line " +
                              std::to_string(inserted.first->second) + ")");
    if (buffers.size() == kMaxBuffers)
      return fail(lineNo, "more than 2^31 buffers");
    // Both terms are at most 2^50: the sum cannot overflow.
    totalSize += b.size;
    if (totalSize > kMaxTotalSize)
      return fail(lineNo, "the sizes up to buffer " + std::to_string(b.id) +
                              " add up to more than 2^50 bytes");
    buffers.push_back(b);
  }
  if (input.bad()) {
    error = name + ": cannot read the file (is it a directory?)";
    return false;
  }
  if (numFields == 0)
    return fail(lineNo ? lineNo : 1, "missing header 'id,lower,upper,size'");
  return true;
}

bool memopt::readProblemCSV(const std::string &path,
                            std::vector<Buffer> &buffers, std::string &error) {
  std::ifstream input(path);
  if (!input) {
    error = "cannot open '" + path + "': " + std::strerror(errno);
    return false;
  }
  return parseProblemCSV(input, path, buffers, error);
}
