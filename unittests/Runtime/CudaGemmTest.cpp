//===- CudaGemmTest.cpp
//------------------------------------------------------===//
//
// (being written)
//
//===----------------------------------------------------------------------===//

#include "CudaRuntime.h"
#include "CudaTestFixture.h"

#include "gtest/gtest.h"
