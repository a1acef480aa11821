// Every memopt op in its custom form: each op prints as it is written here
// (optional attributes at their defaults are elided), parses back, and
// survives the generic form.

// RUN: memopt-opt %s --verify-roundtrip | FileCheck %s
// RUN: memopt-opt %s --mlir-print-op-generic | memopt-opt | FileCheck %s

// CHECK-LABEL: func.func @constants_casts_selection(
// CHECK-SAME:    %[[X:.*]]: tensor<4x8xf32>, %[[Y:.*]]: tensor<4x8xf32>, %[[C:.*]]: tensor<4x8xi1>)
// CHECK:         %{{.*}} = memopt.constant dense<1.500000e+00> : tensor<4x8xf32>
// CHECK:         %[[CI:.*]] = memopt.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
// CHECK:         %[[CM:.*]] = memopt.constant dense<true> : tensor<4x8xi1>
// CHECK:         %[[H:.*]] = memopt.cast %[[X]] : tensor<4x8xf32> to tensor<4x8xbf16>
// CHECK:         %{{.*}} = memopt.cast %[[H]] : tensor<4x8xbf16> to tensor<4x8xf16>
// CHECK:         %{{.*}} = memopt.where %[[C]], %[[X]], %[[Y]] : tensor<4x8xi1>, tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.masked_fill %[[X]], %[[CM]], -1.000000e+09 : tensor<4x8xf32>, tensor<4x8xi1>
// CHECK:         %{{.*}} = memopt.masked_fill %[[H]], %[[C]], 0xFFF0000000000000 : tensor<4x8xbf16>, tensor<4x8xi1>
// CHECK:         %{{.*}} = memopt.compare ge, %[[X]], %[[Y]] : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.compare ne, %[[H]], %[[H]] : tensor<4x8xbf16>
// CHECK:         %{{.*}} = memopt.compare eq, %[[CI]], %[[CI]] : tensor<4xi64>
// CHECK:         %[[P:.*]] = memopt.cast %[[CI]] : tensor<4xi64> to tensor<4xf32>
// CHECK:         %{{.*}} = memopt.cast %[[P]] : tensor<4xf32> to tensor<4xi32>
// CHECK:         %{{.*}} = memopt.where %{{.*}}, %[[CI]], %[[CI]] : tensor<4xi1>, tensor<4xi64>
// CHECK:         return{{$}}
func.func @constants_casts_selection(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>, %c: tensor<4x8xi1>) {
  %cf = memopt.constant dense<1.500000e+00> : tensor<4x8xf32>
  %ci = memopt.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
  %cm = memopt.constant dense<true> : tensor<4x8xi1>
  %h = memopt.cast %x : tensor<4x8xf32> to tensor<4x8xbf16>
  %hf = memopt.cast %h : tensor<4x8xbf16> to tensor<4x8xf16>
  %w = memopt.where %c, %x, %y : tensor<4x8xi1>, tensor<4x8xf32>
  %m = memopt.masked_fill %x, %cm, -1.000000e+09 : tensor<4x8xf32>, tensor<4x8xi1>
  %minf = memopt.masked_fill %h, %c, 0xFFF0000000000000 : tensor<4x8xbf16>, tensor<4x8xi1>
  %ge = memopt.compare ge, %x, %y : tensor<4x8xf32>
  %nan = memopt.compare ne, %h, %h : tensor<4x8xbf16>
  %same = memopt.compare eq, %ci, %ci : tensor<4xi64>
  %pos = memopt.cast %ci : tensor<4xi64> to tensor<4xf32>
  %idx = memopt.cast %pos : tensor<4xf32> to tensor<4xi32>
  %pick = memopt.where %same, %ci, %ci : tensor<4xi1>, tensor<4xi64>
  return
}

// CHECK-LABEL: func.func @elementwise(
// CHECK-SAME:    %[[A:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<4x8xf32>, %[[H:.*]]: tensor<2x4xbf16>)
// CHECK:         %{{.*}} = memopt.add %[[A]], %[[B]] : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.sub %[[A]], %[[B]] : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.mul %[[A]], %[[B]] : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.div %[[A]], %[[B]] : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.maximum %[[A]], %[[B]] : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.add_scalar %[[A]], 1.000000e+00 : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.mul_scalar %[[A]], 1.250000e-01 : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.pow_scalar %[[A]], 2.000000e+00 : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.neg %[[A]] : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.exp %[[A]] : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.log %[[A]] : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.sqrt %[[A]] : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.rsqrt %[[A]] : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.tanh %[[A]] : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.sigmoid %[[A]] : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.relu %[[H]] : tensor<2x4xbf16>
// CHECK:         %{{.*}} = memopt.silu %[[A]] : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.hardswish %[[A]] : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.hardsigmoid %[[H]] : tensor<2x4xbf16>
// CHECK:         %{{.*}} = memopt.mish %[[A]] : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.abs %[[A]] : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.sign %[[A]] : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.sin %[[H]] : tensor<2x4xbf16>
// CHECK:         %{{.*}} = memopt.cos %[[A]] : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.erf %[[A]] : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.expm1 %[[A]] : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.log1p %[[A]] : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.softplus %[[A]] : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.tan %[[A]] : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.asin %[[A]] : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.acos %[[H]] : tensor<2x4xbf16>
// CHECK:         %{{.*}} = memopt.atan %[[A]] : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.floor %[[A]] : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.ceil %[[H]] : tensor<2x4xbf16>
// CHECK:         %{{.*}} = memopt.round %[[A]] : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.trunc %[[A]] : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.sinc %[[H]] : tensor<2x4xbf16>
// CHECK:         %{{.*}} = memopt.gelu %[[A]] : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.gelu %[[A]] approximate<tanh> : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.gelu %[[A]] : tensor<4x8xf32>
// CHECK:         return{{$}}
func.func @elementwise(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>, %h: tensor<2x4xbf16>) {
  %add = memopt.add %a, %b : tensor<4x8xf32>
  %sub = memopt.sub %a, %b : tensor<4x8xf32>
  %mul = memopt.mul %a, %b : tensor<4x8xf32>
  %div = memopt.div %a, %b : tensor<4x8xf32>
  %max = memopt.maximum %a, %b : tensor<4x8xf32>
  %adds = memopt.add_scalar %a, 1.000000e+00 : tensor<4x8xf32>
  %muls = memopt.mul_scalar %a, 1.250000e-01 : tensor<4x8xf32>
  %pows = memopt.pow_scalar %a, 2.000000e+00 : tensor<4x8xf32>
  %neg = memopt.neg %a : tensor<4x8xf32>
  %exp = memopt.exp %a : tensor<4x8xf32>
  %log = memopt.log %a : tensor<4x8xf32>
  %sqrt = memopt.sqrt %a : tensor<4x8xf32>
  %rsqrt = memopt.rsqrt %a : tensor<4x8xf32>
  %tanh = memopt.tanh %a : tensor<4x8xf32>
  %sig = memopt.sigmoid %a : tensor<4x8xf32>
  %relu = memopt.relu %h : tensor<2x4xbf16>
  %silu = memopt.silu %a : tensor<4x8xf32>
  %hswish = memopt.hardswish %a : tensor<4x8xf32>
  %hsig = memopt.hardsigmoid %h : tensor<2x4xbf16>
  %mish = memopt.mish %a : tensor<4x8xf32>
  %abs_ = memopt.abs %a : tensor<4x8xf32>
  %sign_ = memopt.sign %a : tensor<4x8xf32>
  %sin_ = memopt.sin %h : tensor<2x4xbf16>
  %cos_ = memopt.cos %a : tensor<4x8xf32>
  %erf_ = memopt.erf %a : tensor<4x8xf32>
  %expm1_ = memopt.expm1 %a : tensor<4x8xf32>
  %log1p_ = memopt.log1p %a : tensor<4x8xf32>
  %softplus_ = memopt.softplus %a : tensor<4x8xf32>
  %tan_ = memopt.tan %a : tensor<4x8xf32>
  %asin_ = memopt.asin %a : tensor<4x8xf32>
  %acos_ = memopt.acos %h : tensor<2x4xbf16>
  %atan_ = memopt.atan %a : tensor<4x8xf32>
  %floor_ = memopt.floor %a : tensor<4x8xf32>
  %ceil_ = memopt.ceil %h : tensor<2x4xbf16>
  %round_ = memopt.round %a : tensor<4x8xf32>
  %trunc_ = memopt.trunc %a : tensor<4x8xf32>
  %sinc_ = memopt.sinc %h : tensor<2x4xbf16>
  %gelu = memopt.gelu %a : tensor<4x8xf32>
  %gelut = memopt.gelu %a approximate<tanh> : tensor<4x8xf32>
  %gelun = memopt.gelu %a approximate<none> : tensor<4x8xf32>
  return
}

