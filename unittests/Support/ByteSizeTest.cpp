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

TEST(ByteSizeTest, FormatSeconds) {
  EXPECT_EQ(formatSeconds(0.0123456), "12.35 ms");
  EXPECT_EQ(formatSeconds(0.999), "999.00 ms");
  EXPECT_EQ(formatSeconds(1.0), "1.000 s");
  EXPECT_EQ(formatSeconds(2.3456), "2.346 s");
}

TEST(ByteSizeTest, FormatNumber) {
  // As a user types the number: no trailing zeros, an exponent when small.
  EXPECT_EQ(formatNumber(1.5), "1.5");
  EXPECT_EQ(formatNumber(0.001), "0.001");
  EXPECT_EQ(formatNumber(1e-8), "1e-08");
  EXPECT_EQ(formatNumber(65536), "65536");
  EXPECT_EQ(formatNumber(-1), "-1");
}

} // namespace

TEST(ByteSizeTest, FormatBytes) {
  EXPECT_EQ(formatBytes(0), "0 B");
  EXPECT_EQ(formatBytes(1023), "1023 B");
  EXPECT_EQ(formatBytes(1024), "1.00 KiB");
  EXPECT_EQ(formatBytes(1536), "1.50 KiB");
  EXPECT_EQ(formatBytes(3 * 1024 * 1024), "3.00 MiB");
  EXPECT_EQ(formatBytes(112'000'000'000), "104.31 GiB");
}

TEST(ByteSizeTest, FormatFlops) {
  EXPECT_EQ(formatFlops(0), "0 FLOP");
  EXPECT_EQ(formatFlops(999), "999 FLOP");
  EXPECT_EQ(formatFlops(1000), "1.00 kFLOP");
  EXPECT_EQ(formatFlops(1'250'000), "1.25 MFLOP");
  EXPECT_EQ(formatFlops(87'000'000'000'000), "87.00 TFLOP");
  EXPECT_EQ(formatFlops(3'000'000'000'000'000'000), "3000.00 PFLOP");
}
