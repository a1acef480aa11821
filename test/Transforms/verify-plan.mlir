// RUN: memopt-opt %s -split-input-file -verify-diagnostics -memopt-verify-plan

// A valid plan: buffers with disjoint lifetimes share offset 0, the two live
// together do not overlap.
func.func @valid(%x: memref<8xf32>, %out: memref<8xf32>) attributes {memopt.train_step, memopt.arena_bytes = 512 : i64} {
  %a = memref.alloc() {memopt.offset = 0 : i64} : memref<8xf32>
  %b = memref.alloc() {memopt.offset = 256 : i64} : memref<8xf32>
  memopt.kernel "memopt.add" ins(%x, %a : memref<8xf32>, memref<8xf32>) outs(%b : memref<8xf32>) with {}
  memref.dealloc %a : memref<8xf32>
  %c = memref.alloc() {memopt.offset = 0 : i64} : memref<8xf32>
  memopt.kernel "memopt.add" ins(%b, %b : memref<8xf32>, memref<8xf32>) outs(%c : memref<8xf32>) with {}
  memopt.kernel "memopt.relu" ins(%c : memref<8xf32>) outs(%out : memref<8xf32>) with {}
  memref.dealloc %b : memref<8xf32>
  memref.dealloc %c : memref<8xf32>
  return
}

// -----

// Two buffers live at the same time share bytes [0, 32).
func.func @overlap(%x: memref<8xf32>, %out: memref<8xf32>) attributes {memopt.train_step, memopt.arena_bytes = 512 : i64} {
  // expected-note @below {{the other buffer is allocated here}}
  %a = memref.alloc() {memopt.offset = 0 : i64} : memref<8xf32>
  memopt.kernel "memopt.relu" ins(%x : memref<8xf32>) outs(%a : memref<8xf32>) with {}
  %u = memref.alloc() {memopt.offset = 256 : i64} : memref<8xf32>
  // expected-error @below {{'memref.alloc' op overlaps a buffer live at the same time: bytes [0, 32) live over ops [3, 4] and bytes [0, 32) live over ops [0, 4]}}
  %b = memref.alloc() {memopt.offset = 0 : i64} : memref<8xf32>
  memopt.kernel "memopt.add" ins(%a, %x : memref<8xf32>, memref<8xf32>) outs(%b : memref<8xf32>) with {}
  memref.dealloc %a : memref<8xf32>
  memref.dealloc %b : memref<8xf32>
  memref.dealloc %u : memref<8xf32>
  return
}

// -----

// A buffer used inside a loop is live over the whole loop, so a body
// temporary cannot reuse its bytes even after its last use in the body.
func.func @loop(%x: memref<8xf32>) attributes {memopt.train_step, memopt.arena_bytes = 512 : i64} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  // expected-note @below {{the other buffer is allocated here}}
  %acc = memref.alloc() {memopt.offset = 0 : i64} : memref<8xf32>
  scf.for %i = %c0 to %c4 step %c1 {
    memopt.kernel "memopt.add" ins(%acc, %x : memref<8xf32>, memref<8xf32>) outs(%acc : memref<8xf32>) with {}
    // expected-error @below {{overlaps a buffer live at the same time: bytes [0, 32) live over ops [6, 7] and bytes [0, 32) live over ops [3, 9]}}
    %t = memref.alloc() {memopt.offset = 0 : i64} : memref<8xf32>
    memopt.kernel "memopt.relu" ins(%x : memref<8xf32>) outs(%t : memref<8xf32>) with {}
    memref.dealloc %t : memref<8xf32>
  }
  memref.dealloc %acc : memref<8xf32>
  return
}

// -----

// Overlap in part: [0, 512) and [256, 512).
func.func @partial(%x: memref<64xf32>, %y: memref<128xf32>) attributes {memopt.train_step, memopt.arena_bytes = 768 : i64} {
  // expected-note @below {{the other buffer is allocated here}}
  %a = memref.alloc() {memopt.offset = 0 : i64} : memref<128xf32>
  // expected-error @below {{overlaps a buffer live at the same time: bytes [256, 512) live over ops [1, 2] and bytes [0, 512) live over ops [0, 2]}}
  %b = memref.alloc() {memopt.offset = 256 : i64} : memref<64xf32>
  memopt.kernel "memopt.add" ins(%a, %x : memref<128xf32>, memref<64xf32>) outs(%b : memref<64xf32>) with {}
  memref.dealloc %a : memref<128xf32>
  memref.dealloc %b : memref<64xf32>
  return
}