// CHECK-LABEL: func.func @activation_grads(
// CHECK-SAME:    %[[X:.*]]: tensor<4x8xf32>, %[[G:.*]]: tensor<4x8xf32>)
// CHECK:         %{{.*}} = memopt.relu_grad %[[X]], %[[G]] : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.silu_grad %[[X]], %[[G]] : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.tanh_grad %[[X]], %[[G]] : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.sigmoid_grad %[[X]], %[[G]] : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.gelu_grad %[[X]], %[[G]] : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.gelu_grad %[[X]], %[[G]] approximate<tanh> : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.hardswish_grad %[[X]], %[[G]] : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.hardsigmoid_grad %[[X]], %[[G]] : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.mish_grad %[[X]], %[[G]] : tensor<4x8xf32>
// CHECK:         return{{$}}
func.func @activation_grads(%x: tensor<4x8xf32>, %g: tensor<4x8xf32>) {
  %relu = memopt.relu_grad %x, %g : tensor<4x8xf32>
  %silu = memopt.silu_grad %x, %g : tensor<4x8xf32>
  %tanh = memopt.tanh_grad %x, %g : tensor<4x8xf32>
  %sig = memopt.sigmoid_grad %x, %g : tensor<4x8xf32>
  %gelu = memopt.gelu_grad %x, %g : tensor<4x8xf32>
  %gelut = memopt.gelu_grad %x, %g approximate<tanh> : tensor<4x8xf32>
  %hswish = memopt.hardswish_grad %x, %g : tensor<4x8xf32>
  %hsig = memopt.hardsigmoid_grad %x, %g : tensor<4x8xf32>
  %mish = memopt.mish_grad %x, %g : tensor<4x8xf32>
  return
}

// One bound or two; `inclusive` prints only when false (its default is true).
// CHECK-LABEL: func.func @clamp(
// CHECK-SAME:    %[[X:.*]]: tensor<4x8xf32>, %[[G:.*]]: tensor<4x8xf32>, %[[H:.*]]: tensor<2x4xf16>)
// CHECK:         %{{.*}} = memopt.clamp %[[X]] min -1.000000e+00 max 1.000000e+00 : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.clamp %[[X]] min 0.000000e+00 max 6.000000e+00 inclusive = false : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.clamp %[[H]] min 5.000000e-01 : tensor<2x4xf16>
// CHECK:         %{{.*}} = memopt.clamp %[[X]] max 2.000000e+00 : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.clamp %[[X]] min 1.000000e+00 max 1.000000e+00 : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.clamp_grad %[[X]], %[[G]] min -1.000000e+00 max 1.000000e+00 : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.clamp_grad %[[X]], %[[G]] min 0.000000e+00 max 6.000000e+00 inclusive = false : tensor<4x8xf32>
// CHECK:         %{{.*}} = memopt.clamp_grad %[[X]], %[[G]] max 0xFFF0000000000000 : tensor<4x8xf32>
// CHECK:         return{{$}}
func.func @clamp(%x: tensor<4x8xf32>, %g: tensor<4x8xf32>, %h: tensor<2x4xf16>) {
  %c = memopt.clamp %x min -1.000000e+00 max 1.000000e+00 : tensor<4x8xf32>
  %relu6 = memopt.clamp %x min 0.000000e+00 max 6.000000e+00 inclusive = false : tensor<4x8xf32>
  %lo = memopt.clamp %h min 5.000000e-01 : tensor<2x4xf16>
  %hi = memopt.clamp %x max 2.000000e+00 inclusive = true : tensor<4x8xf32>
  %point = memopt.clamp %x min 1.000000e+00 max 1.000000e+00 : tensor<4x8xf32>
  %dc = memopt.clamp_grad %x, %g min -1.000000e+00 max 1.000000e+00 : tensor<4x8xf32>
  %drelu6 = memopt.clamp_grad %x, %g min 0.000000e+00 max 6.000000e+00 inclusive = false : tensor<4x8xf32>
  %dinf = memopt.clamp_grad %x, %g max 0xFFF0000000000000 : tensor<4x8xf32>
  return
}

