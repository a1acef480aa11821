//===- ByteSizeTest.cpp - parsing memory sizes ----------------------------===//

#include "memopt/Support/ByteSize.h"

#include "gtest/gtest.h"

using namespace memopt;

namespace {

TEST(ByteSizeTest, UnitsAndNumbers) {
  EXPECT_EQ(parseByteSize("4096"), 4096);
  EXPECT_EQ(parseByteSize("4096B"), 4096);
  EXPECT_EQ(parseByteSize("2KiB"), 2048);
  EXPECT_EQ(parseByteSize("3MiB"), 3 * 1048576);
  EXPECT_EQ(parseByteSize("24GiB"), int64_t(24) << 30);
  EXPECT_EQ(parseByteSize("1TiB"), int64_t(1) << 40);
  EXPECT_EQ(parseByteSize("2KB"), 2000);
  EXPECT_EQ(parseByteSize("5MB"), 5000000);
  EXPECT_EQ(parseByteSize("80GB"), 80000000000);
  EXPECT_EQ(parseByteSize("1.5GiB"), int64_t(3) << 29);
  EXPECT_EQ(parseByteSize(" 1.5 gib "), int64_t(3) << 29);
  EXPECT_EQ(parseByteSize("0.5B"), 0);
  EXPECT_EQ(parseByteSize("0"), 0);
}

TEST(ByteSizeTest, Rejects) {
  for (const char *text : {"", "GiB", "-1GiB", "12 parsecs", "1e3", "1..2",
                           "24 GiBs", "10000000TB", "nan"})
    EXPECT_EQ(parseByteSize(text), std::nullopt) << text;
}

} // namespace
