// RUN: memopt-opt %s --convert-memopt-to-emitc -split-input-file -verify-diagnostics

// expected-error @+1 {{no function marked 'memopt.train_step' to lower}}
module {
}

// -----

// expected-error @+1 {{'func.func' op has no 'memopt.arena_bytes' (run --memopt-plan-buffers first)}}
func.func @train_step(%loss: memref<f32> {memopt.role = "loss", memopt.name = "loss"}) attributes {memopt.train_step} {
  return
}

// -----

func.func @train_step(%loss: memref<f32> {memopt.role = "loss", memopt.name = "loss"})
    attributes {memopt.arena_bytes = 256 : i64, memopt.train_step} {
  // expected-error @+1 {{'memref.alloc' op has no 'memopt.offset' (run --memopt-plan-buffers first)}}
  %a = memref.alloc() : memref<4xf32>
  return
}

// -----

func.func @train_step(%loss: memref<f32> {memopt.role = "loss", memopt.name = "loss"})
    attributes {memopt.arena_bytes = 256 : i64, memopt.train_step} {
  // expected-error @+1 {{'memref.alloc' op occupies bytes [256, 272) outside the arena of 256 bytes}}
  %a = memref.alloc() {memopt.offset = 256 : i64} : memref<4xf32>
  return
}

// -----

func.func @train_step(%x: memref<2x3x4xf32> {memopt.role = "input", memopt.name = "x"},
                      %loss: memref<f32> {memopt.role = "loss", memopt.name = "loss"})
    attributes {memopt.arena_bytes = 256 : i64, memopt.train_step} {
  %a = memref.alloc() {memopt.offset = 0 : i64} : memref<3xf32>
  // expected-error @+1 {{'memopt.kernel' op 'memopt.reduce_sum' cannot be lowered: reduced dimensions are not contiguous}}
  memopt.kernel "memopt.reduce_sum" ins(%x : memref<2x3x4xf32>) outs(%a : memref<3xf32>) with {dims = array<i64: 0, 2>}
  return
}

// -----

func.func @train_step(%x: memref<2x3xf32> {memopt.role = "input", memopt.name = "x"},
                      %loss: memref<f32> {memopt.role = "loss", memopt.name = "loss"})
    attributes {memopt.arena_bytes = 256 : i64, memopt.train_step} {
  %a = memref.alloc() {memopt.offset = 0 : i64} : memref<2x3xf32>
  // expected-error @+1 {{'memopt.kernel' op 'memopt.softmax' cannot be lowered: it has no valid 'dim' attribute}}
  memopt.kernel "memopt.softmax" ins(%x : memref<2x3xf32>) outs(%a : memref<2x3xf32>) with {}
  return
}

// -----

func.func @train_step(%x: memref<2x3xf32> {memopt.role = "input", memopt.name = "x"},
                      %loss: memref<f32> {memopt.role = "loss", memopt.name = "loss"})
    attributes {memopt.arena_bytes = 256 : i64, memopt.train_step} {
  // expected-error @+1 {{'memopt.kernel' op 'memopt.add' cannot be lowered: expected 2 inputs and 1 outputs, got 1 and 1}}
  memopt.kernel "memopt.add" ins(%x : memref<2x3xf32>) outs(%x : memref<2x3xf32>) with {}
  return
}

// -----

func.func @train_step(%loss: memref<f32> {memopt.role = "loss", memopt.name = "loss"})
    attributes {memopt.arena_bytes = 256 : i64, memopt.train_step} {
  // expected-error @+1 {{'arith.constant' op cannot be lowered to runtime calls (expected memopt.kernel, memopt.transfer_wait, memref.alloc, memref.dealloc, memref.reinterpret_cast, memref.view or the micro-batch loop)}}
  %c = arith.constant 1.0 : f32
  return
}

// -----

func.func @train_step(%x: memref<8xf32> {memopt.role = "input", memopt.name = "x"},
                      %loss: memref<f32> {memopt.role = "loss", memopt.name = "loss"})
    attributes {memopt.arena_bytes = 256 : i64, memopt.train_step} {
  // expected-error @+1 {{'memref.reinterpret_cast' op is not a view of a whole dense buffer with the same element type (only reshapes can be lowered)}}
  %v = memref.reinterpret_cast %x to offset: [2], sizes: [4], strides: [1] : memref<8xf32> to memref<4xf32, strided<[1], offset: 2>>
  return
}

// -----

// A slot of a flat byte buffer must sit at a constant offset.
func.func @train_step(%loss: memref<f32> {memopt.role = "loss", memopt.name = "loss"})
    attributes {memopt.arena_bytes = 256 : i64, memopt.train_step} {
  %flat = memref.alloc() {memopt.offset = 0 : i64} : memref<256xi8>
  %c64 = arith.constant 64 : index
  %shift = arith.addi %c64, %c64 : index
  // expected-error @+1 {{'memref.view' op is not a static slot of a runtime dtype at a constant byte offset}}
  %slot = memref.view %flat[%shift][] : memref<256xi8> to memref<4xf32>
  return
}

// -----

// Only some ops have host entries (hasHostEntry).
func.func @train_step(%x: memref<8xf32> {memopt.role = "input", memopt.name = "x", memopt.memory = "host"},
                      %loss: memref<f32> {memopt.role = "loss", memopt.name = "loss"})
    attributes {memopt.arena_bytes = 0 : i64, memopt.host_arena_bytes = 256 : i64, memopt.train_step} {
  %h = memref.alloc() {memopt.memory = "host", memopt.offset = 0 : i64} : memref<8xf32>
  // expected-error @+1 {{'memopt.kernel' op 'memopt.relu' cannot be lowered: it is marked memopt.on_host, but it has no host entry (the optimizer updates, casts, splat constants, adds, scale_by and reduce_sum_squares have one)}}
  memopt.kernel "memopt.relu" ins(%x : memref<8xf32>) outs(%h : memref<8xf32>) with {} {memopt.on_host}
  return
}

// -----

// A host buffer needs the host arena.
func.func @train_step(%loss: memref<f32> {memopt.role = "loss", memopt.name = "loss"})
    attributes {memopt.arena_bytes = 256 : i64, memopt.train_step} {
  // expected-error @+1 {{'memref.alloc' op is in host memory, but the function has no 'memopt.host_arena_bytes' (run --memopt-plan-buffers first)}}
  %h = memref.alloc() {memopt.memory = "host", memopt.offset = 0 : i64} : memref<8xf32>
  return
}

// -----

func.func @train_step(%x: memref<2x3xf32> {memopt.role = "input", memopt.name = "x"},
                      %loss: memref<f32> {memopt.role = "loss", memopt.name = "loss"})
    attributes {memopt.arena_bytes = 0 : i64, memopt.host_arena_bytes = 256 : i64, memopt.train_step} {
  %h = memref.alloc() {memopt.memory = "host", memopt.offset = 0 : i64} : memref<2x3xf32>
  // expected-error @+1 {{'memopt.kernel' op 'memopt.transfer' cannot be lowered: it has no valid 'slot' attribute}}
  memopt.kernel "memopt.transfer" ins(%x : memref<2x3xf32>) outs(%h : memref<2x3xf32>) with {slot = "one", to = #memopt<memory host>}
  return
}