// CHECK-LABEL: func.func @shapes(
// CHECK-SAME:    %[[X:.*]]: tensor<2x8x64xf32>, %[[B:.*]]: tensor<64xf32>, %[[M:.*]]: tensor<8x8xi1>, %[[I:.*]]: tensor<2x8xi64>)
// CHECK:         %[[BB:.*]] = memopt.broadcast %[[B]] dims [2] : tensor<64xf32> to tensor<2x8x64xf32>
// CHECK:         %{{.*}} = memopt.broadcast %[[M]] dims [1, 2] : tensor<8x8xi1> to tensor<2x8x8xi1>
// CHECK:         %{{.*}} = memopt.broadcast %[[X]] dims [0, 1, 2] : tensor<2x8x64xf32> to tensor<2x8x64xf32>
// CHECK:         %{{.*}} = memopt.reshape %[[X]] : tensor<2x8x64xf32> to tensor<16x64xf32>
// CHECK:         %{{.*}} = memopt.reshape %[[I]] : tensor<2x8xi64> to tensor<16xi64>
// CHECK:         %{{.*}} = memopt.transpose %[[X]] perm [0, 2, 1] : tensor<2x8x64xf32> to tensor<2x64x8xf32>
// CHECK:         %[[S:.*]] = memopt.slice %[[X]] starts [0, 1, 0] limits [2, 8, 64] strides [1, 2, 4] : tensor<2x8x64xf32> to tensor<2x4x16xf32>
// CHECK:         %{{.*}} = memopt.slice_grad %[[S]] starts [0, 1, 0] limits [2, 8, 64] strides [1, 2, 4] : tensor<2x4x16xf32> to tensor<2x8x64xf32>
// CHECK:         %{{.*}} = memopt.concat %[[X]], %[[BB]] dim 2 : tensor<2x8x64xf32>, tensor<2x8x64xf32> -> tensor<2x8x128xf32>
// CHECK:         %{{.*}} = memopt.concat %[[I]] dim 0 : tensor<2x8xi64> -> tensor<2x8xi64>
// CHECK:         return{{$}}
func.func @shapes(%x: tensor<2x8x64xf32>, %b: tensor<64xf32>, %m: tensor<8x8xi1>, %i: tensor<2x8xi64>) {
  %bb = memopt.broadcast %b dims [2] : tensor<64xf32> to tensor<2x8x64xf32>
  %bm = memopt.broadcast %m dims [1, 2] : tensor<8x8xi1> to tensor<2x8x8xi1>
  %b1 = memopt.broadcast %x dims [0, 1, 2] : tensor<2x8x64xf32> to tensor<2x8x64xf32>
  %r = memopt.reshape %x : tensor<2x8x64xf32> to tensor<16x64xf32>
  %ri = memopt.reshape %i : tensor<2x8xi64> to tensor<16xi64>
  %t = memopt.transpose %x perm [0, 2, 1] : tensor<2x8x64xf32> to tensor<2x64x8xf32>
  %s = memopt.slice %x starts [0, 1, 0] limits [2, 8, 64] strides [1, 2, 4] : tensor<2x8x64xf32> to tensor<2x4x16xf32>
  %sg = memopt.slice_grad %s starts [0, 1, 0] limits [2, 8, 64] strides [1, 2, 4] : tensor<2x4x16xf32> to tensor<2x8x64xf32>
  %c = memopt.concat %x, %bb dim 2 : tensor<2x8x64xf32>, tensor<2x8x64xf32> -> tensor<2x8x128xf32>
  %c1 = memopt.concat %i dim 0 : tensor<2x8xi64> -> tensor<2x8xi64>
  return
}

// CHECK-LABEL: func.func @reductions(
// CHECK-SAME:    %[[X:.*]]: tensor<2x8x64xf32>, %[[H:.*]]: tensor<2x8x64xbf16>)
// CHECK:         %{{.*}} = memopt.reduce_sum %[[X]] dims [2] : tensor<2x8x64xf32> to tensor<2x8xf32>
// CHECK:         %{{.*}} = memopt.reduce_mean %[[H]] dims [0, 1] : tensor<2x8x64xbf16> to tensor<64xf32>
// CHECK:         %{{.*}} = memopt.reduce_max %[[X]] dims [0, 1, 2] : tensor<2x8x64xf32> to tensor<f32>
// CHECK:         %{{.*}} = memopt.reduce_sum %[[X]] dims [0, 1] : tensor<2x8x64xf32> to tensor<64xbf16>
// CHECK:         %[[SM:.*]] = memopt.softmax %[[X]] dim 2 : tensor<2x8x64xf32>
// CHECK:         %[[LSM:.*]] = memopt.log_softmax %[[H]] dim 1 : tensor<2x8x64xbf16>
// CHECK:         %{{.*}} = memopt.softmax_grad %[[SM]], %[[X]] dim 2 : tensor<2x8x64xf32>
// CHECK:         %{{.*}} = memopt.log_softmax_grad %[[LSM]], %[[H]] dim 1 : tensor<2x8x64xbf16>
// CHECK:         return{{$}}
func.func @reductions(%x: tensor<2x8x64xf32>, %h: tensor<2x8x64xbf16>) {
  %sum = memopt.reduce_sum %x dims [2] : tensor<2x8x64xf32> to tensor<2x8xf32>
  %mean = memopt.reduce_mean %h dims [0, 1] : tensor<2x8x64xbf16> to tensor<64xf32>
  %max = memopt.reduce_max %x dims [0, 1, 2] : tensor<2x8x64xf32> to tensor<f32>
  %narrow = memopt.reduce_sum %x dims [0, 1] : tensor<2x8x64xf32> to tensor<64xbf16>
  %sm = memopt.softmax %x dim 2 : tensor<2x8x64xf32>
  %lsm = memopt.log_softmax %h dim 1 : tensor<2x8x64xbf16>
  %smg = memopt.softmax_grad %sm, %x dim 2 : tensor<2x8x64xf32>
  %lsmg = memopt.log_softmax_grad %lsm, %h dim 1 : tensor<2x8x64xbf16>
  return
}

// CHECK-LABEL: func.func @normalisation(
// CHECK-SAME:    %[[X:.*]]: tensor<2x8x64xf32>, %[[G:.*]]: tensor<2x8x64xf32>, %[[W:.*]]: tensor<64xf32>, %[[B:.*]]: tensor<64xf32>, %[[IMG:.*]]: tensor<4x16x8x8xbf16>, %[[GIMG:.*]]: tensor<4x16x8x8xbf16>, %[[CW:.*]]: tensor<16xf32>, %[[CB:.*]]: tensor<16xf32>, %[[RM:.*]]: tensor<16xf32>, %[[RV:.*]]: tensor<16xf32>)
// CHECK:         %{{.*}}, %[[MEAN:.*]], %[[RSTD:.*]] = memopt.layer_norm %[[X]], %[[W]], %[[B]] eps 1.000000e-05 : tensor<2x8x64xf32>, tensor<64xf32> -> tensor<2x8xf32>
// CHECK:         %{{.*}}, %{{.*}}, %{{.*}} = memopt.layer_norm_grad %[[G]], %[[X]], %[[W]], %[[MEAN]], %[[RSTD]] : tensor<2x8x64xf32>, tensor<64xf32>, tensor<2x8xf32>
// CHECK:         %{{.*}}, %[[RRSTD:.*]] = memopt.rms_norm %[[X]], %[[W]] eps 9.9999999999999995E-7 : tensor<2x8x64xf32>, tensor<64xf32> -> tensor<2x8xf32>
// CHECK:         %{{.*}}, %{{.*}} = memopt.rms_norm_grad %[[G]], %[[X]], %[[W]], %[[RRSTD]] : tensor<2x8x64xf32>, tensor<64xf32>, tensor<2x8xf32>
// CHECK:         %{{.*}}, %[[BMEAN:.*]], %[[BRSTD:.*]], %{{.*}}, %{{.*}} = memopt.batch_norm %[[IMG]], %[[CW]], %[[CB]], %[[RM]], %[[RV]] eps 1.000000e-05 momentum 1.000000e-01 : tensor<4x16x8x8xbf16>, tensor<16xf32>
// CHECK:         %{{.*}}, %{{.*}}, %{{.*}} = memopt.batch_norm_grad %[[GIMG]], %[[IMG]], %[[CW]], %[[BMEAN]], %[[BRSTD]] : tensor<4x16x8x8xbf16>, tensor<16xf32>
// CHECK:         return{{$}}
func.func @normalisation(%x: tensor<2x8x64xf32>, %g: tensor<2x8x64xf32>, %w: tensor<64xf32>, %b: tensor<64xf32>,
                         %img: tensor<4x16x8x8xbf16>, %gimg: tensor<4x16x8x8xbf16>, %cw: tensor<16xf32>, %cb: tensor<16xf32>,
                         %rm: tensor<16xf32>, %rv: tensor<16xf32>) {
  %y, %mean, %rstd = memopt.layer_norm %x, %w, %b eps 1.000000e-05 : tensor<2x8x64xf32>, tensor<64xf32> -> tensor<2x8xf32>
  %gx, %gw, %gb = memopt.layer_norm_grad %g, %x, %w, %mean, %rstd : tensor<2x8x64xf32>, tensor<64xf32>, tensor<2x8xf32>
  %ry, %rrstd = memopt.rms_norm %x, %w eps 1.000000e-06 : tensor<2x8x64xf32>, tensor<64xf32> -> tensor<2x8xf32>
  %rgx, %rgw = memopt.rms_norm_grad %g, %x, %w, %rrstd : tensor<2x8x64xf32>, tensor<64xf32>, tensor<2x8xf32>
  %by, %bmean, %brstd, %brm, %brv = memopt.batch_norm %img, %cw, %cb, %rm, %rv eps 1.000000e-05 momentum 1.000000e-01 : tensor<4x16x8x8xbf16>, tensor<16xf32>
  %bgx, %bgw, %bgb = memopt.batch_norm_grad %gimg, %img, %cw, %bmean, %brstd : tensor<4x16x8x8xbf16>, tensor<16xf32>
  return
}

