// RUN: memopt-opt %s --memopt-autodiff --memopt-offload-optimizer | FileCheck %s
// RUN: memopt-opt %s --memopt-mixed-precision=compute-type=bf16 --memopt-autodiff --memopt-offload-optimizer | FileCheck %s --check-prefix=BF16
// RUN: memopt-opt %s --memopt-autodiff --memopt-offload-optimizer --memopt-bufferize --memopt-plan-buffers --memopt-verify-plan | FileCheck %s --check-prefix=PLAN
// RUN: memopt-opt %s --memopt-mixed-precision=compute-type=bf16 --memopt-autodiff --memopt-offload-optimizer=params=true | FileCheck %s --check-prefix=PARAMS
// RUN: memopt-opt %s --memopt-autodiff --memopt-offload-optimizer=params=true | FileCheck %s --check-prefix=PARAMS-F32
// RUN: memopt-opt %s --memopt-mixed-precision=compute-type=bf16 --memopt-autodiff --memopt-offload-optimizer=params=true --memopt-bufferize --memopt-plan-buffers --memopt-verify-plan | FileCheck %s --check-prefix=PARAMS-PLAN

// Optimizer offload: the parameters become the host's f32 masters and the
// AdamW moments host arguments; the forward reads a device copy of each
// weight (appended, role "param_copy", the parameter's name); each update
// runs on the host on the host's copy of its gradient and of the step
// counter (made once), and the master's new value goes back to the copy.

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
// CHECK-SAME: %[[W:arg2]]: tensor<3x4xf32> {memopt.memory = "host", memopt.name = "fc.weight", memopt.role = "param"}
// CHECK-SAME: %[[B:arg3]]: tensor<3xf32> {memopt.memory = "host", memopt.name = "fc.bias", memopt.role = "param"}
// CHECK-SAME: %[[M:arg4]]: tensor<3x4xf32> {memopt.memory = "host", memopt.name = "optimizer.fc.weight.exp_avg", memopt.role = "optim"}
// CHECK-SAME: %[[V:arg5]]: tensor<3x4xf32> {memopt.memory = "host",
// CHECK-SAME: %[[T:arg8]]: tensor<i64> {memopt.name = "optimizer.step", memopt.role = "optim"}
// CHECK-SAME: %[[WC:arg9]]: tensor<3x4xf32> {memopt.name = "fc.weight", memopt.role = "param_copy"}
// CHECK-SAME: %[[BC:arg10]]: tensor<3xf32> {memopt.name = "fc.bias", memopt.role = "param_copy"}
// CHECK: memopt.matmul %arg0, %[[WC]] transpose_rhs
// CHECK: memopt.broadcast %[[BC]] dims [1]
// CHECK: %[[GB:.*]] = memopt.reduce_sum
// CHECK: %[[GW:.*]] = memopt.matmul
// CHECK: %[[T1:.*]] = memopt.increment %[[T]]
// CHECK: %[[HGW:.*]] = memopt.transfer %[[GW]] to host {memopt.scope = "fc"} : tensor<3x4xf32>
// CHECK: %[[HT:.*]] = memopt.transfer %[[T1]] to host {memopt.scope = "fc"} : tensor<i64>
// CHECK: %[[NW:new_param]], %[[NM:.*]], %[[NV:.*]] = memopt.adamw_update %[[W]], %[[HGW]], %[[M]], %[[V]] step %[[HT]] {{.*}} {memopt.on_host, memopt.scope = "fc"}
// CHECK: %[[DW:.*]] = memopt.transfer %[[NW]] to device {memopt.scope = "fc"} : tensor<3x4xf32>
// CHECK: %[[HGB:.*]] = memopt.transfer %[[GB]] to host
// CHECK-NOT: memopt.transfer %[[T1]]
// CHECK: %[[NB:new_param_0]], {{.*}} = memopt.adamw_update %[[B]], %[[HGB]], %arg6, %arg7 step %[[HT]] {{.*}} {memopt.on_host,
// CHECK: %[[DB:.*]] = memopt.transfer %[[NB]] to device
// CHECK: return %{{.*}}, %[[NW]], %[[NB]], %[[NM]], %[[NV]], %{{.*}}, %{{.*}}, %[[T1]], %[[DW]], %[[DB]] :

// In BF16 the copies are the bf16 casts the forward read, cast on the host
// from the new masters: the device receives 2 bytes per weight.
// BF16-LABEL: func.func @train_step
// BF16-SAME: %[[WC:arg9]]: tensor<3x4xbf16> {memopt.name = "fc.weight", memopt.role = "param_copy"}
// BF16-SAME: %[[BC:arg10]]: tensor<3xbf16> {memopt.name = "fc.bias", memopt.role = "param_copy"}
// BF16-NOT: memopt.cast %arg2
// BF16: memopt.matmul %{{.*}}, %[[WC]] transpose_rhs
// BF16: %[[NW:new_param]], {{.*}} = memopt.adamw_update %arg2,
// BF16: %[[LW:.*]] = memopt.cast %[[NW]] {memopt.on_host, memopt.scope = "fc"} : tensor<3x4xf32> to tensor<3x4xbf16>
// BF16: %[[DW:.*]] = memopt.transfer %[[LW]] to device {memopt.scope = "fc"} : tensor<3x4xbf16>
// BF16: return {{.*}}, %[[DW]], %{{.*}} : {{.*}}, tensor<3x4xbf16>, tensor<3xbf16>

