//===- PhiloxKnownAnswers.h - Philox4x32-10 known-answer test --*- C++ -*-===//
//
// The known-answer vectors of Philox4x32-10 (Random123's kat_vectors), which
// every runtime's memopt_philox4x32_10 must reproduce: dropout masks are
// derived from it, so the host and CUDA runtimes draw the same masks. Shared
// by the host (RandomTest.cpp) and CUDA (CudaRuntimeTest.cpp) tests.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_UNITTESTS_RUNTIME_PHILOXKNOWNANSWERS_H
#define MEMOPT_UNITTESTS_RUNTIME_PHILOXKNOWNANSWERS_H

#include "memopt/runtime.h"

#include "gtest/gtest.h"

#include <cstdint>
#include <ios>

namespace memopt::test {

/// Checks memopt_philox4x32_10 of the runtime linked in against the vectors.
inline void expectPhiloxKnownAnswers() {
  struct Vector {
    uint32_t ctr[4], key[2], out[4];
  } vectors[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}};
  for (const Vector &v : vectors) {
    uint32_t out[4];
    memopt_philox4x32_10(v.ctr, v.key, out);
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(out[i], v.out[i]) << std::hex << "word " << i;
  }
}

} // namespace memopt::test

#endif // MEMOPT_UNITTESTS_RUNTIME_PHILOXKNOWNANSWERS_H