// CHECK-LABEL: func.func @matmuls(
// CHECK-SAME:    %[[A:.*]]: tensor<8x16xf32>, %[[B:.*]]: tensor<16x32xf32>, %[[AT:.*]]: tensor<16x8xf32>, %[[BT:.*]]: tensor<32x16xf32>, %[[X:.*]]: tensor<2x8x64xf32>, %[[W:.*]]: tensor<256x64xf32>, %[[Y:.*]]: tensor<2x64x8xf32>, %[[HA:.*]]: tensor<8x16xbf16>, %[[HB:.*]]: tensor<16x32xbf16>)
// CHECK:         %{{.*}} = memopt.matmul %[[A]], %[[B]] : tensor<8x16xf32>, tensor<16x32xf32> -> tensor<8x32xf32>
// CHECK:         %{{.*}} = memopt.matmul %[[AT]], %[[B]] transpose_lhs : tensor<16x8xf32>, tensor<16x32xf32> -> tensor<8x32xf32>
// CHECK:         %{{.*}} = memopt.matmul %[[A]], %[[BT]] transpose_rhs : tensor<8x16xf32>, tensor<32x16xf32> -> tensor<8x32xf32>
// CHECK:         %{{.*}} = memopt.matmul %[[AT]], %[[BT]] transpose_lhs transpose_rhs : tensor<16x8xf32>, tensor<32x16xf32> -> tensor<8x32xf32>
// CHECK:         %{{.*}} = memopt.matmul %[[X]], %[[W]] transpose_rhs : tensor<2x8x64xf32>, tensor<256x64xf32> -> tensor<2x8x256xf32>
// CHECK:         %{{.*}} = memopt.matmul %[[X]], %[[Y]] : tensor<2x8x64xf32>, tensor<2x64x8xf32> -> tensor<2x8x8xf32>
// CHECK:         %{{.*}} = memopt.matmul %[[HA]], %[[HB]] : tensor<8x16xbf16>, tensor<16x32xbf16> -> tensor<8x32xf32>
// CHECK:         %{{.*}} = memopt.matmul %[[HA]], %[[HB]] : tensor<8x16xbf16>, tensor<16x32xbf16> -> tensor<8x32xbf16>
// CHECK:         return{{$}}
func.func @matmuls(%a: tensor<8x16xf32>, %b: tensor<16x32xf32>, %at: tensor<16x8xf32>, %bt: tensor<32x16xf32>,
                   %x: tensor<2x8x64xf32>, %w: tensor<256x64xf32>, %y: tensor<2x64x8xf32>,
                   %ha: tensor<8x16xbf16>, %hb: tensor<16x32xbf16>) {
  %mm = memopt.matmul %a, %b : tensor<8x16xf32>, tensor<16x32xf32> -> tensor<8x32xf32>
  %mm_tl = memopt.matmul %at, %b transpose_lhs : tensor<16x8xf32>, tensor<16x32xf32> -> tensor<8x32xf32>
  %mm_tr = memopt.matmul %a, %bt transpose_rhs : tensor<8x16xf32>, tensor<32x16xf32> -> tensor<8x32xf32>
  %mm_tlr = memopt.matmul %at, %bt transpose_lhs transpose_rhs : tensor<16x8xf32>, tensor<32x16xf32> -> tensor<8x32xf32>
  %linear = memopt.matmul %x, %w transpose_rhs : tensor<2x8x64xf32>, tensor<256x64xf32> -> tensor<2x8x256xf32>
  %bmm = memopt.matmul %x, %y : tensor<2x8x64xf32>, tensor<2x64x8xf32> -> tensor<2x8x8xf32>
  %mm_bf16_f32 = memopt.matmul %ha, %hb : tensor<8x16xbf16>, tensor<16x32xbf16> -> tensor<8x32xf32>
  %mm_bf16 = memopt.matmul %ha, %hb : tensor<8x16xbf16>, tensor<16x32xbf16> -> tensor<8x32xbf16>
  return
}

// CHECK-LABEL: func.func @embeddings(
// CHECK-SAME:    %[[WTE:.*]]: tensor<100x64xf32>, %[[IDS:.*]]: tensor<2x8xi64>, %[[IDS32:.*]]: tensor<16xi32>, %[[G:.*]]: tensor<2x8x64xf32>)
// CHECK:         %{{.*}} = memopt.embedding %[[WTE]], %[[IDS]] : tensor<100x64xf32>, tensor<2x8xi64> -> tensor<2x8x64xf32>
// CHECK:         %{{.*}} = memopt.embedding %[[WTE]], %[[IDS32]] : tensor<100x64xf32>, tensor<16xi32> -> tensor<16x64xf32>
// CHECK:         %{{.*}} = memopt.embedding_grad %[[G]], %[[IDS]] : tensor<2x8x64xf32>, tensor<2x8xi64> -> tensor<100x64xf32>
// CHECK:         %{{.*}} = memopt.embedding %[[WTE]], %[[IDS]] padding_idx 0 : tensor<100x64xf32>, tensor<2x8xi64> -> tensor<2x8x64xf32>
// CHECK:         %{{.*}} = memopt.embedding_grad %[[G]], %[[IDS]] padding_idx 99 : tensor<2x8x64xf32>, tensor<2x8xi64> -> tensor<100x64xf32>
// CHECK:         return{{$}}
func.func @embeddings(%wte: tensor<100x64xf32>, %ids: tensor<2x8xi64>, %ids32: tensor<16xi32>, %g: tensor<2x8x64xf32>) {
  %e = memopt.embedding %wte, %ids : tensor<100x64xf32>, tensor<2x8xi64> -> tensor<2x8x64xf32>
  %e32 = memopt.embedding %wte, %ids32 : tensor<100x64xf32>, tensor<16xi32> -> tensor<16x64xf32>
  %eg = memopt.embedding_grad %g, %ids : tensor<2x8x64xf32>, tensor<2x8xi64> -> tensor<100x64xf32>
  %ep = memopt.embedding %wte, %ids padding_idx 0 : tensor<100x64xf32>, tensor<2x8xi64> -> tensor<2x8x64xf32>
  %egp = memopt.embedding_grad %g, %ids padding_idx 99 : tensor<2x8x64xf32>, tensor<2x8xi64> -> tensor<100x64xf32>
  return
}

