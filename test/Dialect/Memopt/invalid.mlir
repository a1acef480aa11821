// RUN: memopt-opt %s -split-input-file -verify-diagnostics

// Every verifier diagnostic of the memopt dialect. Mismatches that the
// custom assembly cannot express are written in the generic form.

func.func @dynamic_shape(%a: tensor<?xf32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<?xf32>'}}
  %0 = "memopt.relu"(%a) : (tensor<?xf32>) -> tensor<?xf32>
  return
}

// -----

func.func @integer_data(%a: tensor<4xi32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = memopt.exp %a : tensor<4xi32>
  return
}

// -----

func.func @unary_result(%a: tensor<4xf32>) {
  // expected-error @+1 {{result has type 'tensor<4xf16>', expected 'tensor<4xf32>' (the type of operand 'input')}}
  %0 = "memopt.tanh"(%a) : (tensor<4xf32>) -> tensor<4xf16>
  return
}

// -----

func.func @binary_shape(%a: tensor<4xf32>, %b: tensor<5xf32>) {
  // expected-error @+1 {{operand 'rhs' has type 'tensor<5xf32>', expected 'tensor<4xf32>' (the type of operand 'lhs')}}
  %0 = "memopt.add"(%a, %b) : (tensor<4xf32>, tensor<5xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @binary_dtype(%a: tensor<4xf32>, %b: tensor<4xbf16>) {
  // expected-error @+1 {{operand 'rhs' has type 'tensor<4xbf16>', expected 'tensor<4xf32>'}}
  %0 = "memopt.mul"(%a, %b) : (tensor<4xf32>, tensor<4xbf16>) -> tensor<4xf32>
  return
}

// -----

func.func @activation_grad(%a: tensor<4xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{operand 'grad' has type 'tensor<8xf32>', expected 'tensor<4xf32>' (the type of operand 'output')}}
  %0 = "memopt.tanh_grad"(%a, %g) : (tensor<4xf32>, tensor<8xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @hardswish_result(%a: tensor<4xf32>) {
  // expected-error @+1 {{result has type 'tensor<4xbf16>', expected 'tensor<4xf32>' (the type of operand 'input')}}
  %0 = "memopt.hardswish"(%a) : (tensor<4xf32>) -> tensor<4xbf16>
  return
}

// -----

func.func @mish_grad(%a: tensor<4xf32>, %g: tensor<4xf16>) {
  // expected-error @+1 {{operand 'grad' has type 'tensor<4xf16>', expected 'tensor<4xf32>' (the type of operand 'input')}}
  %0 = "memopt.mish_grad"(%a, %g) : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

func.func @clamp_no_bound(%a: tensor<4xf32>) {
  // expected-error @+1 {{expected a 'min' or a 'max' bound}}
  %0 = memopt.clamp %a inclusive = false : tensor<4xf32>
  return
}

// -----

func.func @clamp_empty_range(%a: tensor<4xf32>) {
  // expected-error @+1 {{'min' (2) must be <= 'max' (1)}}
  %0 = memopt.clamp %a min 2.0 max 1.0 : tensor<4xf32>
  return
}

// -----

func.func @clamp_nan(%a: tensor<4xf32>) {
  // expected-error @+1 {{'max' must be a number, got nan}}
  %0 = memopt.clamp %a min 0.0 max 0x7FF8000000000000 : tensor<4xf32>
  return
}

// -----

func.func @clamp_result(%a: tensor<4xf32>) {
  // expected-error @+1 {{result has type 'tensor<2x2xf32>', expected 'tensor<4xf32>' (the type of operand 'input')}}
  %0 = "memopt.clamp"(%a) <{min = 0.0 : f64}> : (tensor<4xf32>) -> tensor<2x2xf32>
  return
}

// -----

func.func @clamp_grad_type(%a: tensor<4xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{operand 'grad' has type 'tensor<8xf32>', expected 'tensor<4xf32>' (the type of operand 'input')}}
  %0 = "memopt.clamp_grad"(%a, %g) <{max = 6.0 : f64}> : (tensor<4xf32>, tensor<8xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @clamp_grad_no_bound(%a: tensor<4xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{expected a 'min' or a 'max' bound}}
  %0 = memopt.clamp_grad %a, %g : tensor<4xf32>
  return
}

// -----

func.func @clamp_grad_empty_range(%a: tensor<4xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{'min' (0.5) must be <= 'max' (-0.5)}}
  %0 = memopt.clamp_grad %a, %g min 0.5 max -0.5 inclusive = false : tensor<4xf32>
  return
}

// -----

func.func @clamp_grad_nan(%a: tensor<4xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{'min' must be a number, got nan}}
  %0 = memopt.clamp_grad %a, %g min 0x7FF8000000000000 : tensor<4xf32>
  return
}

// -----

func.func @cast_shape(%a: tensor<4xf32>) {
  // expected-error @+1 {{result has type 'tensor<8xbf16>', expected 'tensor<4xbf16>' (a cast keeps the shape)}}
  %0 = memopt.cast %a : tensor<4xf32> to tensor<8xbf16>
  return
}

// -----

func.func @cast_mask(%a: tensor<4xi1>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4xi1>'}}
  %0 = memopt.cast %a : tensor<4xi1> to tensor<4xf32>
  return
}

// -----

func.func @where_mixed(%c: tensor<4xi1>, %a: tensor<4xi64>, %b: tensor<4xf32>) {
  // expected-error @+1 {{operand 'false_value' has type 'tensor<4xf32>', expected 'tensor<4xi64>'}}
  %0 = "memopt.where"(%c, %a, %b) : (tensor<4xi1>, tensor<4xi64>, tensor<4xf32>) -> tensor<4xi64>
  return
}

// -----

func.func @where_condition(%c: tensor<3xi1>, %a: tensor<4xf32>) {
  // expected-error @+1 {{operand 'condition' has type 'tensor<3xi1>', expected 'tensor<4xi1>' (the shape of the values)}}
  %0 = memopt.where %c, %a, %a : tensor<3xi1>, tensor<4xf32>
  return
}

// -----

func.func @compare_types(%a: tensor<4xf32>, %b: tensor<4xbf16>) {
  // expected-error @+1 {{failed to verify that all of {lhs, rhs} have same type}}
  %0 = "memopt.compare"(%a, %b) {predicate = #memopt<predicate lt>} : (tensor<4xf32>, tensor<4xbf16>) -> tensor<4xi1>
  return
}

// -----

func.func @compare_mask(%m: tensor<4xi1>) {
  // expected-error @+1 {{operand #0 must be}}
  %0 = memopt.compare eq, %m, %m : tensor<4xi1>
  return
}

// -----

func.func @masked_fill_mask(%a: tensor<4x4xf32>, %m: tensor<4xi1>) {
  // expected-error @+1 {{operand 'mask' has type 'tensor<4xi1>', expected 'tensor<4x4xi1>' (the shape of 'input')}}
  %0 = memopt.masked_fill %a, %m, -1.0e9 : tensor<4x4xf32>, tensor<4xi1>
  return
}

// -----

func.func @broadcast_count(%a: tensor<4xf32>) {
  // expected-error @+1 {{expected 1 'dims' (one per dimension), got 2}}
  %0 = memopt.broadcast %a dims [0, 1] : tensor<4xf32> to tensor<4x4xf32>
  return
}

// -----

func.func @broadcast_order(%a: tensor<4x4xf32>) {
  // expected-error @+1 {{'dims' must be strictly increasing, got [1, 0]}}
  %0 = memopt.broadcast %a dims [1, 0] : tensor<4x4xf32> to tensor<4x4xf32>
  return
}

// -----

func.func @broadcast_range(%a: tensor<4xf32>) {
  // expected-error @+1 {{'dims' entry 2 is outside [0, 2)}}
  %0 = memopt.broadcast %a dims [2] : tensor<4xf32> to tensor<3x4xf32>
  return
}

// -----

func.func @broadcast_size(%a: tensor<3xf32>) {
  // expected-error @+1 {{operand dimension 0 (size 3) maps to result dimension 1 (size 4): sizes must be equal or the operand's 1}}
  %0 = memopt.broadcast %a dims [1] : tensor<3xf32> to tensor<2x4xf32>
  return
}

// -----

func.func @broadcast_dtype(%a: tensor<3xf32>) {
  // expected-error @+1 {{result has type 'tensor<2x3xf16>', expected 'tensor<2x3xf32>' (a broadcast keeps the element type)}}
  %0 = memopt.broadcast %a dims [1] : tensor<3xf32> to tensor<2x3xf16>
  return
}

// -----

func.func @reshape_count(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{result 'tensor<7xf32>' has 7 elements, expected 6 (those of 'tensor<2x3xf32>')}}
  %0 = memopt.reshape %a : tensor<2x3xf32> to tensor<7xf32>
  return
}

// -----

func.func @reshape_dtype(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{result has type 'tensor<6xbf16>', expected 'tensor<6xf32>' (a reshape keeps the element type)}}
  %0 = memopt.reshape %a : tensor<2x3xf32> to tensor<6xbf16>
  return
}

// -----

func.func @transpose_not_permutation(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'perm' must be a permutation, got [0, 0]}}
  %0 = memopt.transpose %a perm [0, 0] : tensor<2x3xf32> to tensor<2x2xf32>
  return
}

