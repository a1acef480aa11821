//===- CudaTestFixture.h - a CUDA context for the kernel tests -*- C++ -*-===//
//
// The fixture of the CUDA runtime's kernel tests: a context with a 64 MiB
// arena and bump allocation of device tensors. Without a device every test
// that uses it skips, naming why; a context that cannot start on a machine
// that has a device (an old driver, a library that fails) is a failure.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_UNITTESTS_RUNTIME_CUDATESTFIXTURE_H
#define MEMOPT_UNITTESTS_RUNTIME_CUDATESTFIXTURE_H

#include "memopt/runtime.h"

#include "gtest/gtest.h"

#include <random>
#include <vector>

namespace memopt {
namespace test {

/// A context with an arena; tensors are placed by bump allocation.
class CudaTest : public ::testing::Test {
protected:
  void SetUp() override {
    ctx = memopt_context_create();
    if (!ctx && memopt_context_create_found_no_device())
      GTEST_SKIP() << memopt_context_create_error();
    ASSERT_NE(ctx, nullptr) << "the CUDA runtime cannot start: "
                            << memopt_context_create_error();
    base = static_cast<char *>(memopt_arena_allocate(ctx, 64 << 20));
    ASSERT_NE(base, nullptr) << memopt_get_error_message(ctx);
  }
  void TearDown() override {
    if (!ctx)
      return;
    if (!expectError) {
      EXPECT_EQ(memopt_get_status(ctx), MEMOPT_OK)
          << memopt_get_error_message(ctx);
    }
    memopt_context_destroy(ctx);
  }

  void *alloc(size_t bytes) {
    void *p = base + used;
    used += (bytes + 255) / 256 * 256;
    return p;
  }
  template <typename T> T *upload(const std::vector<T> &host) {
    void *p = alloc(host.size() * sizeof(T));
    memopt_copy_from_host(ctx, p, host.data(), host.size() * sizeof(T));
    return static_cast<T *>(p);
  }
  template <typename T> std::vector<T> download(const void *p, size_t n) {
    std::vector<T> host(n);
    memopt_copy_to_host(ctx, host.data(), p, n * sizeof(T));
    return host;
  }
  std::vector<float> random(size_t n, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (float &x : v)
      x = dist(rng);
    return v;
  }

  memopt_context *ctx = nullptr;
  char *base = nullptr;
  size_t used = 0;
  bool expectError = false;
  std::mt19937 rng{99};
};

} // namespace test
} // namespace memopt

#endif // MEMOPT_UNITTESTS_RUNTIME_CUDATESTFIXTURE_H