// CHECK-LABEL: func.func @convolutions(
// CHECK-SAME:    %[[X:.*]]: tensor<4x3x16x16xf32>, %[[W:.*]]: tensor<8x3x3x3xf32>, %[[XG:.*]]: tensor<2x4x8x8xf32>, %[[WG:.*]]: tensor<6x2x3x3xf32>)
// CHECK:         %{{.*}} = memopt.conv2d %[[X]], %[[W]] : tensor<4x3x16x16xf32>, tensor<8x3x3x3xf32> -> tensor<4x8x14x14xf32>
// CHECK:         %{{.*}} = memopt.conv2d %[[X]], %[[W]] padding [1, 1] : tensor<4x3x16x16xf32>, tensor<8x3x3x3xf32> -> tensor<4x8x16x16xf32>
// CHECK:         %[[CONV_S2:.*]] = memopt.conv2d %[[X]], %[[W]] strides [2, 2] padding [1, 1] : tensor<4x3x16x16xf32>, tensor<8x3x3x3xf32> -> tensor<4x8x8x8xf32>
// CHECK:         %[[CONV_GROUPED:.*]] = memopt.conv2d %[[XG]], %[[WG]] padding [2, 2] dilations [2, 2] groups 2 : tensor<2x4x8x8xf32>, tensor<6x2x3x3xf32> -> tensor<2x6x8x8xf32>
// CHECK:         %{{.*}} = memopt.conv2d %[[X]], %[[W]] : tensor<4x3x16x16xf32>, tensor<8x3x3x3xf32> -> tensor<4x8x14x14xf32>
// CHECK:         %{{.*}} = memopt.conv2d_grad_input %[[CONV_S2]], %[[W]] strides [2, 2] padding [1, 1] : tensor<4x8x8x8xf32>, tensor<8x3x3x3xf32> -> tensor<4x3x16x16xf32>
// CHECK:         %{{.*}} = memopt.conv2d_grad_filter %[[CONV_S2]], %[[X]] strides [2, 2] padding [1, 1] : tensor<4x8x8x8xf32>, tensor<4x3x16x16xf32> -> tensor<8x3x3x3xf32>
// CHECK:         %{{.*}} = memopt.conv2d_grad_input %[[CONV_GROUPED]], %[[WG]] padding [2, 2] dilations [2, 2] groups 2 : tensor<2x6x8x8xf32>, tensor<6x2x3x3xf32> -> tensor<2x4x8x8xf32>
// CHECK:         %{{.*}} = memopt.conv2d_grad_filter %[[CONV_GROUPED]], %[[XG]] padding [2, 2] dilations [2, 2] groups 2 : tensor<2x6x8x8xf32>, tensor<2x4x8x8xf32> -> tensor<6x2x3x3xf32>
// CHECK:         return{{$}}
func.func @convolutions(%x: tensor<4x3x16x16xf32>, %w: tensor<8x3x3x3xf32>, %xg: tensor<2x4x8x8xf32>, %wg: tensor<6x2x3x3xf32>) {
  %conv = memopt.conv2d %x, %w : tensor<4x3x16x16xf32>, tensor<8x3x3x3xf32> -> tensor<4x8x14x14xf32>
  %conv_pad = memopt.conv2d %x, %w padding [1, 1] : tensor<4x3x16x16xf32>, tensor<8x3x3x3xf32> -> tensor<4x8x16x16xf32>
  %conv_s2 = memopt.conv2d %x, %w strides [2, 2] padding [1, 1] : tensor<4x3x16x16xf32>, tensor<8x3x3x3xf32> -> tensor<4x8x8x8xf32>
  %conv_grouped = memopt.conv2d %xg, %wg padding [2, 2] dilations [2, 2] groups 2 : tensor<2x4x8x8xf32>, tensor<6x2x3x3xf32> -> tensor<2x6x8x8xf32>
  %conv_defaults = memopt.conv2d %x, %w strides [1, 1] padding [0, 0] dilations [1, 1] groups 1 : tensor<4x3x16x16xf32>, tensor<8x3x3x3xf32> -> tensor<4x8x14x14xf32>
  %gin = memopt.conv2d_grad_input %conv_s2, %w strides [2, 2] padding [1, 1] : tensor<4x8x8x8xf32>, tensor<8x3x3x3xf32> -> tensor<4x3x16x16xf32>
  %gfilter = memopt.conv2d_grad_filter %conv_s2, %x strides [2, 2] padding [1, 1] : tensor<4x8x8x8xf32>, tensor<4x3x16x16xf32> -> tensor<8x3x3x3xf32>
  %gin_grouped = memopt.conv2d_grad_input %conv_grouped, %wg padding [2, 2] dilations [2, 2] groups 2 : tensor<2x6x8x8xf32>, tensor<6x2x3x3xf32> -> tensor<2x4x8x8xf32>
  %gfilter_grouped = memopt.conv2d_grad_filter %conv_grouped, %xg padding [2, 2] dilations [2, 2] groups 2 : tensor<2x6x8x8xf32>, tensor<2x4x8x8xf32> -> tensor<6x2x3x3xf32>
  return
}