// -----

func.func @transpose_count(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{expected 2 'perm' entries (one per dimension), got 3}}
  %0 = memopt.transpose %a perm [0, 1, 2] : tensor<2x3xf32> to tensor<2x3xf32>
  return
}

// -----

func.func @transpose_result(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{result has type 'tensor<2x3xf32>', expected 'tensor<3x2xf32>'}}
  %0 = memopt.transpose %a perm [1, 0] : tensor<2x3xf32> to tensor<2x3xf32>
  return
}

// -----

func.func @slice_bounds(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{dimension 1: need 0 <= start <= limit <= 8, got start 2 and limit 9}}
  %0 = memopt.slice %a starts [0, 2] limits [4, 9] strides [1, 1] : tensor<4x8xf32> to tensor<4x7xf32>
  return
}

// -----

func.func @slice_stride(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{'strides' entry must be >= 1, got 0}}
  %0 = memopt.slice %a starts [0, 0] limits [4, 8] strides [1, 0] : tensor<4x8xf32> to tensor<4x8xf32>
  return
}

// -----

func.func @slice_result(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{result has type 'tensor<4x4xf32>', expected 'tensor<4x3xf32>'}}
  %0 = memopt.slice %a starts [0, 2] limits [4, 8] strides [1, 2] : tensor<4x8xf32> to tensor<4x4xf32>
  return
}

// -----

func.func @slice_grad(%g: tensor<4x4xf32>) {
  // expected-error @+1 {{operand 'grad' has type 'tensor<4x4xf32>', expected 'tensor<4x6xf32>' (the slice of the result type)}}
  %0 = memopt.slice_grad %g starts [0, 2] limits [4, 8] strides [1, 1] : tensor<4x4xf32> to tensor<4x8xf32>
  return
}

// -----

func.func @concat_dim(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{'dim' 2 is outside [0, 2)}}
  %0 = memopt.concat %a, %a dim 2 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<8x8xf32>
  return
}

// -----

func.func @concat_input(%a: tensor<4x8xf32>, %b: tensor<3x2xf32>) {
  // expected-error @+1 {{input #1 has type 'tensor<3x2xf32>', expected 'tensor<4x2xf32>' (all inputs match the first except along 'dim')}}
  %0 = memopt.concat %a, %b dim 1 : tensor<4x8xf32>, tensor<3x2xf32> -> tensor<4x10xf32>
  return
}

// -----

func.func @concat_result(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{result has type 'tensor<4x8xf32>', expected 'tensor<4x16xf32>'}}
  %0 = memopt.concat %a, %a dim 1 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @concat_empty() {
  // expected-error @+1 {{needs at least one input}}
  %0 = "memopt.concat"() {dim = 0 : i64} : () -> tensor<4xf32>
  return
}

// -----

func.func @reduce_dims(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{'dims' must be sorted and unique, got [1, 0]}}
  %0 = memopt.reduce_sum %a dims [1, 0] : tensor<4x8xf32> to tensor<f32>
  return
}

// -----

func.func @reduce_result(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{result has type 'tensor<8xf32>', expected 'tensor<4xf32>' (the input without the reduced dimensions)}}
  %0 = memopt.reduce_mean %a dims [1] : tensor<4x8xf32> to tensor<8xf32>
  return
}

// -----

func.func @reduce_dtype(%a: tensor<4x8xbf16>) {
  // expected-error @+1 {{element types bf16 (operand #0 as in_dtype) and f16 (result #0 as out_dtype) are rejected by the runtime's memopt_reduce: result dtype f16 is neither the input's (bf16) nor f32, and the input is not f32 (it accepts in_dtype in {f32, f16, bf16}, out_dtype in {f32, f16, bf16}; out_dtype is in_dtype or f32, or any when in_dtype is f32)}}
  %0 = memopt.reduce_sum %a dims [1] : tensor<4x8xbf16> to tensor<4xf16>
  return
}

// -----

func.func @reduce_range(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{'dims' entry 2 is outside [0, 2)}}
  %0 = memopt.reduce_max %a dims [2] : tensor<4x8xf32> to tensor<4x8xf32>
  return
}

// -----

func.func @softmax_dim(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{'dim' -1 is outside [0, 2)}}
  %0 = memopt.softmax %a dim -1 : tensor<4x8xf32>
  return
}

// -----

func.func @log_softmax_dim(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{'dim' 2 is outside [0, 2)}}
  %0 = memopt.log_softmax %a dim 2 : tensor<4x8xf32>
  return
}

// -----

func.func @softmax_grad(%y: tensor<4x8xf32>, %g: tensor<4x8xbf16>) {
  // expected-error @+1 {{operand 'grad' has type 'tensor<4x8xbf16>', expected 'tensor<4x8xf32>' (the type of operand 'output')}}
  %0 = "memopt.softmax_grad"(%y, %g) {dim = 1 : i64} : (tensor<4x8xf32>, tensor<4x8xbf16>) -> tensor<4x8xf32>
  return
}

// -----

func.func @layer_norm_weight(%x: tensor<2x8x64xf32>, %w: tensor<32xf32>) {
  // expected-error @+1 {{operand 'weight' has type 'tensor<32xf32>', expected 'tensor<64xf32>' (the trailing dimensions of the input)}}
  %y, %m, %r = memopt.layer_norm %x, %w, %w eps 1.0e-05 : tensor<2x8x64xf32>, tensor<32xf32> -> tensor<2x8xf32>
  return
}

// -----

func.func @layer_norm_weight_rank(%x: tensor<64xf32>, %w: tensor<2x64xf32>) {
  // expected-error @+1 {{operand 'weight' must have rank 1 to 1 (the normalised trailing dimensions of 'tensor<64xf32>'), got 'tensor<2x64xf32>'}}
  %y, %m, %r = memopt.layer_norm %x, %w, %w eps 1.0e-05 : tensor<64xf32>, tensor<2x64xf32> -> tensor<f32>
  return
}

// -----

func.func @layer_norm_stats(%x: tensor<2x8x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{result 'mean' has type 'tensor<2xf32>', expected 'tensor<2x8xf32>' (f32 over the leading dimensions)}}
  %y, %m, %r = memopt.layer_norm %x, %w, %w eps 1.0e-05 : tensor<2x8x64xf32>, tensor<64xf32> -> tensor<2xf32>
  return
}

// -----