// -----

func.func @misaligned() attributes {memopt.train_step, memopt.arena_bytes = 512 : i64} {
  // expected-error @below {{'memref.alloc' op offset 128 is not a multiple of the alignment 256}}
  %a = memref.alloc() {memopt.offset = 128 : i64} : memref<8xf32>
  memref.dealloc %a : memref<8xf32>
  return
}

// -----

func.func @outside() attributes {memopt.train_step, memopt.arena_bytes = 256 : i64} {
  // expected-error @below {{'memref.alloc' op occupies bytes [256, 288), outside the arena [0, 256)}}
  %a = memref.alloc() {memopt.offset = 256 : i64} : memref<8xf32>
  memref.dealloc %a : memref<8xf32>
  return
}

// -----

func.func @no_offset() attributes {memopt.train_step, memopt.arena_bytes = 256 : i64} {
  // expected-error @below {{'memref.alloc' op has no 'memopt.offset'}}
  %a = memref.alloc() : memref<8xf32>
  memref.dealloc %a : memref<8xf32>
  return
}

// -----

// expected-error @below {{'func.func' op has no 'memopt.arena_bytes'; run --memopt-plan-buffers first}}
func.func @no_arena() attributes {memopt.train_step} {
  return
}

// -----

// expected-error @below {{no function marked 'memopt.train_step' to verify the plan of (run --memopt-autodiff first)}}
module {
}

// -----

// Optimizer offload: each arena is checked on its own buffers, and each
// kernel reads and writes only the memory it runs in.
func.func @offload_valid(%g: memref<8xf32>, %p: memref<8xf32> {memopt.memory = "host"}, %copy: memref<8xf32>) attributes {memopt.train_step, memopt.arena_bytes = 0 : i64, memopt.host_arena_bytes = 256 : i64} {
  %h = memref.alloc() {memopt.memory = "host", memopt.offset = 0 : i64} : memref<8xf32>
  memopt.kernel "memopt.transfer" ins(%g : memref<8xf32>) outs(%h : memref<8xf32>) with {to = #memopt<memory host>}
  memopt.kernel "memopt.add" ins(%p, %h : memref<8xf32>, memref<8xf32>) outs(%p : memref<8xf32>) with {} {memopt.on_host}
  memref.dealloc %h : memref<8xf32>
  memopt.kernel "memopt.transfer" ins(%p : memref<8xf32>) outs(%copy : memref<8xf32>) with {to = #memopt<memory device>}
  return
}

// -----

func.func @offload_wrong_memory(%g: memref<8xf32>, %p: memref<8xf32> {memopt.memory = "host"}) attributes {memopt.train_step, memopt.arena_bytes = 256 : i64, memopt.host_arena_bytes = 256 : i64} {
  %h = memref.alloc() {memopt.memory = "host", memopt.offset = 0 : i64} : memref<8xf32>
  // expected-error @below {{'memopt.kernel' op read #0 lives in host memory, but the kernel reads device memory}}
  memopt.kernel "memopt.relu" ins(%p : memref<8xf32>) outs(%g : memref<8xf32>) with {}
  // expected-error @below {{'memopt.kernel' op write #0 lives in device memory, but the kernel writes host memory}}
  memopt.kernel "memopt.transfer" ins(%g : memref<8xf32>) outs(%g : memref<8xf32>) with {to = #memopt<memory host>}
  memref.dealloc %h : memref<8xf32>
  return
}

// -----

func.func @offload_outside_host_arena(%g: memref<8xf32>) attributes {memopt.train_step, memopt.arena_bytes = 0 : i64, memopt.host_arena_bytes = 16 : i64} {
  // expected-error @below {{occupies bytes [0, 32), outside the arena [0, 16) of 'memopt.host_arena_bytes'}}
  %h = memref.alloc() {memopt.memory = "host", memopt.offset = 0 : i64} : memref<8xf32>
  memopt.kernel "memopt.transfer" ins(%g : memref<8xf32>) outs(%h : memref<8xf32>) with {to = #memopt<memory host>}
  memref.dealloc %h : memref<8xf32>
  return
}