// CHECK-LABEL: func.func @pooling(
// CHECK-SAME:    %[[X:.*]]: tensor<4x8x16x16xf32>, %[[G:.*]]: tensor<4x8x8x8xf32>)
// CHECK:         %{{.*}} = memopt.max_pool2d %[[X]] kernel [2, 2] strides [2, 2] : tensor<4x8x16x16xf32> to tensor<4x8x8x8xf32>
// CHECK:         %{{.*}} = memopt.max_pool2d %[[X]] kernel [3, 3] strides [2, 2] padding [1, 1] : tensor<4x8x16x16xf32> to tensor<4x8x8x8xf32>
// CHECK:         %{{.*}} = memopt.avg_pool2d %[[X]] kernel [2, 2] strides [2, 2] : tensor<4x8x16x16xf32> to tensor<4x8x8x8xf32>
// CHECK:         %{{.*}} = memopt.avg_pool2d %[[X]] kernel [3, 3] strides [2, 2] padding [1, 1] : tensor<4x8x16x16xf32> to tensor<4x8x8x8xf32>
// CHECK:         %{{.*}} = memopt.max_pool2d_grad %[[G]], %[[X]] kernel [2, 2] strides [2, 2] : tensor<4x8x8x8xf32>, tensor<4x8x16x16xf32>
// CHECK:         %{{.*}} = memopt.max_pool2d_grad %[[G]], %[[X]] kernel [3, 3] strides [2, 2] padding [1, 1] : tensor<4x8x8x8xf32>, tensor<4x8x16x16xf32>
// CHECK:         %{{.*}} = memopt.avg_pool2d_grad %[[G]] kernel [2, 2] strides [2, 2] : tensor<4x8x8x8xf32> to tensor<4x8x16x16xf32>
// CHECK:         %{{.*}} = memopt.avg_pool2d_grad %[[G]] kernel [3, 3] strides [2, 2] padding [1, 1] : tensor<4x8x8x8xf32> to tensor<4x8x16x16xf32>
// CHECK:         return{{$}}
func.func @pooling(%x: tensor<4x8x16x16xf32>, %g: tensor<4x8x8x8xf32>) {
  %mp = memopt.max_pool2d %x kernel [2, 2] strides [2, 2] : tensor<4x8x16x16xf32> to tensor<4x8x8x8xf32>
  %mpp = memopt.max_pool2d %x kernel [3, 3] strides [2, 2] padding [1, 1] : tensor<4x8x16x16xf32> to tensor<4x8x8x8xf32>
  %ap = memopt.avg_pool2d %x kernel [2, 2] strides [2, 2] : tensor<4x8x16x16xf32> to tensor<4x8x8x8xf32>
  %app = memopt.avg_pool2d %x kernel [3, 3] strides [2, 2] padding [1, 1] : tensor<4x8x16x16xf32> to tensor<4x8x8x8xf32>
  %mpg = memopt.max_pool2d_grad %g, %x kernel [2, 2] strides [2, 2] : tensor<4x8x8x8xf32>, tensor<4x8x16x16xf32>
  %mppg = memopt.max_pool2d_grad %g, %x kernel [3, 3] strides [2, 2] padding [1, 1] : tensor<4x8x8x8xf32>, tensor<4x8x16x16xf32>
  %apg = memopt.avg_pool2d_grad %g kernel [2, 2] strides [2, 2] : tensor<4x8x8x8xf32> to tensor<4x8x16x16xf32>
  %appg = memopt.avg_pool2d_grad %g kernel [3, 3] strides [2, 2] padding [1, 1] : tensor<4x8x8x8xf32> to tensor<4x8x16x16xf32>
  return
}

// CHECK-LABEL: func.func @dropout(
// CHECK-SAME:    %[[X:.*]]: tensor<2x8x64xf32>, %[[H:.*]]: tensor<2x8x64xbf16>)
// CHECK:         %{{.*}} = memopt.dropout %[[X]] p 1.000000e-01 seed 0 stream 3 : tensor<2x8x64xf32>
// CHECK:         %{{.*}} = memopt.dropout %[[H]] p 5.000000e-01 seed 1234 stream 0 : tensor<2x8x64xbf16>
// CHECK:         return{{$}}
func.func @dropout(%x: tensor<2x8x64xf32>, %h: tensor<2x8x64xbf16>) {
  %d = memopt.dropout %x p 1.000000e-01 seed 0 stream 3 : tensor<2x8x64xf32>
  %dh = memopt.dropout %h p 5.000000e-01 seed 1234 stream 0 : tensor<2x8x64xbf16>
  return
}

// CHECK-LABEL: func.func @losses(
// CHECK-SAME:    %[[LOGITS:.*]]: tensor<16x100xf32>, %[[LABELS:.*]]: tensor<16xi64>, %[[L3:.*]]: tensor<2x8x100xbf16>, %[[LAB3:.*]]: tensor<2x8xi32>, %[[P:.*]]: tensor<8x4xf32>, %[[T:.*]]: tensor<8x4xf32>, %[[G:.*]]: tensor<f32>)
// CHECK:         %{{.*}} = memopt.cross_entropy %[[LOGITS]], %[[LABELS]] : tensor<16x100xf32>, tensor<16xi64>
// CHECK:         %{{.*}} = memopt.cross_entropy %[[LOGITS]], %[[LABELS]] ignore_index 0 : tensor<16x100xf32>, tensor<16xi64>
// CHECK:         %{{.*}} = memopt.cross_entropy %[[L3]], %[[LAB3]] ignore_index -1 reduction<sum> : tensor<2x8x100xbf16>, tensor<2x8xi32>
// CHECK:         %{{.*}} = memopt.cross_entropy %[[LOGITS]], %[[LABELS]] : tensor<16x100xf32>, tensor<16xi64>
// CHECK:         %{{.*}} = memopt.cross_entropy_grad %[[LOGITS]], %[[LABELS]], %[[G]] : tensor<16x100xf32>, tensor<16xi64>
// CHECK:         %{{.*}} = memopt.cross_entropy_grad %[[L3]], %[[LAB3]], %[[G]] ignore_index -1 reduction<sum> : tensor<2x8x100xbf16>, tensor<2x8xi32>
// CHECK:         %{{.*}} = memopt.cross_entropy %[[LOGITS]], %[[LABELS]] label_smoothing 1.000000e-01 : tensor<16x100xf32>, tensor<16xi64>
// CHECK:         %{{.*}} = memopt.cross_entropy %[[L3]], %[[LAB3]] ignore_index -1 reduction<sum> label_smoothing 2.500000e-01 : tensor<2x8x100xbf16>, tensor<2x8xi32>
// CHECK:         %{{.*}} = memopt.cross_entropy %[[LOGITS]], %[[LABELS]] : tensor<16x100xf32>, tensor<16xi64>
// CHECK:         %{{.*}} = memopt.cross_entropy_grad %[[LOGITS]], %[[LABELS]], %[[G]] label_smoothing 1.000000e-01 : tensor<16x100xf32>, tensor<16xi64>
// CHECK:         %{{.*}} = memopt.mse_loss %[[P]], %[[T]] : tensor<8x4xf32>
// CHECK:         %{{.*}} = memopt.mse_loss %[[P]], %[[T]] reduction<sum> : tensor<8x4xf32>
// CHECK:         %{{.*}} = memopt.mse_loss_grad %[[P]], %[[T]], %[[G]] : tensor<8x4xf32>
// CHECK:         %{{.*}} = memopt.mse_loss_grad %[[P]], %[[T]], %[[G]] reduction<sum> : tensor<8x4xf32>
// CHECK:         return{{$}}
func.func @losses(%logits: tensor<16x100xf32>, %labels: tensor<16xi64>, %l3: tensor<2x8x100xbf16>, %lab3: tensor<2x8xi32>,
                  %p: tensor<8x4xf32>, %t: tensor<8x4xf32>, %g: tensor<f32>) {
  %ce = memopt.cross_entropy %logits, %labels : tensor<16x100xf32>, tensor<16xi64>
  %ce0 = memopt.cross_entropy %logits, %labels ignore_index 0 : tensor<16x100xf32>, tensor<16xi64>
  %ces = memopt.cross_entropy %l3, %lab3 ignore_index -1 reduction<sum> : tensor<2x8x100xbf16>, tensor<2x8xi32>
  %ced = memopt.cross_entropy %logits, %labels ignore_index -100 reduction<mean> : tensor<16x100xf32>, tensor<16xi64>
  %ceg = memopt.cross_entropy_grad %logits, %labels, %g : tensor<16x100xf32>, tensor<16xi64>
  %cegs = memopt.cross_entropy_grad %l3, %lab3, %g ignore_index -1 reduction<sum> : tensor<2x8x100xbf16>, tensor<2x8xi32>
  %cels = memopt.cross_entropy %logits, %labels label_smoothing 0.1 : tensor<16x100xf32>, tensor<16xi64>
  %cesls = memopt.cross_entropy %l3, %lab3 ignore_index -1 reduction<sum> label_smoothing 0.25 : tensor<2x8x100xbf16>, tensor<2x8xi32>
  %ce0ls = memopt.cross_entropy %logits, %labels label_smoothing 0.0 : tensor<16x100xf32>, tensor<16xi64>
  %cegls = memopt.cross_entropy_grad %logits, %labels, %g label_smoothing 0.1 : tensor<16x100xf32>, tensor<16xi64>
  %mse = memopt.mse_loss %p, %t : tensor<8x4xf32>
  %mses = memopt.mse_loss %p, %t reduction<sum> : tensor<8x4xf32>
  %mseg = memopt.mse_loss_grad %p, %t, %g : tensor<8x4xf32>
  %msegs = memopt.mse_loss_grad %p, %t, %g reduction<sum> : tensor<8x4xf32>
  return
}