func.func @layer_norm_eps(%x: tensor<2x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'eps' must be in (0, 1), got 0}}
  %y, %m, %r = memopt.layer_norm %x, %w, %w eps 0.0 : tensor<2x64xf32>, tensor<64xf32> -> tensor<2xf32>
  return
}

// -----

func.func @layer_norm_bias(%x: tensor<2x64xf32>, %w: tensor<64xf32>, %b: tensor<64xbf16>) {
  // expected-error @+1 {{operand 'bias' has type 'tensor<64xbf16>', expected 'tensor<64xf32>' (the type of operand 'weight')}}
  %y, %m, %r = "memopt.layer_norm"(%x, %w, %b) {epsilon = 1.0e-05 : f64} : (tensor<2x64xf32>, tensor<64xf32>, tensor<64xbf16>) -> (tensor<2x64xf32>, tensor<2xf32>, tensor<2xf32>)
  return
}

// -----

func.func @layer_norm_grad(%g: tensor<2x64xf32>, %x: tensor<2x64xf32>, %w: tensor<64xf32>, %m: tensor<4xf32>) {
  // expected-error @+1 {{operand 'mean' has type 'tensor<4xf32>', expected 'tensor<2xf32>' (f32 over the leading dimensions)}}
  %dx, %dw, %db = memopt.layer_norm_grad %g, %x, %w, %m, %m : tensor<2x64xf32>, tensor<64xf32>, tensor<4xf32>
  return
}

// -----

func.func @rms_norm_stats(%x: tensor<2x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{result 'rstd' has type 'tensor<4xf32>', expected 'tensor<2xf32>' (f32 over the leading dimensions)}}
  %y, %r = memopt.rms_norm %x, %w eps 1.0e-06 : tensor<2x64xf32>, tensor<64xf32> -> tensor<4xf32>
  return
}

// -----

func.func @rms_norm_grad(%g: tensor<2x64xf32>, %x: tensor<2x64xf32>, %w: tensor<32xf32>, %r: tensor<2xf32>) {
  // expected-error @+1 {{operand 'weight' has type 'tensor<32xf32>', expected 'tensor<64xf32>' (the trailing dimensions of the input)}}
  %dx, %dw = memopt.rms_norm_grad %g, %x, %w, %r : tensor<2x64xf32>, tensor<32xf32>, tensor<2xf32>
  return
}

// -----

func.func @batch_norm_channels(%x: tensor<4x16x8x8xf32>, %c: tensor<8xf32>) {
  // expected-error @+1 {{operand 'weight' has type 'tensor<8xf32>', expected 'tensor<16xf32>' (f32 per channel (dimension 1 of the input))}}
  %y, %m, %r, %rm, %rv = memopt.batch_norm %x, %c, %c, %c, %c eps 1.0e-05 momentum 0.1 : tensor<4x16x8x8xf32>, tensor<8xf32>
  return
}

// -----

func.func @batch_norm_rank(%x: tensor<16xf32>, %c: tensor<16xf32>) {
  // expected-error @+1 {{operand 'input' must have rank 2 or more, got 'tensor<16xf32>'}}
  %y, %m, %r, %rm, %rv = memopt.batch_norm %x, %c, %c, %c, %c eps 1.0e-05 momentum 0.1 : tensor<16xf32>, tensor<16xf32>
  return
}

// -----

func.func @batch_norm_momentum(%x: tensor<4x16xf32>, %c: tensor<16xf32>) {
  // expected-error @+1 {{'momentum' must be in [0, 1], got 1.5}}
  %y, %m, %r, %rm, %rv = memopt.batch_norm %x, %c, %c, %c, %c eps 1.0e-05 momentum 1.5 : tensor<4x16xf32>, tensor<16xf32>
  return
}

// -----

func.func @batch_norm_grad(%g: tensor<4x16xf32>, %x: tensor<4x8xf32>, %c: tensor<16xf32>) {
  // expected-error @+1 {{operand 'grad' has type 'tensor<4x16xf32>', expected 'tensor<4x8xf32>' (the type of operand 'input')}}
  %dx, %dw, %db = "memopt.batch_norm_grad"(%g, %x, %c, %c, %c) : (tensor<4x16xf32>, tensor<4x8xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<4x8xf32>, tensor<16xf32>, tensor<16xf32>)
  return
}

// -----

func.func @matmul_rank(%a: tensor<8xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+1 {{operand 'lhs' must have rank 2 or more, got 'tensor<8xf32>'}}
  %0 = memopt.matmul %a, %b : tensor<8xf32>, tensor<8x4xf32> -> tensor<4xf32>
  return
}

// -----

