//===- PrecisionTest.cpp - the compute precision's one spelling -----------===//

#include "memopt/Support/Precision.h"

#include "llvm/Support/CommandLine.h"

#include "gtest/gtest.h"

using namespace memopt;

namespace {

TEST(PrecisionTest, NamesRoundTrip) {
  for (Precision precision : {Precision::F32, Precision::BF16, Precision::F16})
    EXPECT_EQ(parsePrecision(getPrecisionName(precision)), precision);
  EXPECT_EQ(getPrecisionName(Precision::F32), "none");
  EXPECT_EQ(getPrecisionName(Precision::F16), "fp16");
}

TEST(PrecisionTest, RejectsOtherSpellings) {
  // One spelling: the element type's names are not precisions.
  for (const char *name : {"", "f16", "f32", "FP16", "bfloat16", "fp8", "auto"})
    EXPECT_EQ(parsePrecision(name), std::nullopt) << name;
}

TEST(PrecisionTest, Lists) {
  EXPECT_EQ(listPrecisions(), "none, bf16 or fp16");
  EXPECT_EQ(listPrecisions("auto"), "none, bf16, fp16 or auto");
}

TEST(PrecisionTest, CommandLineOption) {
  llvm::cl::opt<Precision> option("precision-test-option",
                                  llvm::cl::init(Precision::F32));
  EXPECT_FALSE(option.addOccurrence(1, "precision-test-option", "bf16"));
  EXPECT_EQ(option.getValue(), Precision::BF16);
  // An error names the value and the accepted names; the value is kept.
  EXPECT_TRUE(option.addOccurrence(2, "precision-test-option", "f16"));
  EXPECT_EQ(option.getValue(), Precision::BF16);
  option.removeArgument();
}

} // namespace
