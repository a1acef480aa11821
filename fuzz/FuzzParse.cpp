//===- FuzzParse.cpp - fuzz target: parse + verify memopt IR --------------===//
//
// Every input is parsed as a module (the parser verifies it). Bytes that do
// not parse are fine; a crash, a sanitizer report or a leak is not.
//
//===----------------------------------------------------------------------===//

#include "FuzzIR.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  (void)memopt::fuzz::parseModule(data, size);
  return 0;
}