func.func @matmul_contracting(%a: tensor<2x8xf32>, %b: tensor<7x4xf32>) {
  // expected-error @+1 {{contracting dimensions differ: 'lhs' 'tensor<2x8xf32>' has 8, 'rhs' 'tensor<7x4xf32>' has 7}}
  %0 = memopt.matmul %a, %b : tensor<2x8xf32>, tensor<7x4xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @matmul_transposed(%a: tensor<2x8xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+1 {{contracting dimensions differ: 'lhs' 'tensor<2x8xf32>' has 8, 'rhs' 'tensor<8x4xf32>' has 4}}
  %0 = memopt.matmul %a, %b transpose_rhs : tensor<2x8xf32>, tensor<8x4xf32> -> tensor<2x8xf32>
  return
}

// -----

// A [4, 8] weight packs into 28 bytes (16 of codes, one block code, 3 of
// padding, a scale and the offset).
func.func @nf4_matmul_bytes(%a: tensor<2x8xf32>, %w: tensor<27xi8>) {
  // expected-error @+1 {{operand 'rhs' has type 'tensor<27xi8>', expected 'tensor<28xi8>' (the NF4 bytes of the 'rhs_shape' weight)}}
  %0 = memopt.nf4_matmul %a, %w shape [4, 8] transpose_rhs : tensor<2x8xf32>, tensor<27xi8> -> tensor<2x4xf32>
  return
}

// -----

func.func @nf4_matmul_contracting(%a: tensor<2x8xf32>, %w: tensor<28xi8>) {
  // expected-error @+1 {{contracting dimensions differ: 'lhs' 'tensor<2x8xf32>' has 8, the weight [4, 8] has 4}}
  %0 = memopt.nf4_matmul %a, %w shape [4, 8] : tensor<2x8xf32>, tensor<28xi8> -> tensor<2x8xf32>
  return
}

// -----

func.func @nf4_matmul_result(%a: tensor<3x2x8xbf16>, %w: tensor<28xi8>) {
  // expected-error @+1 {{result has type 'tensor<3x2x4xf32>', expected 'tensor<3x2x4xbf16>'}}
  %0 = memopt.nf4_matmul %a, %w shape [4, 8] transpose_rhs : tensor<3x2x8xbf16>, tensor<28xi8> -> tensor<3x2x4xf32>
  return
}

// -----

func.func @nf4_matmul_empty(%a: tensor<2x8xf32>, %w: tensor<4xi8>) {
  // expected-error @+1 {{'rhs_shape' must have positive extents, got [0, 8]}}
  %0 = memopt.nf4_matmul %a, %w shape [0, 8] transpose_rhs : tensor<2x8xf32>, tensor<4xi8> -> tensor<2x0xf32>
  return
}

// -----

func.func @nf4_linear_loss_bytes(%x: tensor<3x4xf32>, %w: tensor<24xi8>, %t: tensor<3xi64>) {
  // expected-error @+1 {{operand 'w' has type 'tensor<24xi8>', expected 'tensor<20xi8>' (the NF4 bytes of the 'w_shape' weight)}}
  %l, %lse = memopt.nf4_linear_cross_entropy %x, %w shape [5, 4], %t chunk 2 : tensor<3x4xf32>, tensor<24xi8>, tensor<3xi64> -> tensor<3xf32>
  return
}

// -----

// A [4, 5] weight packs into 20 bytes too, but its rows are 5 wide.
func.func @nf4_linear_loss_width(%x: tensor<3x4xf32>, %w: tensor<20xi8>, %t: tensor<3xi64>) {
  // expected-error @+1 {{'w_shape' [4, 5] must be [classes, 4] (the width of 'x')}}
  %l, %lse = memopt.nf4_linear_cross_entropy %x, %w shape [4, 5], %t chunk 2 : tensor<3x4xf32>, tensor<20xi8>, tensor<3xi64> -> tensor<3xf32>
  return
}

// -----

func.func @nf4_linear_loss_grad_bias(%x: tensor<3x4xf32>, %w: tensor<20xi8>, %t: tensor<3xi64>, %lse: tensor<3xf32>, %g: tensor<f32>) {
  // expected-error @+1 {{has a bias gradient exactly when it has a bias}}
  %dx, %db = memopt.nf4_linear_cross_entropy_grad %x, %w shape [5, 4], %t, %lse, %g chunk 2 : tensor<3x4xf32>, tensor<20xi8>, tensor<3xi64>, tensor<3xf32> -> tensor<3x4xf32>, tensor<5xf32>
  return
}

// -----

// expected-error @+1 {{argument #0 attribute 'memopt.nf4_of' must be the two positive extents of a matrix, got array<i64: 8>}}
func.func @nf4_of_vector(%w: tensor<8xi8> {memopt.nf4_of = array<i64: 8>}) {
  return
}

// -----

func.func @matmul_batch(%a: tensor<3x2x8xf32>, %b: tensor<4x8x4xf32>) {
  // expected-error @+1 {{batch dimensions differ: 'lhs' 'tensor<3x2x8xf32>', 'rhs' 'tensor<4x8x4xf32>' (they must be equal, or one operand a matrix)}}
  %0 = memopt.matmul %a, %b : tensor<3x2x8xf32>, tensor<4x8x4xf32> -> tensor<3x2x4xf32>
  return
}

// -----

func.func @matmul_dtype(%a: tensor<2x8xbf16>, %b: tensor<8x4xf32>) {
  // expected-error @+1 {{operand 'rhs' has type 'tensor<8x4xf32>', expected 'tensor<8x4xbf16>' (the element type of 'lhs')}}
  %0 = memopt.matmul %a, %b : tensor<2x8xbf16>, tensor<8x4xf32> -> tensor<2x4xbf16>
  return
}

// -----

func.func @matmul_result(%a: tensor<2x8xbf16>, %b: tensor<8x4xbf16>) {
  // expected-error @+1 {{element types bf16 (operand #0 as dtype) and f16 (result #0 as out_dtype) are rejected by the runtime's memopt_matmul: result dtype f16 is neither the operands' (bf16) nor f32 (it accepts dtype in {f32, f16, bf16}, out_dtype in {f32, f16, bf16}; out_dtype is dtype or f32)}}
  %0 = memopt.matmul %a, %b : tensor<2x8xbf16>, tensor<8x4xbf16> -> tensor<2x4xf16>
  return
}

// -----

func.func @embedding_rank(%w: tensor<100xf32>, %i: tensor<4xi64>) {
  // expected-error @+1 {{operand 'weight' must have rank 2, got 'tensor<100xf32>'}}
  %0 = memopt.embedding %w, %i : tensor<100xf32>, tensor<4xi64> -> tensor<4xf32>
  return
}

// -----

func.func @embedding_result(%w: tensor<100x16xf32>, %i: tensor<2x4xi64>) {
  // expected-error @+1 {{result has type 'tensor<8x16xf32>', expected 'tensor<2x4x16xf32>' (the index shape followed by the row size)}}
  %0 = memopt.embedding %w, %i : tensor<100x16xf32>, tensor<2x4xi64> -> tensor<8x16xf32>
  return
}

// -----

func.func @embedding_indices(%w: tensor<100x16xf32>, %i: tensor<4xf32>) {
  // expected-error @+1 {{operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4xf32>'}}
  %0 = memopt.embedding %w, %i : tensor<100x16xf32>, tensor<4xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @embedding_grad(%g: tensor<4x8xf32>, %i: tensor<4xi64>) {
  // expected-error @+1 {{operand 'grad' has type 'tensor<4x8xf32>', expected 'tensor<4x16xf32>' (the index shape followed by the row size)}}
  %0 = memopt.embedding_grad %g, %i : tensor<4x8xf32>, tensor<4xi64> -> tensor<100x16xf32>
  return
}

// -----

func.func @embedding_padding_idx(%w: tensor<100x16xf32>, %i: tensor<4xi64>) {
  // expected-error @+1 {{'padding_idx' must be a row of the 'tensor<100x16xf32>' table, in [0, 100), got 100}}
  %0 = memopt.embedding %w, %i padding_idx 100 : tensor<100x16xf32>, tensor<4xi64> -> tensor<4x16xf32>
  return
}

// -----

func.func @embedding_grad_padding_idx(%g: tensor<4x16xf32>, %i: tensor<4xi64>) {
  // expected-error @+1 {{'padding_idx' must be a row of the 'tensor<100x16xf32>' table, in [0, 100), got -1}}
  %0 = memopt.embedding_grad %g, %i padding_idx -1 : tensor<4x16xf32>, tensor<4xi64> -> tensor<100x16xf32>
  return
}

// -----

func.func @conv_rank(%x: tensor<3x16x16xf32>, %w: tensor<8x3x3x3xf32>) {
  // expected-error @+1 {{operand 'input' must have rank 4, got 'tensor<3x16x16xf32>'}}
  %0 = memopt.conv2d %x, %w : tensor<3x16x16xf32>, tensor<8x3x3x3xf32> -> tensor<8x14x14xf32>
  return
}

// -----

func.func @conv_channels(%x: tensor<1x4x16x16xf32>, %w: tensor<8x3x3x3xf32>) {
  // expected-error @+1 {{operand 'filter' 'tensor<8x3x3x3xf32>' has 3 input channels per group, expected 4 (input channels / groups)}}
  %0 = memopt.conv2d %x, %w : tensor<1x4x16x16xf32>, tensor<8x3x3x3xf32> -> tensor<1x8x14x14xf32>
  return
}

// -----

func.func @conv_groups(%x: tensor<1x4x16x16xf32>, %w: tensor<6x1x3x3xf32>) {
  // expected-error @+1 {{'groups' (4) must divide the input channels (4) and the output channels (6)}}
  %0 = memopt.conv2d %x, %w groups 4 : tensor<1x4x16x16xf32>, tensor<6x1x3x3xf32> -> tensor<1x6x14x14xf32>
  return
}

// -----

func.func @conv_result(%x: tensor<1x3x16x16xf32>, %w: tensor<8x3x3x3xf32>) {
  // expected-error @+1 {{result has type 'tensor<1x8x16x16xf32>', expected 'tensor<1x8x8x8xf32>'}}
  %0 = memopt.conv2d %x, %w strides [2, 2] padding [1, 1] : tensor<1x3x16x16xf32>, tensor<8x3x3x3xf32> -> tensor<1x8x16x16xf32>
  return
}

// -----

func.func @conv_too_small(%x: tensor<1x3x2x2xf32>, %w: tensor<8x3x3x3xf32>) {
  // expected-error @+1 {{the filter 'tensor<8x3x3x3xf32>' does not fit in the padded input 'tensor<1x3x2x2xf32>'}}
  %0 = memopt.conv2d %x, %w : tensor<1x3x2x2xf32>, tensor<8x3x3x3xf32> -> tensor<1x8x1x1xf32>
  return
}

// -----

// Attributes are user input: the window arithmetic must not overflow (found
// by UBSan, scripts/check-sanitized.sh).
func.func @conv_padding_overflow(%x: tensor<1x4x16x16xf32>, %w: tensor<8x4x3x3xf32>) {
  // expected-error @+1 {{'padding' or 'dilations' overflow 64-bit sizes}}
  %0 = memopt.conv2d %x, %w padding [4611686018427387904, 0] : tensor<1x4x16x16xf32>, tensor<8x4x3x3xf32> -> tensor<1x8x14x14xf32>
  return
}

// -----

func.func @conv_dilation_overflow(%x: tensor<1x4x16x16xf32>, %w: tensor<8x4x3x3xf32>) {
  // expected-error @+1 {{'padding' or 'dilations' overflow 64-bit sizes}}
  %0 = memopt.conv2d %x, %w dilations [4611686018427387904, 1] : tensor<1x4x16x16xf32>, tensor<8x4x3x3xf32> -> tensor<1x8x14x14xf32>
  return
}

// -----

func.func @conv_stride(%x: tensor<1x3x8x8xf32>, %w: tensor<8x3x3x3xf32>) {
  // expected-error @+1 {{'strides' entry must be >= 1, got 0}}
  %0 = memopt.conv2d %x, %w strides [0, 1] : tensor<1x3x8x8xf32>, tensor<8x3x3x3xf32> -> tensor<1x8x6x6xf32>
  return
}

// -----

func.func @conv_pair(%x: tensor<1x3x8x8xf32>, %w: tensor<8x3x3x3xf32>) {
  // expected-error @+1 {{attribute 'padding' failed to satisfy constraint: i64 dense array attribute with exactly 2 elements}}
  %0 = memopt.conv2d %x, %w padding [1, 1, 1] : tensor<1x3x8x8xf32>, tensor<8x3x3x3xf32> -> tensor<1x8x8x8xf32>
  return
}

// -----

func.func @conv_dtype(%x: tensor<1x3x8x8xbf16>, %w: tensor<8x3x3x3xf32>) {
  // expected-error @+1 {{operand 'filter' has type 'tensor<8x3x3x3xf32>', expected 'tensor<8x3x3x3xbf16>' (the element type of the input)}}
  %0 = memopt.conv2d %x, %w : tensor<1x3x8x8xbf16>, tensor<8x3x3x3xf32> -> tensor<1x8x6x6xbf16>
  return
}

// -----

func.func @conv_grad_input(%g: tensor<1x8x8x8xf32>, %w: tensor<8x3x3x3xf32>) {
  // expected-error @+1 {{operand 'grad' has type 'tensor<1x8x8x8xf32>', expected 'tensor<1x8x6x6xf32>' (the conv2d of the result type by the filter)}}
  %0 = memopt.conv2d_grad_input %g, %w : tensor<1x8x8x8xf32>, tensor<8x3x3x3xf32> -> tensor<1x3x8x8xf32>
  return
}

// -----

func.func @conv_grad_filter(%g: tensor<1x8x8x8xf32>, %x: tensor<1x3x8x8xf32>) {
  // expected-error @+1 {{operand 'grad' has type 'tensor<1x8x8x8xf32>', expected 'tensor<1x8x6x6xf32>' (the conv2d of the input by the result type)}}
  %0 = memopt.conv2d_grad_filter %g, %x : tensor<1x8x8x8xf32>, tensor<1x3x8x8xf32> -> tensor<8x3x3x3xf32>
  return
}

// -----

func.func @pool_result(%x: tensor<1x8x16x16xf32>) {
  // expected-error @+1 {{result has type 'tensor<1x8x16x16xf32>', expected 'tensor<1x8x8x8xf32>'}}
  %0 = memopt.max_pool2d %x kernel [2, 2] strides [2, 2] : tensor<1x8x16x16xf32> to tensor<1x8x16x16xf32>
  return
}

// -----

func.func @pool_padding(%x: tensor<1x8x16x16xf32>) {
  // expected-error @+1 {{'padding' entry 2 exceeds half the kernel (2)}}
  %0 = memopt.avg_pool2d %x kernel [2, 2] strides [2, 2] padding [2, 0] : tensor<1x8x16x16xf32> to tensor<1x8x10x8xf32>
  return
}

// -----

func.func @pool_kernel(%x: tensor<1x8x4x4xf32>) {
  // expected-error @+1 {{the kernel [8, 8] does not fit in the padded input 'tensor<1x8x4x4xf32>'}}
  %0 = memopt.avg_pool2d %x kernel [8, 8] strides [1, 1] : tensor<1x8x4x4xf32> to tensor<1x8x1x1xf32>
  return
}

// -----

func.func @pool_padding_overflow(%x: tensor<1x8x4x4xf32>) {
  // expected-error @+1 {{'kernel' or 'padding' overflow 64-bit sizes}}
  %0 = memopt.avg_pool2d %x kernel [9223372036854775807, 1] strides [1, 1] padding [4611686018427387903, 0] : tensor<1x8x4x4xf32> to tensor<1x8x1x4xf32>
  return
}

// -----

func.func @max_pool_grad(%g: tensor<1x8x4x4xf32>, %x: tensor<1x8x16x16xf32>) {
  // expected-error @+1 {{operand 'grad' has type 'tensor<1x8x4x4xf32>', expected 'tensor<1x8x8x8xf32>' (the pooled input type)}}
  %0 = memopt.max_pool2d_grad %g, %x kernel [2, 2] strides [2, 2] : tensor<1x8x4x4xf32>, tensor<1x8x16x16xf32>
  return
}

// -----

func.func @avg_pool_grad(%g: tensor<1x8x4x4xf32>) {
  // expected-error @+1 {{operand 'grad' has type 'tensor<1x8x4x4xf32>', expected 'tensor<1x8x8x8xf32>' (the pooled result type)}}
  %0 = memopt.avg_pool2d_grad %g kernel [2, 2] strides [2, 2] : tensor<1x8x4x4xf32> to tensor<1x8x16x16xf32>
  return
}

// -----

func.func @dropout_p(%x: tensor<4xf32>) {
  // expected-error @+1 {{'p' must be in [0, 1), got 1}}
  %0 = memopt.dropout %x p 1.0 seed 0 stream 0 : tensor<4xf32>
  return
}

// -----

func.func @dropout_stream(%x: tensor<4xf32>) {
  // expected-error @+1 {{'stream' must be >= 0, got -1}}
  %0 = memopt.dropout %x p 0.5 seed 0 stream -1 : tensor<4xf32>
  return
}

// -----

func.func @cross_entropy_labels(%l: tensor<16x10xf32>, %y: tensor<10xi64>) {
  // expected-error @+1 {{operand 'labels' has type 'tensor<10xi64>', expected 'tensor<16xi64>' (the shape of 'logits' without the class dimension)}}
  %0 = memopt.cross_entropy %l, %y : tensor<16x10xf32>, tensor<10xi64>
  return
}

// -----

func.func @cross_entropy_reduction(%l: tensor<16x10xf32>, %y: tensor<16xi64>) {
  // expected-error @+2 {{expected ::memopt::LossReduction to be one of: mean, sum}}
  // expected-error @+1 {{failed to parse Memopt_LossReductionAttr parameter 'value'}}
  %0 = memopt.cross_entropy %l, %y reduction<max> : tensor<16x10xf32>, tensor<16xi64>
  return
}

// -----

func.func @cross_entropy_label_smoothing(%l: tensor<16x10xf32>, %y: tensor<16xi64>) {
  // expected-error @+1 {{'label_smoothing' must be in [0, 1), got 1}}
  %0 = memopt.cross_entropy %l, %y label_smoothing 1.0 : tensor<16x10xf32>, tensor<16xi64>
  return
}

// -----

func.func @cross_entropy_grad_label_smoothing(%l: tensor<16x10xf32>, %y: tensor<16xi64>, %g: tensor<f32>) {
  // expected-error @+1 {{'label_smoothing' must be in [0, 1), got -0.1}}
  %0 = memopt.cross_entropy_grad %l, %y, %g label_smoothing -0.1 : tensor<16x10xf32>, tensor<16xi64>
  return
}

// -----

func.func @cross_entropy_grad(%l: tensor<16x10xf32>, %y: tensor<16xi64>, %g: tensor<f32>) {
  // expected-error @+1 {{result has type 'tensor<16x10xbf16>', expected 'tensor<16x10xf32>' (the type of operand 'logits')}}
  %0 = "memopt.cross_entropy_grad"(%l, %y, %g) : (tensor<16x10xf32>, tensor<16xi64>, tensor<f32>) -> tensor<16x10xbf16>
  return
}

// -----

func.func @cross_entropy_loss_type(%l: tensor<16x10xf32>, %y: tensor<16xi64>) {
  // expected-error @+1 {{result #0 must be 0D tensor of 32-bit float values, but got 'tensor<16xf32>'}}
  %0 = "memopt.cross_entropy"(%l, %y) : (tensor<16x10xf32>, tensor<16xi64>) -> tensor<16xf32>
  return
}

// -----

func.func @mse_target(%a: tensor<8x4xf32>, %b: tensor<8x3xf32>) {
  // expected-error @+1 {{operand 'target' has type 'tensor<8x3xf32>', expected 'tensor<8x4xf32>' (the type of operand 'input')}}
  %0 = "memopt.mse_loss"(%a, %b) : (tensor<8x4xf32>, tensor<8x3xf32>) -> tensor<f32>
  return
}

// -----

func.func @mse_grad(%a: tensor<8x4xf32>, %g: tensor<f32>) {
  // expected-error @+1 {{result has type 'tensor<4x8xf32>', expected 'tensor<8x4xf32>' (the type of operand 'input')}}
  %0 = "memopt.mse_loss_grad"(%a, %a, %g) : (tensor<8x4xf32>, tensor<8x4xf32>, tensor<f32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @sgd_lr(%p: tensor<4xf32>) {
  // expected-error @+1 {{'lr' must be >= 0, got -0.1}}
  %0, %1 = memopt.sgd_update %p, %p, %p lr -0.1 momentum 0.9 weight_decay 0.0 : tensor<4xf32>
  return
}

// -----

func.func @sgd_types(%p: tensor<4xf32>, %g: tensor<4xbf16>) {
  // expected-error @+1 {{operand 'grad' has type 'tensor<4xbf16>', expected 'tensor<4xf32>' (the type of operand 'param')}}
  %0, %1 = "memopt.sgd_update"(%p, %g, %p) {lr = 0.1 : f64, momentum = 0.9 : f64, weight_decay = 0.0 : f64} : (tensor<4xf32>, tensor<4xbf16>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @adamw_beta(%p: tensor<4xf32>, %t: tensor<i64>) {
  // expected-error @+1 {{'beta2' must be in [0, 1), got 1}}
  %0, %1, %2 = memopt.adamw_update %p, %p, %p, %p step %t lr 1.0e-03 betas(0.9, 1.0) eps 1.0e-08 weight_decay 0.01 : tensor<4xf32>
  return
}

// -----

func.func @adamw_8bit_size(%p: tensor<300xf32>, %m: tensor<300xi8>, %t: tensor<i64>) {
  // expected-error @+1 {{operand 'exp_avg' has type 'tensor<300xi8>', expected 'tensor<520xi8>' (the packed 8-bit moments of the parameter)}}
  %0, %1, %2 = memopt.adamw_update %p, %p, %m, %m step %t lr 1.0e-03 betas(0.9, 0.999) eps 1.0e-08 weight_decay 0.01 : tensor<300xf32> state tensor<300xi8>
  return
}

// -----

func.func @adamw_8bit_bf16(%p: tensor<300xbf16>, %m: tensor<308xi8>, %t: tensor<i64>) {
  // expected-error @+1 {{has 8-bit moments, which update f32 parameters only, not 'tensor<300xbf16>'}}
  %0, %1, %2 = memopt.adamw_update %p, %p, %m, %m step %t lr 1.0e-03 betas(0.9, 0.999) eps 1.0e-08 weight_decay 0.01 : tensor<300xbf16> state tensor<308xi8>
  return
}

// -----

func.func @adamw_eps(%p: tensor<4xf32>, %t: tensor<i64>) {
  // expected-error @+1 {{'eps' must be in (0, 1), got 0}}
  %0, %1, %2 = memopt.adamw_update %p, %p, %p, %p step %t lr 1.0e-03 betas(0.9, 0.999) eps 0.0 weight_decay 0.01 : tensor<4xf32>
  return
}

// -----

func.func @adamw_state(%p: tensor<4xf32>, %m: tensor<8xf32>, %t: tensor<i64>) {
  // expected-error @+1 {{operand 'exp_avg' has type 'tensor<8xf32>', expected 'tensor<4xf32>' (the type of operand 'param')}}
  %0, %1, %2 = "memopt.adamw_update"(%p, %p, %m, %p, %t) {lr = 1.0e-03 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, weight_decay = 0.0 : f64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0>} : (tensor<4xf32>, tensor<4xf32>, tensor<8xf32>, tensor<4xf32>, tensor<i64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @adamw_step_type(%p: tensor<4xf32>, %t: tensor<i32>) {
  // expected-error @+1 {{operand #4 must be 0D tensor of 64-bit signless integer values, but got 'tensor<i32>'}}
  %0, %1, %2 = "memopt.adamw_update"(%p, %p, %p, %p, %t) {lr = 1.0e-03 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, weight_decay = 0.0 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<i32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @unscale_empty(%s: tensor<f32>) {
  // expected-error @+1 {{needs at least one gradient}}
  %0 = "memopt.unscale"(%s) : (tensor<f32>) -> tensor<i1>
  return
}

// -----

func.func @update_scale_growth(%s: tensor<f32>, %n: tensor<i64>, %f: tensor<i1>) {
  // expected-error @+1 {{'growth' must be > 1, got 1}}
  %0, %1 = memopt.update_scale %s, %n, %f growth 1.0 backoff 0.5 interval 2000
  return
}

// -----

func.func @update_scale_backoff(%s: tensor<f32>, %n: tensor<i64>, %f: tensor<i1>) {
  // expected-error @+1 {{'backoff' must be in (0, 1), got 1}}
  %0, %1 = memopt.update_scale %s, %n, %f growth 2.0 backoff 1.0 interval 2000
  return
}

// -----

func.func @update_scale_interval(%s: tensor<f32>, %n: tensor<i64>, %f: tensor<i1>) {
  // expected-error @+1 {{'interval' must be >= 1, got 0}}
  %0, %1 = memopt.update_scale %s, %n, %f growth 2.0 backoff 0.5 interval 0
  return
}

// -----

func.func @unknown_op(%x: tensor<4xf32>) {
  // expected-error @+1 {{custom op 'memopt.frobnicate' is unknown}}
  %0 = memopt.frobnicate %x : tensor<4xf32>
  return
}

// -----
// Function-level attributes: roles, names, batch dimensions and the loss
// function's signature.

// expected-error @+1 {{argument #1 of a memopt.loss function has no 'memopt.role' (expected "param", "input", "label" or "state")}}
func.func @missing_role(%x: tensor<4xf32> {memopt.role = "input", memopt.name = "x"},
                        %w: tensor<4xf32> {memopt.name = "w"}) -> tensor<f32> attributes {memopt.loss} {
  %l = memopt.mse_loss %x, %w : tensor<4xf32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{argument #0 attribute 'memopt.role' must be one of "param", "frozen", "input", "label", "state", "optim", "loss", "param_copy", got "weight"}}
func.func @bad_role(%w: tensor<4xf32> {memopt.role = "weight", memopt.name = "w"}) {
  return
}

// -----

// expected-error @+1 {{argument #0 of a memopt.loss function has no 'memopt.name'}}
func.func @missing_name(%w: tensor<4xf32> {memopt.role = "param"}) -> tensor<f32> attributes {memopt.loss} {
  %l = memopt.mse_loss %w, %w : tensor<4xf32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{argument #0 attribute 'memopt.name' must be a non-empty string, got ""}}
func.func @empty_name(%w: tensor<4xf32> {memopt.role = "param", memopt.name = ""}) {
  return
}

// -----

// expected-error @+1 {{argument #1 reuses the name 'w'}}
func.func @duplicate_name(%a: tensor<4xf32> {memopt.role = "param", memopt.name = "w"},
                          %b: tensor<4xf32> {memopt.role = "param", memopt.name = "w"}) -> tensor<f32> attributes {memopt.loss} {
  %l = memopt.mse_loss %a, %b : tensor<4xf32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{argument #0 attribute 'memopt.batch_dim' is 2, outside [0, 2) for type 'tensor<4x8xf32>'}}
func.func @batch_dim_range(%x: tensor<4x8xf32> {memopt.role = "input", memopt.name = "x", memopt.batch_dim = 2 : i64}) {
  return
}

// -----

// expected-error @+1 {{argument #0 attribute 'memopt.batch_dim' must be an integer, got "0"}}
func.func @batch_dim_type(%x: tensor<4x8xf32> {memopt.role = "input", memopt.name = "x", memopt.batch_dim = "0"}) {
  return
}

// -----

// expected-error @+1 {{argument #0 has 'memopt.batch_dim' but role "param" (only inputs and labels have a batch)}}
func.func @batch_dim_on_param(%w: tensor<4xf32> {memopt.role = "param", memopt.name = "w", memopt.batch_dim = 0 : i64}) -> tensor<f32> attributes {memopt.loss} {
  %l = memopt.mse_loss %w, %w : tensor<4xf32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{argument #0 has role "param" and must be a float tensor, got 'tensor<4xi64>'}}
func.func @integer_param(%w: tensor<4xi64> {memopt.role = "param", memopt.name = "w"}) -> tensor<f32> attributes {memopt.loss} {
  %c = memopt.constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
}

// -----

// expected-error @+1 {{marked memopt.loss must return the loss as its first result, of type 'tensor<f32>', got 'tensor<4xf32>'}}
func.func @loss_type(%w: tensor<4xf32> {memopt.role = "param", memopt.name = "w"}) -> tensor<4xf32> attributes {memopt.loss} {
  return %w : tensor<4xf32>
}

// -----

// expected-error @+1 {{marked memopt.loss must return the loss, of type 'tensor<f32>', but returns nothing}}
func.func @no_loss(%w: tensor<4xf32> {memopt.role = "param", memopt.name = "w"}) attributes {memopt.loss} {
  return
}

// -----

// expected-error @+1 {{marked memopt.loss must return the loss followed by one value per "state" argument: expected 2 results, got 1}}
func.func @missing_state_result(%w: tensor<4xf32> {memopt.role = "param", memopt.name = "w"},
                                %s: tensor<4xf32> {memopt.role = "state", memopt.name = "bn.running_mean"}) -> tensor<f32> attributes {memopt.loss} {
  %l = memopt.mse_loss %w, %s : tensor<4xf32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{result #1 returns the new value of argument #0 ('s') and must have type 'tensor<4xf32>', got 'tensor<8xf32>'}}
func.func @state_result_type(%s: tensor<4xf32> {memopt.role = "state", memopt.name = "s"},
                             %t: tensor<8xf32> {memopt.role = "param", memopt.name = "t"}) -> (tensor<f32>, tensor<8xf32>) attributes {memopt.loss} {
  %l = memopt.mse_loss %s, %s : tensor<4xf32>
  return %l, %t : tensor<f32>, tensor<8xf32>
}

// -----

// expected-error @+1 {{'func.func' op marked memopt.loss must have a body}}
func.func private @declaration(tensor<4xf32> {memopt.role = "param", memopt.name = "w"}) -> tensor<f32> attributes {memopt.loss}

// -----

// expected-error @+1 {{attribute 'memopt.loss' only applies to functions}}
module attributes {memopt.loss} {
}

// -----

func.func @scope_type(%x: tensor<4xf32>) {
  // expected-error @+1 {{attribute 'memopt.scope' must be a string, got 3 : i64}}
  %0 = memopt.relu %x {memopt.scope = 3 : i64} : tensor<4xf32>
  return
}

// -----

func.func @unknown_op_attr(%x: tensor<4xf32>) {
  // expected-error @+1 {{has unknown memopt attribute 'memopt.color' (expected memopt.scope, memopt.loss, memopt.train_step, memopt.eval_step, memopt.offset, memopt.arena_bytes, memopt.memory, memopt.on_host, memopt.host_arena_bytes, memopt.precision, memopt.optimizer, memopt.loss_scale, memopt.recompute, memopt.micro_batches or memopt.data_parallel)}}
  %0 = memopt.relu %x {memopt.color = "red"} : tensor<4xf32>
  return
}

// -----

// expected-error @+1 {{argument #0 has unknown memopt attribute 'memopt.rol' (expected memopt.role, memopt.name, memopt.batch_dim, memopt.shard_of, memopt.nf4_of or memopt.hparams)}}
func.func @unknown_arg_attr(%x: tensor<4xf32> {memopt.rol = "param"}) {
  return
}

// -----

// expected-error @+1 {{argument #1 has batch size 6 but argument #0 has 8 (every memopt.batch_dim indexes the same examples)}}
func.func @batch_sizes(%x: tensor<8x4xf32> {memopt.role = "input", memopt.name = "x", memopt.batch_dim = 0 : i64},
                       %y: tensor<6xi64> {memopt.role = "label", memopt.name = "y", memopt.batch_dim = 0 : i64}) -> tensor<f32> attributes {memopt.loss} {
  %c = memopt.constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
}

// -----

// expected-error @+1 {{marked memopt.loss must return the loss followed by one value per "state" argument: expected 1 result, got 2}}
func.func @extra_result(%w: tensor<4xf32> {memopt.role = "param", memopt.name = "w"}) -> (tensor<f32>, tensor<4xf32>) attributes {memopt.loss} {
  %l = memopt.mse_loss %w, %w : tensor<4xf32>
  return %l, %w : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error @+1 {{argument #0 has role "optim", which only a training step has}}
func.func @optim_in_loss(%m: tensor<4xf32> {memopt.role = "optim", memopt.name = "m"}) -> tensor<f32> attributes {memopt.loss} {
  %l = memopt.mse_loss %m, %m : tensor<4xf32>
  return %l : tensor<f32>
}

// -----

func.func @negative_offset() {
  // expected-error @+1 {{attribute 'memopt.offset' must be a non-negative integer, got -256 : i64}}
  %0 = memref.alloc() {memopt.offset = -256 : i64} : memref<4xf32>
  return
}

// -----

func.func @kernel_name(%a: memref<4xf32>) {
  // expected-error @+1 {{'memopt.frob' is not a memopt tensor op}}
  memopt.kernel "memopt.frob" ins(%a : memref<4xf32>) outs(%a : memref<4xf32>) with {}
  return
}

// -----

func.func @kernel_outs(%a: memref<4xf32>) {
  // expected-error @+1 {{needs at least one output buffer}}
  "memopt.kernel"(%a) {kernel = "memopt.relu", op_attributes = {}, operandSegmentSizes = array<i32: 1, 0>} : (memref<4xf32>) -> ()
  return
}

// -----

// Kernels that bufferization writes are checked against the runtime's dtype
// table too (an f32 pass into a bf16 result is fine, a bf16 one into f16 is
// not).
func.func @kernel_dtype(%a: memref<4x8xbf16>, %b: memref<4xf16>) {
  // expected-error @+1 {{element types bf16 (input #0 as in_dtype) and f16 (output #0 as out_dtype) are rejected by the runtime's memopt_reduce}}
  memopt.kernel "memopt.reduce_sum" ins(%a : memref<4x8xbf16>) outs(%b : memref<4xf16>) with {dims = array<i64: 1>}
  return
}

// -----

func.func @kernel_no_dtype(%a: memref<4xf64>, %b: memref<4xf64>) {
  // expected-error @+1 {{has element type 'f64' on input #0 as dtype of memopt_unary, which the runtime has no dtype for}}
  memopt.kernel "memopt.relu" ins(%a : memref<4xf64>) outs(%b : memref<4xf64>) with {}
  return
}

// -----

func.func @attention_rank(%q: tensor<1x2x3x4x8xf32>) {
  // expected-error @+1 {{operand 'q' must have rank 2 to 4}}
  %o, %l = memopt.attention %q, %q, %q scale 1.0 : tensor<1x2x3x4x8xf32>, tensor<1x2x3x4x8xf32>, tensor<1x2x3x4x8xf32> -> tensor<1x2x3x4x8xf32>, tensor<1x2x3x4xf32>
  return
}

// -----

func.func @attention_width(%q: tensor<4x8xf32>, %k: tensor<6x7xf32>, %v: tensor<6x3xf32>) {
  // expected-error @+1 {{operand 'k' 'tensor<6x7xf32>' has a width other than operand 'q''s (8)}}
  %o, %l = memopt.attention %q, %k, %v scale 1.0 : tensor<4x8xf32>, tensor<6x7xf32>, tensor<6x3xf32> -> tensor<4x3xf32>, tensor<4xf32>
  return
}

// -----

func.func @attention_keys(%q: tensor<4x8xf32>, %k: tensor<6x8xf32>, %v: tensor<5x3xf32>) {
  // expected-error @+1 {{operand 'v' 'tensor<5x3xf32>' has a sequence length other than operand 'k''s (6)}}
  %o, %l = memopt.attention %q, %k, %v scale 1.0 : tensor<4x8xf32>, tensor<6x8xf32>, tensor<5x3xf32> -> tensor<4x3xf32>, tensor<4xf32>
  return
}

// -----

func.func @attention_batch(%q: tensor<2x4x8xf32>, %k: tensor<3x6x8xf32>) {
  // expected-error @+1 {{operand 'k' has type 'tensor<3x6x8xf32>', expected the element type and batch dimensions of operand 'q' 'tensor<2x4x8xf32>'}}
  %o, %l = memopt.attention %q, %k, %k scale 1.0 : tensor<2x4x8xf32>, tensor<3x6x8xf32>, tensor<3x6x8xf32> -> tensor<2x4x8xf32>, tensor<2x4xf32>
  return
}

// -----

func.func @attention_mask(%q: tensor<4x8xf32>, %m: tensor<3x4xi1>) {
  // expected-error @+1 {{operand 'mask' 'tensor<3x4xi1>' does not broadcast to the scores' shape 'tensor<4x4xf32>'}}
  %o, %l = memopt.attention %q, %q, %q mask %m scale 1.0 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<3x4xi1> -> tensor<4x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @attention_out(%q: tensor<4x8xf32>, %v: tensor<4x3xf32>) {
  // expected-error @+1 {{the output has type 'tensor<4x8xf32>', expected 'tensor<4x3xf32>'}}
  %o, %l = memopt.attention %q, %q, %v scale 1.0 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x3xf32> -> tensor<4x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @attention_lse(%q: tensor<4x8xbf16>) {
  // expected-error @+1 {{'lse' has type 'tensor<3xf32>', expected 'tensor<4xf32>' (one f32 per query row)}}
  %o, %l = memopt.attention %q, %q, %q scale 1.0 : tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<4x8xbf16> -> tensor<4x8xbf16>, tensor<3xf32>
  return
}

// -----

func.func @attention_dropout(%q: tensor<4x8xf32>) {
  // expected-error @+1 {{'dropout' must be in [0, 1), got 1}}
  %o, %l = memopt.attention %q, %q, %q scale 1.0 dropout 1.0 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @attention_scale(%q: tensor<4x8xf32>) {
  // expected-error @+1 {{'scale' must be finite, got inf}}
  %o, %l = memopt.attention %q, %q, %q scale 0x7FF0000000000000 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @linear_ce_weight(%x: tensor<3x4xf32>, %w: tensor<5x3xf32>, %t: tensor<3xi64>) {
  // expected-error @+1 {{operand 'w' has type 'tensor<5x3xf32>', expected 'tensor<5x4xf32>' ([classes, width of 'x'])}}
  %l, %s = memopt.linear_cross_entropy %x, %w, %t chunk 1 : tensor<3x4xf32>, tensor<5x3xf32>, tensor<3xi64> -> tensor<3xf32>
  return
}

// -----

// The weight is x's element type or an f32 master weight, nothing else.
func.func @linear_ce_weight_dtype(%x: tensor<3x4xbf16>, %w: tensor<5x4xf16>, %t: tensor<3xi64>) {
  // expected-error @+1 {{w dtype f16 is neither x's (bf16) nor f32}}
  %l, %s = memopt.linear_cross_entropy %x, %w, %t chunk 1 : tensor<3x4xbf16>, tensor<5x4xf16>, tensor<3xi64> -> tensor<3xf32>
  return
}

// -----

func.func @linear_ce_labels(%x: tensor<3x4xf32>, %w: tensor<5x4xf32>, %t: tensor<2xi64>) {
  // expected-error @+1 {{operand 'labels' has type 'tensor<2xi64>', expected 'tensor<3xi64>' (the shape of 'x' without its width)}}
  %l, %s = memopt.linear_cross_entropy %x, %w, %t chunk 1 : tensor<3x4xf32>, tensor<5x4xf32>, tensor<2xi64> -> tensor<2xf32>
  return
}

// -----

func.func @linear_ce_bias(%x: tensor<3x4xf32>, %w: tensor<5x4xf32>, %t: tensor<3xi64>, %b: tensor<4xf32>) {
  // expected-error @+1 {{operand 'bias' has type 'tensor<4xf32>', expected 'tensor<5xf32>' (one per class, as 'w')}}
  %l, %s = memopt.linear_cross_entropy %x, %w, %t bias %b chunk 1 : tensor<3x4xf32>, tensor<5x4xf32>, tensor<3xi64>, tensor<4xf32> -> tensor<3xf32>
  return
}

// -----

func.func @linear_ce_chunk(%x: tensor<3x4xf32>, %w: tensor<5x4xf32>, %t: tensor<3xi64>) {
  // expected-error @+1 {{'chunk' must be in [1, 5] (the classes), got 6}}
  %l, %s = memopt.linear_cross_entropy %x, %w, %t chunk 6 : tensor<3x4xf32>, tensor<5x4xf32>, tensor<3xi64> -> tensor<3xf32>
  return
}

// -----

func.func @linear_ce_grad_bias(%x: tensor<3x4xf32>, %w: tensor<5x4xf32>, %t: tensor<3xi64>, %s: tensor<3xf32>, %g: tensor<f32>, %b: tensor<5xf32>) {
  // expected-error @+1 {{has a bias gradient exactly when it has a bias}}
  %dx, %dw = memopt.linear_cross_entropy_grad %x, %w, %t, %s, %g bias %b chunk 5 : tensor<3x4xf32>, tensor<5x4xf32>, tensor<3xi64>, tensor<3xf32>, tensor<5xf32> -> tensor<3x4xf32>, tensor<5x4xf32>
  return
}

// -----

// expected-error @+1 {{argument #0 attribute 'memopt.hparams' must be a dictionary of float values named lr, weight_decay, beta1, beta2, eps or momentum, got {rate = 1.000000e-01 : f64}}}
func.func @bad_hparams(%w: tensor<4xf32> {memopt.role = "param", memopt.name = "w", memopt.hparams = {rate = 0.1 : f64}}) {
  return
}

// -----

// expected-error @+1 {{attribute 'memopt.optimizer' must be "adamw" or "sgd" on a function, got "adam"}}
func.func @bad_optimizer(%w: tensor<4xf32>) attributes {memopt.optimizer = "adam"} {
  return
}
