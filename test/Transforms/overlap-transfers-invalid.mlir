// RUN: memopt-opt %s -split-input-file --memopt-verify-plan -verify-diagnostics

// Inputs of overlap-transfers.mlir: asynchronous copies that
// --memopt-verify-plan refuses, each with a planned arena so that only the
// copy is wrong.

// A read of the target before the copy arrives.
func.func @train_step(%h: memref<64xf32> {memopt.memory = "host"}, %loss: memref<f32>) attributes {memopt.train_step, memopt.arena_bytes = 512 : i64} {
  %d = memref.alloc() {memopt.offset = 0 : i64} : memref<64xf32>
  memopt.kernel "memopt.transfer" ins(%h : memref<64xf32>) outs(%d : memref<64xf32>) with {slot = 0 : i64, to = #memopt<memory device>}
  %e = memref.alloc() {memopt.offset = 256 : i64} : memref<64xf32>
  // expected-error @+1 {{reads or writes the target, or writes the source, of the copy in flight on slot 0 before its memopt.transfer_wait}}
  memopt.kernel "memopt.relu" ins(%d : memref<64xf32>) outs(%e : memref<64xf32>) with {}
  memopt.transfer_wait %h, %d slot 0 : memref<64xf32>, memref<64xf32>
  return
}

// -----

// A write over the source before the copy is complete (a view of it counts).
func.func @train_step(%a: memref<64xf32>, %loss: memref<f32>) attributes {memopt.train_step, memopt.arena_bytes = 0 : i64, memopt.host_arena_bytes = 256 : i64} {
  %h = memref.alloc() {memopt.memory = "host", memopt.offset = 0 : i64} : memref<64xf32>
  memopt.kernel "memopt.transfer" ins(%a : memref<64xf32>) outs(%h : memref<64xf32>) with {slot = 3 : i64, to = #memopt<memory host>}
  %v = memref.reinterpret_cast %a to offset: [0], sizes: [8, 8], strides: [8, 1] : memref<64xf32> to memref<8x8xf32>
  // expected-error @+1 {{reads or writes the target, or writes the source, of the copy in flight on slot 3 before its memopt.transfer_wait}}
  memopt.kernel "memopt.relu" ins(%v : memref<8x8xf32>) outs(%v : memref<8x8xf32>) with {}
  memopt.transfer_wait %a, %h slot 3 : memref<64xf32>, memref<64xf32>
  return
}

// -----

// A copy that nothing waits for.
func.func @train_step(%a: memref<64xf32>, %loss: memref<f32>) attributes {memopt.train_step, memopt.arena_bytes = 0 : i64, memopt.host_arena_bytes = 256 : i64} {
  %h = memref.alloc() {memopt.memory = "host", memopt.offset = 0 : i64} : memref<64xf32>
  // expected-error @+1 {{starts a copy on slot 1 that no memopt.transfer_wait ends}}
  memopt.kernel "memopt.transfer" ins(%a : memref<64xf32>) outs(%h : memref<64xf32>) with {slot = 1 : i64, to = #memopt<memory host>}
  return
}

// -----

// A wait with no copy, and a slot taken twice.
func.func @train_step(%a: memref<64xf32>, %b: memref<64xf32>, %loss: memref<f32>) attributes {memopt.train_step, memopt.arena_bytes = 0 : i64, memopt.host_arena_bytes = 512 : i64} {
  %h = memref.alloc() {memopt.memory = "host", memopt.offset = 0 : i64} : memref<64xf32>
  %g = memref.alloc() {memopt.memory = "host", memopt.offset = 256 : i64} : memref<64xf32>
  // expected-error @+1 {{waits on slot 0, where no copy of these buffers started in its block}}
  memopt.transfer_wait %a, %h slot 0 : memref<64xf32>, memref<64xf32>
  memopt.kernel "memopt.transfer" ins(%a : memref<64xf32>) outs(%h : memref<64xf32>) with {slot = 0 : i64, to = #memopt<memory host>}
  // expected-error @+1 {{starts a copy on slot 0, whose copy is still in flight}}
  memopt.kernel "memopt.transfer" ins(%b : memref<64xf32>) outs(%g : memref<64xf32>) with {slot = 0 : i64, to = #memopt<memory host>}
  memopt.transfer_wait %a, %h slot 0 : memref<64xf32>, memref<64xf32>
  // expected-error @+1 {{waits on slot 0, where no copy of these buffers started in its block}}
  memopt.transfer_wait %b, %g slot 0 : memref<64xf32>, memref<64xf32>
  return
}

// -----

func.func @negative_slot(%a: memref<4xf32>) {
  // expected-error @+1 {{waits on slot -1; slots are non-negative}}
  "memopt.transfer_wait"(%a, %a) <{slot = -1 : i64}> : (memref<4xf32>, memref<4xf32>) -> ()
  return
}

// -----

// A slot that is not a non-negative integer.
func.func @train_step(%a: memref<64xf32>, %loss: memref<f32>) attributes {memopt.train_step, memopt.arena_bytes = 0 : i64, memopt.host_arena_bytes = 256 : i64} {
  %h = memref.alloc() {memopt.memory = "host", memopt.offset = 0 : i64} : memref<64xf32>
  // expected-error @+1 {{has slot "one"; a copy's slot is a non-negative integer}}
  memopt.kernel "memopt.transfer" ins(%a : memref<64xf32>) outs(%h : memref<64xf32>) with {slot = "one", to = #memopt<memory host>}
  // expected-error @+1 {{waits on slot 0, where no copy of these buffers started in its block}}
  memopt.transfer_wait %a, %h slot 0 : memref<64xf32>, memref<64xf32>
  return
}