// Planned: the host buffers are in their own arena; the updates write the
// host arguments in place and the transfers write the copies.
// PLAN-LABEL: func.func @train_step
// PLAN-SAME: memopt.host_arena_bytes = 512 : i64
// PLAN: %[[G:.*]] = memref.alloc() {memopt.offset = {{[0-9]+}} : i64} : memref<3x4xf32>
// PLAN: memopt.kernel "memopt.matmul" {{.*}} outs(%[[G]] :
// PLAN: %[[HG:.*]] = memref.alloc() {memopt.memory = "host", memopt.offset = 0 : i64} : memref<3x4xf32>
// PLAN: memopt.kernel "memopt.transfer" ins(%[[G]] : memref<3x4xf32>) outs(%[[HG]] : memref<3x4xf32>) with {to = #memopt<memory host>}
// PLAN: %[[HT:.*]] = memref.alloc() {memopt.memory = "host", memopt.offset = 256 : i64} : memref<i64>
// PLAN: memopt.kernel "memopt.adamw_update" ins(%arg2, %[[HG]], %arg4, %arg5, %[[HT]] : {{.*}}) outs(%arg2, %arg4, %arg5 : {{.*}}) {{.*}} {memopt.on_host,
// PLAN: memopt.kernel "memopt.transfer" ins(%arg2 : memref<3x4xf32>) outs(%arg9 : memref<3x4xf32>) with {to = #memopt<memory device>}

// With params the bf16 copies are host arguments too: each device reader
// reads a transfer made right before it, and the new copies, cast on the
// host, stay there.
// PARAMS-LABEL: func.func @train_step
// PARAMS-SAME: %[[WC:arg9]]: tensor<3x4xbf16> {memopt.memory = "host", memopt.name = "fc.weight", memopt.role = "param_copy"}
// PARAMS-SAME: %[[BC:arg10]]: tensor<3xbf16> {memopt.memory = "host", memopt.name = "fc.bias", memopt.role = "param_copy"}
// PARAMS: %[[DWC:.*]] = memopt.transfer %[[WC]] to device {memopt.scope = "fc"} : tensor<3x4xbf16>
// PARAMS-NEXT: memopt.matmul %{{.*}}, %[[DWC]] transpose_rhs
// PARAMS: %[[DBC:.*]] = memopt.transfer %[[BC]] to device {memopt.scope = "fc"} : tensor<3xbf16>
// PARAMS-NEXT: memopt.broadcast %[[DBC]] dims [1]
// PARAMS: %[[LW:.*]] = memopt.cast %new_param {memopt.on_host, memopt.scope = "fc"} : tensor<3x4xf32> to tensor<3x4xbf16>
// PARAMS-NOT: memopt.transfer %[[LW]]
// PARAMS: %[[LB:.*]] = memopt.cast %new_param_0 {memopt.on_host
// PARAMS-NOT: memopt.transfer {{.*}} to device
// PARAMS: return {{.*}}, %[[LW]], %[[LB]] : {{.*}}, tensor<3x4xbf16>, tensor<3xbf16>

// In f32 there is no copy: the forward reads the masters, copied up.
// PARAMS-F32-LABEL: func.func @train_step
// PARAMS-F32-NOT: param_copy
// PARAMS-F32: %[[DW:.*]] = memopt.transfer %arg2 to device {memopt.scope = "fc"} : tensor<3x4xf32>
// PARAMS-F32-NEXT: memopt.matmul %arg0, %[[DW]] transpose_rhs
// PARAMS-F32: memopt.adamw_update %arg2,
// PARAMS-F32-NOT: to device
// PARAMS-F32: return

// Planned: each copied-up weight is a device buffer that lives from its
// transfer to its reader.
// PARAMS-PLAN-LABEL: func.func @train_step
// PARAMS-PLAN: %[[D:.*]] = memref.alloc() {memopt.offset = {{[0-9]+}} : i64} : memref<3x4xbf16>
// PARAMS-PLAN-NEXT: memopt.kernel "memopt.transfer" ins(%arg9 : memref<3x4xbf16>) outs(%[[D]] : memref<3x4xbf16>) with {to = #memopt<memory device>}
// PARAMS-PLAN: memopt.kernel "memopt.matmul" ins(%{{.*}}, %[[D]] :
// PARAMS-PLAN: memopt.kernel "memopt.cast" ins(%arg2 : memref<3x4xf32>) outs(%arg9 : memref<3x4xbf16>) {{.*}} {memopt.on_host
