// RUN: memopt-opt %examples/mlp.mlir --memopt-mixed-precision --memopt-print-model-state -o /dev/null | FileCheck %s
// RUN: memopt-opt %examples/mlp.mlir --memopt-print-model-state -o /dev/null | FileCheck %s --check-prefix=FP32

// The model state of the MLP's 9610 parameters with AdamW after mixed
// precision: bf16 copies (2), f32 masters (4), the f32 gradients the
// optimizer reads (4), two f32 moments (8) and the step counter.

// CHECK:      parameters       9610 in 4 tensors
// CHECK-NEXT: weights 19220 B (18.77 KiB) bf16 19220 B
// CHECK-NEXT: master weights 38440 B (37.54 KiB) f32 38440 B
// CHECK-NEXT: gradients 38440 B (37.54 KiB) f32 38440 B
// CHECK-NEXT: optimizer state 76888 B (75.09 KiB) f32 76880 B, i64 8 B
// CHECK-NEXT: buffers 0 B (0 B)
// CHECK-NEXT: total 172988 B (168.93 KiB)
// CHECK-NEXT: per parameter 18.00 B (weights, master weights, gradients and optimizer state)

// FP32:      weights 38440 B (37.54 KiB) f32 38440 B
// FP32-NEXT: gradients
// FP32:      per parameter 16.00 B (weights, gradients and optimizer state)
