// RUN: memopt-opt %s --convert-memopt-to-emitc | memopt-translate --memopt-to-cpruntime.h"
// CHECK: static const int64_t [[SHAPE:memopt_i64_[0-9]+]][=4] = {2, 3, 4, 4};
// CHECK: exteEMOPT_F32, 2, [[INPUTS]], memopt_i64_{{[0-9]+}}, {{v[0-9]+}}, 2, 16);
// CHECK: memopt_dropout([[CTX]], MEMOPT_F32, [[X]], {{v[0-9]+}}, 96, 1.00000000000000010e-01, 7, 3, 0);
// CHECK: memopt_rms_norm([[CTX]], MEMOPT_F32, [[X]], M memref<1x3x4x4xf32>) outs(%gf : memref<5x3x3x3xf32>) with {padding = array<i64: 1, 1>}
  %p = memref.alloc() {memopt.offset = 3072 : i64} : memref<2x5x2x2xf32>
  memopt.kernel "memopt.max_pool2d" ins(%c : memref<2x5x4x4xf32>) outs(%p : memref<2x5x2x2xf32>) wit