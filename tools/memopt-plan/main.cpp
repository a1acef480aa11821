//===- main.cpp - memopt-plan: place buffers from a CSV problem -----------===//
//
// A thin driver over memopt::placeBuffers(): reads a problem in the CSV format
// of shared/benchmarks/dsa, places it, verifies the result with the
// independent checker and prints one summary line.
//
// Exit codes: 0 success, 1 bad usage or bad input, 2 the checker rejected the
// placement (a placer bug; never expected).
//
//===----------------------------------------------------------------------===//

#include "memopt/Planning/Placement.h"
#include "memopt/Planning/PlanChecker.h"
#include "memopt/Planning/ProblemCSV.h"

#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

using namespace memopt;

namespace {

const char *const kUsage =
    "usage: memopt-plan PROBLEM.csv [--time-limit=SECONDS] [--alignment=N]\n"
    "                   [-o PLACEMENT.csv]\n"
    "\n"
    "Places the buffers of PROBLEM.csv (header id,lower,upper,size[,offset];\n"
    "lifetimes are half-open [lower, upper)) in one arena and prints\n"
    "  arena=<bytes> lower_bound=<bytes> ratio=<arena/LB> time_ms=<ms>\n"
    "\n"
    "  --time-limit=SECONDS  budget of the whole placement; the exact search\n"
    "                        runs until then if no heuristic reaches the "
    "lower\n"
    "                        bound (default 1; 0 disables the exact search)\n"
    "  --alignment=N         align every offset and size to N bytes (default "
    "1)\n"
    "  -o FILE               write id,offset rows to FILE\n"
    "  --help                print this message\n";

int usageError(const std::string &message) {
  std::fprintf(stderr, "memopt-plan: %s (see --help)\n", message.c_str());
  return 1;
}

bool parseNumber(const std::string &text, double &value) {
  if (text.empty())
    return false;
  errno = 0;
  char *end = nullptr;
  value = std::strtod(text.c_str(), &end);
  return errno == 0 && *end == '\0' && value >= 0 && value <= 1e6;
}

bool parseAlignment(const std::string &text, int64_t &value) {
  if (text.empty())
    return false;
  errno = 0;
  char *end = nullptr;
  long long parsed = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || parsed < 1 || parsed > (1LL << 30))
    return false;
  value = parsed;
  return true;
}

/// Writes `id,offset` rows to a temporary file next to `path`, then renames it
/// over `path`, so a failure never leaves a half-written placement behind.
bool writePlacement(const std::string &path, const std::vector<Buffer> &buffers,
                    const std::vector<int64_t> &offsets) {
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  FILE *f = std::fopen(tmp.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "memopt-plan: cannot write '%s': %s\n", path.c_str(),
                 std::strerror(errno));
    return false;
  }
  bool ok = std::fprintf(f, "id,offset\n") > 0;
  for (size_t i = 0; ok && i < buffers.size(); ++i)
    ok = std::fprintf(f, "%" PRId64 ",%" PRId64 "\n", buffers[i].id,
                      offsets[i]) > 0;
  int savedErrno = errno;
  if (std::fclose(f) != 0 && ok) {
    ok = false;
    savedErrno = errno;
  }
  if (ok && std::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    savedErrno = errno;
  }
  if (!ok) {
    std::remove(tmp.c_str());
    std::fprintf(stderr, "memopt-plan: cannot write '%s': %s\n", path.c_str(),
                 std::strerror(savedErrno));
  }
  return ok;
}

} // namespace

int main(int argc, char **argv) {
  std::vector<std::string> inputs;
  std::string outputPath;
  PlacementOptions options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg.rfind("--time-limit=", 0) == 0) {
      if (!parseNumber(arg.substr(13), options.timeLimitSeconds))
        return usageError("invalid --time-limit '" + arg.substr(13) +
                          "': expected seconds in [0, 1e6]");
    } else if (arg.rfind("--alignment=", 0) == 0) {
      if (!parseAlignment(arg.substr(12), options.alignment))
        return usageError("invalid --alignment '" + arg.substr(12) +
                          "': expected an integer in [1, 2^30]");
    } else if (arg == "-o") {
      if (i + 1 >= argc)
        return usageError("-o needs a file name");
      outputPath = argv[++i];
    } else if (arg.rfind("-o=", 0) == 0) {
      outputPath = arg.substr(3);
    } else if (arg.size() > 1 && arg[0] == '-') {
      return usageError("unknown option '" + arg + "'");
    } else {
      inputs.push_back(arg);
    }
  }
  if (inputs.size() != 1)
    return usageError("expected exactly one problem file, got " +
                      std::to_string(inputs.size()));
  if (!outputPath.empty() && outputPath == inputs[0])
    return usageError("-o would overwrite the input file");

  std::vector<Buffer> buffers;
  std::string error;
  if (!readProblemCSV(inputs[0], buffers, error)) {
    std::fprintf(stderr, "memopt-plan: %s\n", error.c_str());
    return 1;
  }

  auto start = std::chrono::steady_clock::now();
  Placement placement = placeBuffers(buffers, options);
  auto elapsed = std::chrono::steady_clock::now() - start;
  long long ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count();

  if (std::optional<std::string> problem = checkPlacement(
          buffers, placement.offsets, placement.arenaSize, options.alignment)) {
    std::fprintf(stderr,
                 "memopt-plan: internal error: the placement of '%s' failed "
                 "verification: %s\n",
                 inputs[0].c_str(), problem->c_str());
    return 2;
  }

  double ratio = placement.lowerBound > 0
                     ? static_cast<double>(placement.arenaSize) /
                           static_cast<double>(placement.lowerBound)
                     : 1.0;
  std::printf("arena=%" PRId64 " lower_bound=%" PRId64 " ratio=%.4f "
              "time_ms=%lld\n",
              placement.arenaSize, placement.lowerBound, ratio, ms);
  std::fflush(stdout);

  if (!outputPath.empty() &&
      !writePlacement(outputPath, buffers, placement.offsets))
    return 1;
  return 0;
}