// CHECK-LABEL: func.func @optimizers(
// CHECK-SAME:    %[[P:.*]]: tensor<64x32xf32>, %[[G:.*]]: tensor<64x32xf32>, %[[BUF:.*]]: tensor<64x32xf32>, %[[V:.*]]: tensor<64x32xf32>, %[[STEP:.*]]: tensor<i64>, %[[SKIP:.*]]: tensor<i1>)
// CHECK:         %{{.*}}, %{{.*}} = memopt.sgd_update %[[P]], %[[G]], %[[BUF]] lr 1.000000e-02 momentum 9.000000e-01 weight_decay 0.000000e+00 : tensor<64x32xf32>
// CHECK:         %{{.*}}, %{{.*}} = memopt.sgd_update %[[P]], %[[G]], %[[BUF]] skip_if %[[SKIP]] lr 1.000000e-02 momentum 9.000000e-01 weight_decay 5.000000e-04 : tensor<64x32xf32>
// CHECK:         %{{.*}}, %{{.*}}, %{{.*}} = memopt.adamw_update %[[P]], %[[G]], %[[BUF]], %[[V]] step %[[STEP]] lr 1.000000e-03 betas(9.000000e-01, 0.99899999999999999) eps 1.000000e-08 weight_decay 1.000000e-02 : tensor<64x32xf32>
// CHECK:         %{{.*}}, %{{.*}}, %{{.*}} = memopt.adamw_update %[[P]], %[[G]], %[[BUF]], %[[V]] step %[[STEP]] skip_if %[[SKIP]] lr 1.000000e-03 betas(9.000000e-01, 0.99899999999999999) eps 1.000000e-08 weight_decay 1.000000e-02 : tensor<64x32xf32>
// CHECK:         %{{.*}} = memopt.increment %[[STEP]]{{$}}
// CHECK:         %{{.*}} = memopt.increment %[[STEP]] skip_if %[[SKIP]]{{$}}
// CHECK:         return{{$}}
func.func @optimizers(%p: tensor<64x32xf32>, %g: tensor<64x32xf32>, %buf: tensor<64x32xf32>, %v: tensor<64x32xf32>,
                      %step: tensor<i64>, %skip: tensor<i1>) {
  %p1, %b1 = memopt.sgd_update %p, %g, %buf lr 1.000000e-02 momentum 9.000000e-01 weight_decay 0.000000e+00 : tensor<64x32xf32>
  %p2, %b2 = memopt.sgd_update %p, %g, %buf skip_if %skip lr 1.000000e-02 momentum 9.000000e-01 weight_decay 5.000000e-04 : tensor<64x32xf32>
  %p3, %m3, %v3 = memopt.adamw_update %p, %g, %buf, %v step %step lr 1.000000e-03 betas(9.000000e-01, 9.990000e-01) eps 1.000000e-08 weight_decay 1.000000e-02 : tensor<64x32xf32>
  %p4, %m4, %v4 = memopt.adamw_update %p, %g, %buf, %v step %step skip_if %skip lr 1.000000e-03 betas(9.000000e-01, 9.990000e-01) eps 1.000000e-08 weight_decay 1.000000e-02 : tensor<64x32xf32>
  %s1 = memopt.increment %step
  %s2 = memopt.increment %step skip_if %skip
  return
}

// 8-bit moments: 2048 codes and 8 block absmaxes.
// CHECK-LABEL: func.func @adamw_8bit(
// CHECK:         %{{.*}}, %{{.*}}, %{{.*}} = memopt.adamw_update %{{.*}} step %{{.*}} lr 1.000000e-03 betas(9.000000e-01, 0.99899999999999999) eps 1.000000e-08 weight_decay 1.000000e-02 : tensor<64x32xf32> state tensor<2080xi8>
func.func @adamw_8bit(%p: tensor<64x32xf32>, %g: tensor<64x32xf32>, %m: tensor<2080xi8>, %v: tensor<2080xi8>, %step: tensor<i64>) {
  %p1, %m1, %v1 = memopt.adamw_update %p, %g, %m, %v step %step lr 1.000000e-03 betas(9.000000e-01, 9.990000e-01) eps 1.000000e-08 weight_decay 1.000000e-02 : tensor<64x32xf32> state tensor<2080xi8>
  return
}

// CHECK-LABEL: func.func @loss_scaling(
// CHECK-SAME:    %[[LOSS:.*]]: tensor<f32>, %[[SCALE:.*]]: tensor<f32>, %[[TRACKER:.*]]: tensor<i64>, %[[D1:.*]]: tensor<64x32xf32>, %[[D2:.*]]: tensor<64xbf16>)
// CHECK:         %{{.*}} = memopt.scale_loss %[[LOSS]], %[[SCALE]]{{$}}
// CHECK:         %{{.*}}, %{{.*}} = memopt.unscale %[[SCALE]], %[[D1]] : tensor<64x32xf32>
// CHECK:         %{{.*}}:2, %[[FOUND_INF:.*]] = memopt.unscale %[[SCALE]], %[[D1]], %[[D2]] : tensor<64x32xf32>, tensor<64xbf16>
// CHECK:         %{{.*}}, %{{.*}} = memopt.update_scale %[[SCALE]], %[[TRACKER]], %[[FOUND_INF]] growth 2.000000e+00 backoff 5.000000e-01 interval 2000{{$}}
// CHECK:         return{{$}}

