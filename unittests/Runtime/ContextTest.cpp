//===- ContextTest.cpp - context, arena and error-model tests -------------===//
//
// The arena is one 256-byte aligned zeroed block, the high-water mark counts
// arena plus workspace, and the first error is sticky: it names the entry,
// later entries do nothing, and clearing it lets them run again.
//
//===----------------------------------------------------------------------===//

#include "ArgumentErrorCases.h"
#include "RuntimeTestUtil.h"

#include <string>

using namespace memopt::test;

namespace {

TEST_F(RuntimeTest, ArenaIsAlignedZeroedAndCounted) {
  EXPECT_EQ(memopt_arena_base(ctx), nullptr);
  void *base = memopt_arena_allocate(ctx, 1000);
  ASSERT_NE(base, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(base) % 256, 0u);
  EXPECT_EQ(memopt_arena_base(ctx), base);
  EXPECT_EQ(memopt_arena_size(ctx), 1000u);
  const unsigned char *bytes = static_cast<const unsigned char *>(base);
  for (int i = 0; i < 1000; ++i)
    ASSERT_EQ(bytes[i], 0);
  EXPECT_EQ(memopt_memory_high_water(ctx), 1000u);
  // A bf16 matmul stages its operands and result in f32 workspace.
  uint16_t *a = static_cast<uint16_t *>(base);
  memopt_matmul(ctx, MEMOPT_BF16, a, a + 16, a + 32, 1, 1, 4, 4, 4, 0, 0,
                MEMOPT_BF16);
  expectOk();
  EXPECT_EQ(memopt_memory_high_water(ctx), 1000u + 3 * 16 * sizeof(float));
}

TEST_F(RuntimeTest, FirstErrorIsStickyAndNamesTheEntry) {
  expectError = true;
  std::vector<float> x(4, 1.0f), y(4, 0.0f);
  memopt_unary(ctx, MEMOPT_UNARY_EXP, MEMOPT_I32, x.data(), y.data(), 4);
  EXPECT_EQ(memopt_get_status(ctx), MEMOPT_ERROR_INVALID_ARGUMENT);
  std::string message = memopt_get_error_message(ctx);
  EXPECT_EQ(message.rfind("memopt_unary: ", 0), 0u) << message;
  // Later errors do not overwrite the first, and entries are no-ops.
  memopt_transpose(ctx, MEMOPT_F32, x.data(), -1, nullptr, nullptr, y.data());
  EXPECT_EQ(std::string(memopt_get_error_message(ctx)), message);
  memopt_unary(ctx, MEMOPT_UNARY_NEG, MEMOPT_F32, x.data(), y.data(), 4);
  EXPECT_EQ(y[0], 0.0f);
  memopt_clear_error(ctx);
  EXPECT_EQ(memopt_get_status(ctx), MEMOPT_OK);
  EXPECT_STREQ(memopt_get_error_message(ctx), "");
  memopt_unary(ctx, MEMOPT_UNARY_NEG, MEMOPT_F32, x.data(), y.data(), 4);
  EXPECT_EQ(y[0], -1.0f);
}

TEST(HostArgumentErrorTest, EveryEntryReportsTheSharedMessages) {
  expectArgumentErrors(memopt_context_create);
}

TEST_F(RuntimeTest, StepTimerAndDtypeSizes) {
  memopt_step_begin(ctx);
  double seconds = memopt_step_end(ctx);
  EXPECT_GE(seconds, 0.0);
  EXPECT_EQ(memopt_last_step_seconds(ctx), seconds);
  EXPECT_EQ(memopt_dtype_size(MEMOPT_F32), 4u);
  EXPECT_EQ(memopt_dtype_size(MEMOPT_BF16), 2u);
  EXPECT_EQ(memopt_dtype_size(MEMOPT_I64), 8u);
  EXPECT_EQ(memopt_dtype_size(MEMOPT_I1), 1u);
}

} // namespace
