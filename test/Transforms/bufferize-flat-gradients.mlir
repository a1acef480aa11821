// RUN: memopt-opt %s --memopt-autodiff --memopt-accumulate="micro-batches=2 data-parallel=2" --memopt-bufferize | FileCheck %s
// RUN: memopt-opt %s --memopt-autodiff --memopt-accumulate="micro-batches=2 data-parallel=2" --memopt-bufferize --memopt-plan-buffers --memopt-verify-plan --convert-memopt-to-emitc | FileCheck %s --check-prefix=EMITC

// Data parallelism's gradient accumulators live in one flat buffer: an i8
// allocation cut into memref.view slots (each at a multiple of 256 bytes,
// in the order of the sums after the loop), zeroed once, and summed over
// the ranks in place by one kernel on its f32 view. The accumulators' own
// zero fills and allocations are gone; the loss and the label count keep
// their own sums.

func.func @forward(
    %x: tensor<8x4xf32> {memopt.role = "input", memopt.name = "x", memopt.batch_dim = 0 : i64},
    %y: tensor<8xi64> {memopt.role = "label", memopt.name = "y", memopt.batch_dim = 0 : i64},
    %w: tensor<3x4xf32> {memopt.role = "param", memopt.name = "fc.weight"},
    %b: tensor<3xf32> {memopt.role = "param", memopt.name = "fc.bias"})
    -> tensor<f32> attributes {memopt.loss} {
  %0 = memopt.matmul %x, %w transpose_rhs {memopt.scope = "fc"} : tensor<8x4xf32>, tensor<3x4xf32> -> tensor<8x3xf32>
  %1 = memopt.broadcast %b dims [1] {memopt.scope = "fc"} : tensor<3xf32> to tensor<8x3xf32>
  %2 = memopt.add %0, %1 {memopt.scope = "fc"} : tensor<8x3xf32>
  %loss = memopt.cross_entropy %2, %y : tensor<8x3xf32>, tensor<8xi64>
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @train_step
// CHECK:      memopt.kernel "shard.all_reduce" ins(%[[COUNT:.*]] : memref<f32>) outs(%[[COUNT]] : memref<f32>)
// CHECK:      %[[FLAT:.*]] = memref.alloc() : memref<304xi8>
// CHECK:      %[[ALL:.*]] = memref.view %[[FLAT]][%{{.*}}][] : memref<304xi8> to memref<76xf32>
// CHECK-NEXT: memopt.kernel "memopt.constant" outs(%[[ALL]] : memref<76xf32>) with {value = dense<0.000000e+00> : tensor<76xf32>}
// CHECK:      %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT: %[[GB:.*]] = memref.view %[[FLAT]][%[[C0]]][] : memref<304xi8> to memref<3xf32>
// CHECK-NEXT: %[[C256:.*]] = arith.constant 256 : index
// CHECK-NEXT: %[[GW:.*]] = memref.view %[[FLAT]][%[[C256]]][] : memref<304xi8> to memref<3x4xf32>
// CHECK-NOT:  memopt.constant
// CHECK:      scf.for
// CHECK:        memopt.kernel "memopt.add" ins(%[[GW]], %{{.*}} : memref<3x4xf32>, memref<3x4xf32>) outs(%[[GW]] : memref<3x4xf32>)
// CHECK:      } {memopt.data_parallel = 2 : i64, memopt.micro_batches = 2 : i64}
// CHECK:      memopt.kernel "shard.all_reduce" ins(%{{.*}} : memref<f32>) outs(%arg
// CHECK:      memopt.kernel "shard.all_reduce" ins(%[[ALL]] : memref<76xf32>) outs(%[[ALL]] : memref<76xf32>)
// CHECK-NOT:  shard.all_reduce
// CHECK:      memopt.kernel "memopt.adamw_update" ins(%{{.*}}, %[[GW]],
// CHECK:      memopt.kernel "memopt.adamw_update" ins(%{{.*}}, %[[GB]],
// CHECK:      memref.dealloc %[[FLAT]] : memref<304xi8>
// CHECK-NOT:  memref.dealloc %[[FLAT]]

// The slots are the flat buffer's address plus their byte offsets, and the
// sum is one runtime call on all 76 elements.
// EMITC:      %[[BYTES:.*]] = cast %{{.*}} : !emitc.ptr<ui8> to !emitc.ptr<i8>
// EMITC:      %[[SLOT:.*]] = add %[[BYTES]], %{{.*}} : (!emitc.ptr<i8>, i64) -> !emitc.ptr<i8>
// EMITC-NEXT: %[[ALL:.*]] = cast %[[SLOT]] : !emitc.ptr<i8> to !emitc.ptr<f32>
// EMITC:      call_opaque "memopt_all_reduce_sum"(%arg0, %[[ALL]], %[[ALL]]) {args = [0 : index, #emitc.opaque<"MEMOPT_F32">, 1 : index, 2 : index, 76]}
// EMITC-NOT:  memopt_all_reduce
