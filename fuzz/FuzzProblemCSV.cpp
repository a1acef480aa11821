//===- FuzzProblemCSV.cpp - fuzz target: memopt-plan's input path ---------===//
//
// Parses the input with parseProblemCSV, as memopt-plan does; when it is
// accepted (and small enough for one input to stay fast), places it with
// the greedy portfolio (time limit 0, plus the exact search on inputs of at
// most 8 buffers) at the alignment the input's first byte picks, and checks
// the placement with the independent checker. A rejected file must come with
// a message; an accepted one must be placed validly.
//
//===----------------------------------------------------------------------===//

#include "memopt/Planning/Placement.h"
#include "memopt/Planning/PlanChecker.h"
#include "memopt/Planning/ProblemCSV.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

using namespace memopt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::istringstream input(
      std::string(reinterpret_cast<const char *>(data), size));
  std::vector<Buffer> buffers;
  std::string error;
  if (!parseProblemCSV(input, "fuzz.csv", buffers, error)) {
    if (error.empty())
      std::abort(); // every rejection must say why
    return 0;
  }
  if (buffers.size() > 256)
    return 0;

  PlacementOptions options;
  options.alignment = size ? int64_t(1) << (data[0] % 9) : 1;
  options.timeLimitSeconds = buffers.size() <= 8 ? 0.001 : 0.0;
  Placement placement = placeBuffers(buffers, options);
  if (std::optional<std::string> problem =
          checkPlacement(buffers, placement.offsets, placement.arenaSize,
                         options.alignment)) {
    std::fprintf(stderr, "invalid placement: %s\n", problem->c_str());
    std::abort();
  }
  if (placement.arenaSize < placement.lowerBound) {
    std::fprintf(stderr, "arena %lld below the lower bound %lld\n",
                 (long long)placement.arenaSize,
                 (long long)placement.lowerBound);
    std::abort();
  }
  return 0;
}