func.func @loss_scaling(%loss: tensor<f32>, %scale: tensor<f32>, %tracker: tensor<i64>, %d1: tensor<64x32xf32>, %d2: tensor<64xbf16>) {
  %ls = memopt.scale_loss %loss, %scale
  %u1, %inf1 = memopt.unscale %scale, %d1 : tensor<64x32xf32>
  %u2, %u3, %inf2 = memopt.unscale %scale, %d1, %d2 : tensor<64x32xf32>, tensor<64xbf16>
  %s, %n = memopt.update_scale %scale, %tracker, %inf2 growth 2.000000e+00 backoff 5.000000e-01 interval 2000
  return
}

// -----

// CHECK-LABEL: func.func @kernel
// CHECK-SAME: (%[[X:.*]]: memref<4x8xf32>, %[[W:.*]]: memref<3x8xf32>, %[[H:.*]]: memref<4x3xf32>, %[[C:.*]]: memref<4xf32>)
func.func @kernel(%x: memref<4x8xf32>, %w: memref<3x8xf32>, %h: memref<4x3xf32>, %c: memref<4xf32>) {
  // CHECK: memopt.kernel "memopt.matmul" ins(%[[X]], %[[W]] : memref<4x8xf32>, memref<3x8xf32>) outs(%[[H]] : memref<4x3xf32>) with {transpose_rhs} {memopt.scope = "fc"}
  memopt.kernel "memopt.matmul" ins(%x, %w : memref<4x8xf32>, memref<3x8xf32>) outs(%h : memref<4x3xf32>) with {transpose_rhs} {memopt.scope = "fc"}
  // CHECK: memopt.kernel "memopt.constant" outs(%[[C]] : memref<4xf32>) with {value = dense<1.000000e+00> : tensor<4xf32>}
  memopt.kernel "memopt.constant" outs(%c : memref<4xf32>) with {value = dense<1.0> : tensor<4xf32>}
  return
}

// -----

// CHECK-LABEL: func.func @fused
func.func @fused(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x6x3xf32>,
                 %m: tensor<1x4x6xi1>, %x: tensor<3x4xbf16>, %w: tensor<5x4xbf16>,
                 %b: tensor<5xbf16>, %t: tensor<3xi32>, %g: tensor<f32>) {
  // CHECK: %{{.*}}, %{{.*}} = memopt.attention %{{.*}}, %{{.*}}, %{{.*}} scale 1.250000e-01 causal : tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x3xf32> -> tensor<2x4x3xf32>, tensor<2x4xf32>
  %o, %lse = memopt.attention %q, %k, %v scale 0.125 causal : tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x3xf32> -> tensor<2x4x3xf32>, tensor<2x4xf32>
  // CHECK: memopt.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} scale 1.000000e+00 mask_value -1.000000e+09 dropout 1.000000e-01 seed 3 stream 4 : tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x3xf32>, tensor<1x4x6xi1> -> tensor<2x4x3xf32>, tensor<2x4xf32>
  %o2, %lse2 = memopt.attention %q, %k, %v mask %m scale 1.0 mask_value -1.0e9 dropout 0.1 seed 3 stream 4 : tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x3xf32>, tensor<1x4x6xi1> -> tensor<2x4x3xf32>, tensor<2x4xf32>
  // CHECK: memopt.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} scale 1.250000e-01 causal : tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x3xf32>, tensor<2x4x3xf32>, tensor<2x4xf32>
  %dq, %dk, %dv = memopt.attention_grad %q, %k, %v, %o, %lse, %o scale 0.125 causal : tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x3xf32>, tensor<2x4x3xf32>, tensor<2x4xf32>
  // CHECK: memopt.linear_cross_entropy %{{.*}}, %{{.*}}, %{{.*}} bias %{{.*}} chunk 2 ignore_index 0 reduction<sum> : tensor<3x4xbf16>, tensor<5x4xbf16>, tensor<3xi32>, tensor<5xbf16> -> tensor<3xf32>
  %l, %ls = memopt.linear_cross_entropy %x, %w, %t bias %b chunk 2 ignore_index 0 reduction<sum> : tensor<3x4xbf16>, tensor<5x4xbf16>, tensor<3xi32>, tensor<5xbf16> -> tensor<3xf32>
  // CHECK: memopt.linear_cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} chunk 5 : tensor<3x4xbf16>, tensor<5x4xbf16>, tensor<3xi32>, tensor<3xf32> -> tensor<3x4xbf16>, tensor<5x4xbf16>
  %dx, %dw = memopt.linear_cross_entropy_grad %x, %w, %t, %ls, %g chunk 5 : tensor<3x4xbf16>, tensor<5x4xbf16>, tensor<3xi32>, tensor<3xf32> -> tensor<3x4xbf16>, tensor<5x4xbf16>
  return
}

// A [5, 4] NF4 weight packs into 20 bytes.
// CHECK-LABEL: func.func @nf4_fused
func.func @nf4_fused(%x: tensor<3x4xbf16>, %w: tensor<20xi8>, %b: tensor<5xbf16>,
                     %t: tensor<3xi32>, %g: tensor<f32>) {
  // CHECK: memopt.nf4_linear_cross_entropy %{{.*}}, %{{.*}} shape [5, 4], %{{.*}} bias %{{.*}} chunk 2 : tensor<3x4xbf16>, tensor<20xi8>, tensor<3xi32>, tensor<5xbf16> -> tensor<3xf32>
  %l, %ls = memopt.nf4_linear_cross_entropy %x, %w shape [5, 4], %t bias %b chunk 2 : tensor<3x4xbf16>, tensor<20xi8>, tensor<3xi32>, tensor<5xbf16> -> tensor<3xf32>
  // CHECK: memopt.nf4_linear_cross_entropy_grad %{{.*}}, %{{.*}} shape [5, 4], %{{.*}}, %{{.*}}, %{{.*}} chunk 5 reduction<sum> : tensor<3x4xbf16>, tensor<20xi8>, tensor<3xi32>, tensor<3xf32> -> tensor<3x4xbf16>
  %dx = memopt.nf4_linear_cross_entropy_grad %x, %w shape [5, 4], %t, %ls, %g chunk 5 reduction<sum> : tensor<3x4xbf16>, tensor<20xi8>, tensor<3xi32>, tensor<3xf32> -> tensor<3x4xbf16>
  // CHECK: memopt.nf4_linear_cross_entropy_grad {{.*}} bias {{.*}} -> tensor<3x4xbf16>, tensor<5xbf16>
  %dx2, %db = memopt.nf4_linear_cross_entropy_grad %x, %w shape [5, 4], %t, %ls, %g bias %b chunk 5 : tensor<3x4xbf16>, tensor<20xi8>, tensor<3xi32>, tensor<3xf32>, tensor<5xbf16> -> tensor<3x4xbf16>, tensor<5xbf16>
  return
}
