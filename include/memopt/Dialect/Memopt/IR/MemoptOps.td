//===- MemoptOps.td - memopt operations --------------------*- tablegen -*-===//
//
// The op set of a training step: forward ops for MLPs, GPT/LLaMA-style
// decoders and ResNet-style CNNs, losses, the backward helpers whose
// vector-Jacobian products are not compositions of forward ops, optimizer
// updates and loss-scale ops.
//
// Types are checked by ODS constraints; shapes, ranks and attributes by the
// C++ verifiers in MemoptOps.cpp and MemoptLayerOps.cpp, whose messages name
// the operand and give the expected and the actual type. Which element types
// an op may pass to its runtime entry is the runtime's dtype table's to say
// (DTypeRules.h): every op checks them against it through
// Memopt_RuntimeDTypes, so the ODS constraints are only a first filter. Where
// several operands and results must share one type, the custom assembly
// prints it once (`custom<SameTypes>`) and the verifier reports any mismatch
// written in the generic form.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_IR_MEMOPTOPS_TD
#define MEMOPT_DIALECT_MEMOPT_IR_MEMOPTOPS_TD

include "memopt/Dialect/Memopt/IR/MemoptDialect.td"
include "memopt/Dialect/Memopt/IR/MemoptAttrs.td"
include "memopt/Dialect/Memopt/IR/MemoptInterfaces.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def Memopt_FloatTensor : StaticShapeTensorOf<[F32, F16, BF16]>;
def Memopt_IndexTensor : StaticShapeTensorOf<[I32, I64]>;
def Memopt_NumberTensor : StaticShapeTensorOf<[F32, F16, BF16, I32, I64]>;
def Memopt_MaskTensor : StaticShapeTensorOf<[I1]>;
// Optimizer state: the parameter's type, or packed 8-bit moments.
def Memopt_StateTensor : StaticShapeTensorOf<[F32, F16, BF16, I8]>;
// A weight in a packed quantized format (NF4): its bytes.
def Memopt_PackedTensor : 1DTensorOf<[I8]>;
def Memopt_AnyTensor : StaticShapeTensorOf<[F32, F16, BF16, I1, I32, I64]>;
def Memopt_F32Tensor : StaticShapeTensorOf<[F32]>;
// Any tensor the runtime stores, copied as bytes.
def Memopt_BytesTensor : StaticShapeTensorOf<[F32, F16, BF16, I1, I8, I32, I64]>;

def Memopt_F32Scalar : 0DTensorOf<[F32]>,
    BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getF32Type())">;
def Memopt_I64Scalar : 0DTensorOf<[I64]>,
    BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getI64Type())">;
def Memopt_I1Scalar : 0DTensorOf<[I1]>,
    BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getI1Type())">;

def Memopt_Pair : ConfinedAttr<DenseI64ArrayAttr, [DenseArrayCount<2>]>;

//===----------------------------------------------------------------------===//
// Base classes
//===----------------------------------------------------------------------===//

// The element types that the op passes to its runtime entry satisfy that
// entry's row of the runtime's dtype table (RuntimeDTypes.h).
def Memopt_RuntimeDTypes : NativeOpTrait<"RuntimeDTypesTrait"> {
  let cppNamespace = "::memopt";
}

// Element i of the result depends on element i of each operand alone
// (MemoptInterfaces.h).
def Memopt_Elementwise : NativeOpTrait<"ElementwiseTrait"> {
  let cppNamespace = "::memopt";
}

// The runtime call an op lowers to, which RuntimeDTypes.cpp binds for every
// op that names one: the entry, the op code (runtime.h's enumerator, "" for
// an entry of one op), and the values its dtype arguments read, in the
// entry's order: "in<i>" operand i, "out<i>" result i, "ins<i>" operands i
// and after (one dtype check each).
class Memopt_RuntimeCall<string entry, string opCode = "",
                         string dtypeSources = "in0"> {
  code declaration = [{
    static constexpr const char *kRuntimeEntry = "}] # entry # [{";
    static constexpr const char *kRuntimeOpCode = "}] # opCode # [{";
    static constexpr const char *kRuntimeDTypeSources = "}] # dtypeSources # [{";
  }];
}

class Memopt_Op<string mnemonic, list<Trait> traits = []>
    : Op<Memopt_Dialect, mnemonic,
         !listconcat(traits, [Memopt_RuntimeDTypes])> {
  let hasVerifier = 1;
}

// One float tensor in, one of the same type out.
class Memopt_UnaryOp<string mnemonic, string formula>
    : Memopt_Op<mnemonic, [Pure, Memopt_Elementwise,
                           Memopt_InPlaceOpInterface,
                           DeclareOpInterfaceMethods<Memopt_DifferentiableOpInterface>]> {
  let summary = "elementwise " # mnemonic;
  let description = "Computes `" # formula # "` for each element.";
  let arguments = (ins Memopt_FloatTensor:$input);
  let results = (outs Memopt_FloatTensor:$result);
  let assemblyFormat = [{
    $input attr-dict `:` custom<SameTypes>(type($input), type($result))
  }];
  let extraClassDeclaration = Memopt_RuntimeCall<"memopt_unary",
      "MEMOPT_UNARY_" # !toupper(mnemonic)>.declaration;
  let extraClassDefinition = [{
    ::mlir::LogicalResult $cppClass::verify() {
      return ::memopt::verification::expectSameTypes(
          *this, {{"operand 'input'", getInput()}, {"result", getResult()}});
    }
  }];
}

// Two float tensors of one type in, one of that type out.
class Memopt_BinaryOp<string mnemonic, string formula,
                      list<Trait> traits = [DeclareOpInterfaceMethods<Memopt_DifferentiableOpInterface>]>
    : Memopt_Op<mnemonic, !listconcat([Pure, Memopt_Elementwise,
                                       Memopt_InPlaceOpInterface], traits)> {
  let summary = "elementwise " # mnemonic;
  let description = "Computes `" # formula # "` for each element. Both "
      "operands have the result's type: broadcasting is explicit "
      "(`memopt.broadcast`).";
  let arguments = (ins Memopt_FloatTensor:$lhs, Memopt_FloatTensor:$rhs);
  let results = (outs Memopt_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:`
    custom<SameTypes>(type($lhs), type($rhs), type($result))
  }];
  let extraClassDeclaration = Memopt_RuntimeCall<"memopt_binary",
      "MEMOPT_BINARY_" # !toupper(mnemonic)>.declaration;
  let extraClassDefinition = [{
    ::mlir::LogicalResult $cppClass::verify() {
      return ::memopt::verification::expectSameTypes(
          *this, {{"operand 'lhs'", getLhs()}, {"operand 'rhs'", getRhs()},
                  {"result", getResult()}});
    }
  }];
}

// A float tensor and a scalar attribute.
class Memopt_ScalarOp<string mnemonic, string formula>
    : Memopt_Op<mnemonic, [Pure, Memopt_Elementwise,
                           Memopt_InPlaceOpInterface,
                           DeclareOpInterfaceMethods<Memopt_DifferentiableOpInterface>]> {
  let summary = "elementwise " # mnemonic;
  let description = "Computes `" # formula # "` for each element, with "
      "`value` a compile-time scalar.";
  let arguments = (ins Memopt_FloatTensor:$input, F64Attr:$value);
  let results = (outs Memopt_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $value attr-dict `:`
    custom<SameTypes>(type($input), type($result))
  }];
  let extraClassDeclaration = Memopt_RuntimeCall<"memopt_scalar",
      "MEMOPT_SCALAR_" # !toupper(!subst("_scalar", "", mnemonic))>.declaration;
  let extraClassDefinition = [{
    ::mlir::LogicalResult $cppClass::verify() {
      return ::memopt::verification::expectSameTypes(
          *this, {{"operand 'input'", getInput()}, {"result", getResult()}});
    }
  }];
}

// The gradient of a unary activation, given its input or its output.
class Memopt_ActivationGradOp<string mnemonic, string operandName,
                              string formula>
    : Memopt_Op<mnemonic, [Pure, Memopt_Elementwise,
                           Memopt_InPlaceOpInterface]> {
  let summary = "gradient of an elementwise activation";
  let description = "Computes `" # formula # "` for each element: the "
      "vector-Jacobian product of the activation, from its `" # operandName #
      "` and the gradient of its result.";
  let arguments = !dag(ins, [Memopt_FloatTensor, Memopt_FloatTensor],
                       [operandName, "grad"]);
  let results = (outs Memopt_FloatTensor:$result);
  let assemblyFormat = "$" # operandName # " `,` $grad attr-dict `:` "
      "custom<SameTypes>(type($" # operandName # "), type($grad), "
      "type($result))";
  let extraClassDeclaration = Memopt_RuntimeCall<"memopt_activation_grad",
      "MEMOPT_GRAD_" # !toupper(!subst("_grad", "", mnemonic))>.declaration;
  let extraClassDefinition = [{
    ::mlir::LogicalResult $cppClass::verify() {
      return ::memopt::verification::expectSameTypes(
          *this, {{"operand '}] # operandName # [{'", getOperand(0)},
                  {"operand 'grad'", getGrad()}, {"result", getResult()}});
    }
  }];
}

//===----------------------------------------------------------------------===//
// Constants, casts and selection
//===----------------------------------------------------------------------===//

def Memopt_ConstantOp : Op<Memopt_Dialect, "constant",
    [ConstantLike, Pure, Memopt_RuntimeDTypes,
     DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_fill", "", "out0">.declaration;
  let summary = "a tensor known at compile time";
  let description = [{
    A dense tensor constant: module buffers, masks, position indices.

    ```mlir
    %mask = memopt.constant dense<true> : tensor<8x8xi1>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Memopt_AnyTensor:$result);
  let assemblyFormat = "$value attr-dict";
  let hasFolder = 1;
}

def Memopt_CastOp : Memopt_Op<"cast",
    [Pure, Memopt_InPlaceOpInterface,
     DeclareOpInterfaceMethods<Memopt_DifferentiableOpInterface>]> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_cast", "", "in0, out0">.declaration;
  let summary = "element type conversion";
  let description = [{
    Converts each element to the result's element type. Shapes are equal.
    Between floats, and from an index (i32, i64) to a float, it rounds to
    nearest even. From a float to an index it truncates toward zero, as
    PyTorch's `.long()`; NaN, the infinities and values outside the index
    type's range give its lowest value. i64 to i32 keeps the low 32 bits.
    Only the float-to-float cast has a gradient: an index carries none.

    ```mlir
    %h = memopt.cast %x : tensor<4x8xf32> to tensor<4x8xbf16>
    %i = memopt.cast %p : tensor<4xf32> to tensor<4xi64>
    ```
  }];
  let arguments = (ins Memopt_NumberTensor:$input);
  let results = (outs Memopt_NumberTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
}

def Memopt_WhereOp : Memopt_Op<"where",
    [Pure, Memopt_InPlaceOpInterface,
     DeclareOpInterfaceMethods<Memopt_DifferentiableOpInterface>]> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_where", "", "out0">.declaration;
  let summary = "elementwise selection";
  let description = [{
    `result[i] = condition[i] ? true_value[i] : false_value[i]`. All operands
    have one shape; the values and the result have one type, a float or an
    index (an index carries no gradient).

    ```mlir
    %r = memopt.where %c, %a, %b : tensor<4xi1>, tensor<4xf32>
    ```
  }];
  let arguments = (ins Memopt_MaskTensor:$condition,
                       Memopt_NumberTensor:$true_value,
                       Memopt_NumberTensor:$false_value);
  let results = (outs Memopt_NumberTensor:$result);
  let assemblyFormat = [{
    $condition `,` $true_value `,` $false_value attr-dict `:` type($condition)
    `,` custom<SameTypes>(type($true_value), type($false_value), type($result))
  }];
}

def Memopt_MaskedFillOp : Memopt_Op<"masked_fill",
    [Pure, Memopt_InPlaceOpInterface,
     DeclareOpInterfaceMethods<Memopt_DifferentiableOpInterface>]> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_masked_fill">.declaration;
  let summary = "replace masked elements by a scalar";
  let description = [{
    `result[i] = mask[i] ? value : input[i]`, as `Tensor.masked_fill`. The
    mask has the input's shape (broadcast it explicitly).

    ```mlir
    %s = memopt.masked_fill %scores, %mask, -1.0e9 : tensor<2x8x8xf32>, tensor<2x8x8xi1>
    ```
  }];
  let arguments = (ins Memopt_FloatTensor:$input, Memopt_MaskTensor:$mask,
                       F64Attr:$value);
  let results = (outs Memopt_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $mask `,` $value attr-dict `:`
    custom<SameTypes>(type($input), type($result)) `,` type($mask)
  }];
}

def Memopt_CompareOp : Memopt_Op<"compare",
    [Pure, Memopt_Elementwise, AllTypesMatch<["lhs", "rhs"]>,
     DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let extraClassDeclaration = Memopt_RuntimeCall<"memopt_compare">.declaration;
  let summary = "elementwise comparison";
  let description = [{
    `result[i] = lhs[i] <predicate> rhs[i]`, a mask, as `torch.eq`, `ne`,
    `lt`, `le`, `gt` and `ge`: float operands (f16 and bf16 compared as
    stored) or indices; an ordered comparison with a NaN is false and `ne`
    true, so `memopt.compare ne, %x, %x` finds the NaNs. Both operands have
    one type and the result their shape: broadcasting is explicit. A mask
    has no gradient; `memopt.where` routes the gradients it selects.

    ```mlir
    %m = memopt.compare gt, %x, %zeros : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Memopt_ComparePredicateAttr:$predicate,
                       AnyTypeOf<[Memopt_FloatTensor, Memopt_IndexTensor]>:$lhs,
                       AnyTypeOf<[Memopt_FloatTensor, Memopt_IndexTensor]>:$rhs);
  let results = (outs Memopt_MaskTensor:$result);
  let assemblyFormat = [{
    `` $predicate `,` $lhs `,` $rhs attr-dict `:` type($lhs)
  }];
}

//===----------------------------------------------------------------------===//
// Elementwise arithmetic and activations
//===----------------------------------------------------------------------===//

def Memopt_AddOp : Memopt_BinaryOp<"add", "lhs + rhs">;
def Memopt_SubOp : Memopt_BinaryOp<"sub", "lhs - rhs">;
def Memopt_MulOp : Memopt_BinaryOp<"mul", "lhs * rhs">;
def Memopt_DivOp : Memopt_BinaryOp<"div", "lhs / rhs">;
def Memopt_MaximumOp : Memopt_BinaryOp<"maximum", "max(lhs, rhs)">;

def Memopt_AddScalarOp : Memopt_ScalarOp<"add_scalar", "input + value">;
def Memopt_MulScalarOp : Memopt_ScalarOp<"mul_scalar", "input * value">;
def Memopt_PowScalarOp : Memopt_ScalarOp<"pow_scalar", "input ^ value">;

def Memopt_NegOp : Memopt_UnaryOp<"neg", "-x">;
def Memopt_ExpOp : Memopt_UnaryOp<"exp", "e^x">;
def Memopt_LogOp : Memopt_UnaryOp<"log", "ln(x)">;
def Memopt_SqrtOp : Memopt_UnaryOp<"sqrt", "sqrt(x)">;
def Memopt_RsqrtOp : Memopt_UnaryOp<"rsqrt", "1 / sqrt(x)">;
def Memopt_TanhOp : Memopt_UnaryOp<"tanh", "tanh(x)">;
def Memopt_SigmoidOp : Memopt_UnaryOp<"sigmoid", "1 / (1 + e^-x)">;
def Memopt_ReluOp : Memopt_UnaryOp<"relu", "max(x, 0)">;
def Memopt_SiluOp : Memopt_UnaryOp<"silu", "x * sigmoid(x)">;
def Memopt_HardswishOp
    : Memopt_UnaryOp<"hardswish", "x * min(max(x + 3, 0), 6) / 6">;
def Memopt_HardsigmoidOp
    : Memopt_UnaryOp<"hardsigmoid", "min(max(x + 3, 0), 6) / 6">;
def Memopt_MishOp : Memopt_UnaryOp<"mish", "x * tanh(log(1 + e^x))">;
def Memopt_AbsOp : Memopt_UnaryOp<"abs", "|x|">;
def Memopt_SignOp : Memopt_UnaryOp<"sign",
    "-1, 0 or 1 by the sign of x (NaN at NaN); its gradient is zero">;
def Memopt_SinOp : Memopt_UnaryOp<"sin", "sin(x)">;
def Memopt_CosOp : Memopt_UnaryOp<"cos", "cos(x)">;
def Memopt_ErfOp : Memopt_UnaryOp<"erf", "erf(x)">;
def Memopt_Expm1Op : Memopt_UnaryOp<"expm1", "e^x - 1">;
def Memopt_Log1pOp : Memopt_UnaryOp<"log1p", "ln(1 + x)">;
def Memopt_SoftplusOp
    : Memopt_UnaryOp<"softplus", "ln(1 + e^x), x itself above 20 (F.softplus)">;
def Memopt_TanOp : Memopt_UnaryOp<"tan", "tan(x)">;
def Memopt_AsinOp : Memopt_UnaryOp<"asin", "arcsin(x), NaN outside [-1, 1]">;
def Memopt_AcosOp : Memopt_UnaryOp<"acos", "arccos(x), NaN outside [-1, 1]">;
def Memopt_AtanOp : Memopt_UnaryOp<"atan", "arctan(x)">;
def Memopt_FloorOp : Memopt_UnaryOp<"floor",
    "the largest integer not above x; its gradient is zero">;
def Memopt_CeilOp : Memopt_UnaryOp<"ceil",
    "the smallest integer not below x; its gradient is zero">;
def Memopt_RoundOp : Memopt_UnaryOp<"round",
    "the nearest integer to x, halves to even (torch.round); its gradient "
    "is zero">;
def Memopt_TruncOp : Memopt_UnaryOp<"trunc",
    "x rounded toward zero; its gradient is zero">;
def Memopt_SincOp : Memopt_UnaryOp<"sinc",
    "sin(pi x) / (pi x), 1 at 0 (torch.sinc)">;

def Memopt_GeluOp : Memopt_Op<"gelu",
    [Pure, Memopt_InPlaceOpInterface,
     DeclareOpInterfaceMethods<Memopt_DifferentiableOpInterface>]> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_unary", "MEMOPT_UNARY_GELU">.declaration;
  let summary = "elementwise GELU";
  let description = [{
    `x * Phi(x)`, with the Gaussian CDF `Phi` exact (erf) by default or the
    tanh approximation with `approximate<tanh>`, as `F.gelu`.

    ```mlir
    %y = memopt.gelu %x approximate<tanh> : tensor<4x64xf32>
    ```
  }];
  let arguments = (ins Memopt_FloatTensor:$input,
      DefaultValuedAttr<Memopt_GeluApproximationAttr,
                        "::memopt::GeluApproximation::None">:$approximate);
  let results = (outs Memopt_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`approximate` `` $approximate^)? attr-dict `:`
    custom<SameTypes>(type($input), type($result))
  }];
}

def Memopt_ReluGradOp
    : Memopt_ActivationGradOp<"relu_grad", "input", "input > 0 ? grad : 0">;
def Memopt_SiluGradOp : Memopt_ActivationGradOp<"silu_grad", "input",
    "grad * s * (1 + input * (1 - s)), s = sigmoid(input)">;
def Memopt_TanhGradOp
    : Memopt_ActivationGradOp<"tanh_grad", "output", "grad * (1 - output^2)">;
def Memopt_SigmoidGradOp : Memopt_ActivationGradOp<"sigmoid_grad", "output",
    "grad * output * (1 - output)">;
// The hard activations' gradients at their kinks and at NaN are PyTorch's
// (hardswish_backward, hardsigmoid_backward).
def Memopt_HardswishGradOp : Memopt_ActivationGradOp<"hardswish_grad", "input",
    "input < -3 ? 0 : input <= 3 ? grad * (input / 3 + 1/2) : grad">;
def Memopt_HardsigmoidGradOp : Memopt_ActivationGradOp<"hardsigmoid_grad",
    "input", "-3 < input < 3 ? grad / 6 : 0">;
def Memopt_MishGradOp : Memopt_ActivationGradOp<"mish_grad", "input",
    "grad * (t + input * sigmoid(input) * (1 - t^2)), "
    "t = tanh(log(1 + e^input))">;

def Memopt_GeluGradOp : Memopt_Op<"gelu_grad",
    [Pure, Memopt_InPlaceOpInterface]> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_activation_grad", "MEMOPT_GRAD_GELU">.declaration;
  let summary = "gradient of GELU";
  let description = [{
    The vector-Jacobian product of `memopt.gelu` with the same
    approximation, from its input and the gradient of its result.
  }];
  let arguments = (ins Memopt_FloatTensor:$input, Memopt_FloatTensor:$grad,
      DefaultValuedAttr<Memopt_GeluApproximationAttr,
                        "::memopt::GeluApproximation::None">:$approximate);
  let results = (outs Memopt_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $grad (`approximate` `` $approximate^)? attr-dict `:`
    custom<SameTypes>(type($input), type($grad), type($result))
  }];
}

def Memopt_ClampOp : Memopt_Op<"clamp",
    [Pure, Memopt_InPlaceOpInterface,
     DeclareOpInterfaceMethods<Memopt_DifferentiableOpInterface>]> {
  let extraClassDeclaration = Memopt_RuntimeCall<"memopt_clamp">.declaration;
  let summary = "elementwise clamp to a range";
  let description = [{
    `min(max(x, min), max)` for each element, a NaN staying NaN, as
    `torch.clamp`. The bounds are compile-time numbers: either may be
    missing (no bound on that side), not both, and `min <= max`. The
    runtime rounds them to f32.

    `inclusive` says how the gradient (`memopt.clamp_grad`) treats an input
    that equals a bound: `true` (the default) passes the gradient for
    `min <= x <= max`, as `torch.clamp`; `false` only for `min < x < max`,
    as `F.hardtanh` and `F.relu6`.

    ```mlir
    %y = memopt.clamp %x min 0.0 max 6.0 inclusive = false : tensor<4x64xf32>
    %z = memopt.clamp %x min -1.0 : tensor<4x64xf32>
    ```
  }];
  let arguments = (ins Memopt_FloatTensor:$input, OptionalAttr<F64Attr>:$min,
                       OptionalAttr<F64Attr>:$max,
                       DefaultValuedAttr<BoolAttr, "true">:$inclusive);
  let results = (outs Memopt_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`min` $min^)? (`max` $max^)? (`inclusive` `=` $inclusive^)?
    attr-dict `:` custom<SameTypes>(type($input), type($result))
  }];
}

def Memopt_ClampGradOp : Memopt_Op<"clamp_grad",
    [Pure, Memopt_InPlaceOpInterface]> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_clamp_grad">.declaration;
  let summary = "gradient of clamp";
  let description = [{
    The vector-Jacobian product of `memopt.clamp` with the same bounds, from
    its input and the gradient of its result: `grad` where the input is
    within the bounds, else 0. Inclusive (the default): `min <= input <=
    max`, and 0 at a NaN input (torch.clamp's backward). `inclusive = false`:
    `min < input < max`, and `grad` at a NaN input (PyTorch's
    `hardtanh_backward`). A missing bound excludes nothing.

    ```mlir
    %dx = memopt.clamp_grad %x, %g min 0.0 max 6.0 inclusive = false : tensor<4x64xf32>
    ```
  }];
  let arguments = (ins Memopt_FloatTensor:$input, Memopt_FloatTensor:$grad,
                       OptionalAttr<F64Attr>:$min, OptionalAttr<F64Attr>:$max,
                       DefaultValuedAttr<BoolAttr, "true">:$inclusive);
  let results = (outs Memopt_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $grad (`min` $min^)? (`max` $max^)?
    (`inclusive` `=` $inclusive^)? attr-dict `:`
    custom<SameTypes>(type($input), type($grad), type($result))
  }];
}

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

def Memopt_BroadcastOp : Memopt_Op<"broadcast",
    [Pure, DeclareOpInterfaceMethods<Memopt_DifferentiableOpInterface>]> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_broadcast">.declaration;
  let summary = "explicit broadcast";
  let description = [{
    Maps operand dimension `i` to result dimension `dims[i]` (`dims`
    strictly increasing); every other result dimension is new. An operand
    dimension is either the result's size or 1 (then repeated).

    ```mlir
    %b = memopt.broadcast %bias dims [1] : tensor<64xf32> to tensor<8x64xf32>
    ```
  }];
  let arguments = (ins Memopt_AnyTensor:$input, DenseI64ArrayAttr:$dims);
  let results = (outs Memopt_AnyTensor:$result);
  let assemblyFormat = [{
    $input `dims` $dims attr-dict `:` type($input) `to` type($result)
  }];
}

def Memopt_ReshapeOp : Memopt_Op<"reshape",
    [Pure, DeclareOpInterfaceMethods<Memopt_DifferentiableOpInterface>]> {
  let summary = "change the shape, keep the row-major element order";
  let description = [{
    ```mlir
    %r = memopt.reshape %x : tensor<2x8x64xf32> to tensor<16x64xf32>
    ```
  }];
  let arguments = (ins Memopt_AnyTensor:$input);
  let results = (outs Memopt_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
}

def Memopt_TransposeOp : Memopt_Op<"transpose",
    [Pure, DeclareOpInterfaceMethods<Memopt_DifferentiableOpInterface>]> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_transpose">.declaration;
  let summary = "permute dimensions";
  let description = [{
    Result dimension `i` is operand dimension `permutation[i]`.

    ```mlir
    %t = memopt.transpose %x perm [0, 2, 1] : tensor<2x8x4xf32> to tensor<2x4x8xf32>
    ```
  }];
  let arguments = (ins Memopt_AnyTensor:$input,
                       DenseI64ArrayAttr:$permutation);
  let results = (outs Memopt_AnyTensor:$result);
  let assemblyFormat = [{
    $input `perm` $permutation attr-dict `:` type($input) `to` type($result)
  }];
}

def Memopt_SliceOp : Memopt_Op<"slice",
    [Pure, DeclareOpInterfaceMethods<Memopt_DifferentiableOpInterface>]> {
  let extraClassDeclaration = Memopt_RuntimeCall<"memopt_slice">.declaration;
  let summary = "strided static slice";
  let description = [{
    Takes indices `starts[d], starts[d] + strides[d], ...` below `limits[d]`
    in each dimension `d`: result dimension `d` has
    `ceil((limits[d] - starts[d]) / strides[d])` elements.

    ```mlir
    %s = memopt.slice %x starts [0, 8] limits [4, 16] strides [1, 1] : tensor<4x24xf32> to tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Memopt_AnyTensor:$input, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$limits, DenseI64ArrayAttr:$strides);
  let results = (outs Memopt_AnyTensor:$result);
  let assemblyFormat = [{
    $input `starts` $starts `limits` $limits `strides` $strides attr-dict `:`
    type($input) `to` type($result)
  }];
}

def Memopt_SliceGradOp : Memopt_Op<"slice_grad",
    [Pure, DeclareOpInterfaceMethods<Memopt_DifferentiableOpInterface>]> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_slice_grad">.declaration;
  let summary = "gradient of a slice: scatter into zeros";
  let description = [{
    The vector-Jacobian product of `memopt.slice`: a tensor of the sliced
    operand's type, zero except at the sliced positions, which hold `grad`.
    With unit strides it is also zero padding (`F.pad` with value 0), which
    is why it is differentiable: its VJP is the slice.

    ```mlir
    %p = memopt.slice_grad %x starts [0, 1] limits [4, 9] strides [1, 1] : tensor<4x8xf32> to tensor<4x10xf32>
    ```
  }];
  let arguments = (ins Memopt_FloatTensor:$grad, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$limits, DenseI64ArrayAttr:$strides);
  let results = (outs Memopt_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `starts` $starts `limits` $limits `strides` $strides attr-dict `:`
    type($grad) `to` type($result)
  }];
}

def Memopt_ConcatOp : Memopt_Op<"concat",
    [Pure, DeclareOpInterfaceMethods<Memopt_DifferentiableOpInterface>]> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_concat", "", "out0">.declaration;
  let summary = "concatenate along one dimension";
  let description = [{
    ```mlir
    %c = memopt.concat %a, %b dim 1 : tensor<4x8xf32>, tensor<4x2xf32> -> tensor<4x10xf32>
    ```
  }];
  let arguments = (ins Variadic<Memopt_AnyTensor>:$inputs, I64Attr:$dim);
  let results = (outs Memopt_AnyTensor:$result);
  let assemblyFormat = [{
    $inputs `dim` $dim attr-dict `:` type($inputs) `->` type($result)
  }];
}

//===----------------------------------------------------------------------===//
// Reductions and normalisation
//===----------------------------------------------------------------------===//

class Memopt_ReduceOp<string mnemonic, string what,
                      list<Trait> traits = [DeclareOpInterfaceMethods<Memopt_DifferentiableOpInterface>]>
    : Memopt_Op<mnemonic, !listconcat([Pure], traits)> {
  let extraClassDeclaration = Memopt_RuntimeCall<"memopt_reduce",
      "MEMOPT_REDUCE_" # !toupper(!subst("reduce_", "", mnemonic)),
      "in0, out0">.declaration;
  let summary = what # " over dimensions";
  let description = "Computes the " # what # " over `dims` (sorted, "
      "unique), which the result drops. Accumulates in f32 and rounds once: "
      "the result has the input's element type or f32, or any float type "
      "when the input is f32.";
  let arguments = (ins Memopt_FloatTensor:$input, DenseI64ArrayAttr:$dims);
  let results = (outs Memopt_FloatTensor:$result);
  let assemblyFormat = [{
    $input `dims` $dims attr-dict `:` type($input) `to` type($result)
  }];
}

def Memopt_ReduceSumOp : Memopt_ReduceOp<"reduce_sum", "sum">;
def Memopt_ReduceMeanOp : Memopt_ReduceOp<"reduce_mean", "mean">;
def Memopt_ReduceMaxOp : Memopt_ReduceOp<"reduce_max", "maximum">;
def Memopt_ReduceSumSquaresOp
    : Memopt_ReduceOp<"reduce_sum_squares", "sum of squares", []>;

class Memopt_SoftmaxOpBase<string mnemonic, string formula,
                           list<Trait> traits = []>
    : Memopt_Op<mnemonic, !listconcat([Pure, DeclareOpInterfaceMethods<Memopt_DifferentiableOpInterface>], traits)> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_" # mnemonic>.declaration;
  let summary = "numerically stable " # mnemonic # " along one dimension";
  let description = "Computes `" # formula # "` along `dim`, subtracting the "
      "maximum first.";
  let arguments = (ins Memopt_FloatTensor:$input, I64Attr:$dim);
  let results = (outs Memopt_FloatTensor:$result);
  let assemblyFormat = [{
    $input `dim` $dim attr-dict `:`
    custom<SameTypes>(type($input), type($result))
  }];
}

def Memopt_SoftmaxOp
    : Memopt_SoftmaxOpBase<"softmax", "e^x_i / sum_j e^x_j",
                           [Memopt_InPlaceOpInterface]>;
def Memopt_LogSoftmaxOp
    : Memopt_SoftmaxOpBase<"log_softmax", "x_i - log(sum_j e^x_j)">;

class Memopt_SoftmaxGradOpBase<string mnemonic, string formula>
    : Memopt_Op<mnemonic, [Pure]> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_" # mnemonic>.declaration;
  let summary = "gradient of " # mnemonic;
  let description = "The vector-Jacobian product from the forward op's "
      "output `y` and the gradient `g` of it: `" # formula # "` along `dim`.";
  let arguments = (ins Memopt_FloatTensor:$output, Memopt_FloatTensor:$grad,
                       I64Attr:$dim);
  let results = (outs Memopt_FloatTensor:$result);
  let assemblyFormat = [{
    $output `,` $grad `dim` $dim attr-dict `:`
    custom<SameTypes>(type($output), type($grad), type($result))
  }];
}

def Memopt_SoftmaxGradOp
    : Memopt_SoftmaxGradOpBase<"softmax_grad", "y * (g - sum(g * y))">;
def Memopt_LogSoftmaxGradOp
    : Memopt_SoftmaxGradOpBase<"log_softmax_grad", "g - e^y * sum(g)">;

def Memopt_LayerNormOp : Memopt_Op<"layer_norm",
    [Pure, DeclareOpInterfaceMethods<Memopt_DifferentiableOpInterface>]> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_layer_norm", "", "in0, in1">.declaration;
  let summary = "layer normalisation over the trailing dimensions";
  let description = [{
    Normalises over the trailing dimensions that `weight` (and `bias`, of the
    same type) covers, as `nn.LayerNorm`, with statistics in f32. Also
    returns the per-row `mean` and reciprocal standard deviation `rstd`
    (shape: the leading dimensions), which the backward reads.

    ```mlir
    %y, %mean, %rstd = memopt.layer_norm %x, %w, %b eps 1.0e-05 : tensor<2x8x64xf32>, tensor<64xf32> -> tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Memopt_FloatTensor:$input, Memopt_FloatTensor:$weight,
                       Memopt_FloatTensor:$bias, F64Attr:$epsilon);
  let results = (outs Memopt_FloatTensor:$result, Memopt_F32Tensor:$mean,
                      Memopt_F32Tensor:$rstd);
  let assemblyFormat = [{
    $input `,` $weight `,` $bias `eps` $epsilon attr-dict `:`
    custom<SameTypes>(type($input), type($result)) `,`
    custom<SameTypes>(type($weight), type($bias)) `->`
    custom<SameTypes>(type($mean), type($rstd))
  }];
}

def Memopt_LayerNormGradOp : Memopt_Op<"layer_norm_grad", [Pure]> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_layer_norm_grad", "", "in0, in2">.declaration;
  let summary = "gradient of layer normalisation";
  let description = [{
    Gradients of `memopt.layer_norm`'s input, weight and bias from the
    gradient of its result and the saved `mean` and `rstd`.
  }];
  let arguments = (ins Memopt_FloatTensor:$grad, Memopt_FloatTensor:$input,
                       Memopt_FloatTensor:$weight, Memopt_F32Tensor:$mean,
                       Memopt_F32Tensor:$rstd);
  let results = (outs Memopt_FloatTensor:$grad_input,
                      Memopt_FloatTensor:$grad_weight,
                      Memopt_FloatTensor:$grad_bias);
  let assemblyFormat = [{
    $grad `,` $input `,` $weight `,` $mean `,` $rstd attr-dict `:`
    custom<SameTypes>(type($grad), type($input), type($grad_input)) `,`
    custom<SameTypes>(type($weight), type($grad_weight), type($grad_bias)) `,`
    custom<SameTypes>(type($mean), type($rstd))
  }];
}

def Memopt_RmsNormOp : Memopt_Op<"rms_norm",
    [Pure, DeclareOpInterfaceMethods<Memopt_DifferentiableOpInterface>]> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_rms_norm", "", "in0, in1">.declaration;
  let summary = "RMS normalisation over the trailing dimensions";
  let description = [{
    `x * rsqrt(mean(x^2) + eps) * weight` over the trailing dimensions that
    `weight` covers (LLaMA's RMSNorm), with statistics in f32. Also returns
    the per-row `rstd` for the backward.

    ```mlir
    %y, %rstd = memopt.rms_norm %x, %w eps 1.0e-06 : tensor<2x8x64xf32>, tensor<64xf32> -> tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Memopt_FloatTensor:$input, Memopt_FloatTensor:$weight,
                       F64Attr:$epsilon);
  let results = (outs Memopt_FloatTensor:$result, Memopt_F32Tensor:$rstd);
  let assemblyFormat = [{
    $input `,` $weight `eps` $epsilon attr-dict `:`
    custom<SameTypes>(type($input), type($result)) `,` type($weight) `->`
    type($rstd)
  }];
}

def Memopt_RmsNormGradOp : Memopt_Op<"rms_norm_grad", [Pure]> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_rms_norm_grad", "", "in0, in2">.declaration;
  let summary = "gradient of RMS normalisation";
  let arguments = (ins Memopt_FloatTensor:$grad, Memopt_FloatTensor:$input,
                       Memopt_FloatTensor:$weight, Memopt_F32Tensor:$rstd);
  let results = (outs Memopt_FloatTensor:$grad_input,
                      Memopt_FloatTensor:$grad_weight);
  let assemblyFormat = [{
    $grad `,` $input `,` $weight `,` $rstd attr-dict `:`
    custom<SameTypes>(type($grad), type($input), type($grad_input)) `,`
    custom<SameTypes>(type($weight), type($grad_weight)) `,` type($rstd)
  }];
}

def Memopt_BatchNormOp : Memopt_Op<"batch_norm",
    [Pure, DeclareOpInterfaceMethods<Memopt_DifferentiableOpInterface>,
     DeclareOpInterfaceMethods<Memopt_InPlaceOpInterface,
                               ["mayWriteResultOver"]>]> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_batch_norm">.declaration;
  let summary = "batch normalisation in training mode";
  let description = [{
    Normalises each channel (dimension 1) over the batch and spatial
    dimensions with the batch's statistics, as `nn.BatchNorm2d` in training
    mode. Returns the batch `mean` and `rstd` (for the backward) and the
    updated running statistics: `new = (1 - momentum) * old + momentum *
    batch`, with the unbiased variance. Every per-channel tensor is one 1-D
    f32 type of the channel count.

    ```mlir
    %y, %mean, %rstd, %rm2, %rv2 = memopt.batch_norm %x, %w, %b, %rm, %rv eps 1.0e-05 momentum 1.0e-01 : tensor<4x16x8x8xf32>, tensor<16xf32>
    ```
  }];
  let arguments = (ins Memopt_FloatTensor:$input, Memopt_F32Tensor:$weight,
                       Memopt_F32Tensor:$bias, Memopt_F32Tensor:$running_mean,
                       Memopt_F32Tensor:$running_var, F64Attr:$epsilon,
                       F64Attr:$momentum);
  let results = (outs Memopt_FloatTensor:$result, Memopt_F32Tensor:$mean,
                      Memopt_F32Tensor:$rstd,
                      Memopt_F32Tensor:$new_running_mean,
                      Memopt_F32Tensor:$new_running_var);
  let assemblyFormat = [{
    $input `,` $weight `,` $bias `,` $running_mean `,` $running_var
    `eps` $epsilon `momentum` $momentum attr-dict `:`
    custom<SameTypes>(type($input), type($result)) `,`
    custom<SameTypes>(type($weight), type($bias), type($running_mean),
                      type($running_var), type($mean), type($rstd),
                      type($new_running_mean), type($new_running_var))
  }];
}

def Memopt_BatchNormGradOp : Memopt_Op<"batch_norm_grad", [Pure]> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_batch_norm_grad", "", "in1">.declaration;
  let summary = "gradient of batch normalisation in training mode";
  let arguments = (ins Memopt_FloatTensor:$grad, Memopt_FloatTensor:$input,
                       Memopt_F32Tensor:$weight, Memopt_F32Tensor:$mean,
                       Memopt_F32Tensor:$rstd);
  let results = (outs Memopt_FloatTensor:$grad_input,
                      Memopt_F32Tensor:$grad_weight,
                      Memopt_F32Tensor:$grad_bias);
  let assemblyFormat = [{
    $grad `,` $input `,` $weight `,` $mean `,` $rstd attr-dict `:`
    custom<SameTypes>(type($grad), type($input), type($grad_input)) `,`
    custom<SameTypes>(type($weight), type($mean), type($rstd),
                      type($grad_weight), type($grad_bias))
  }];
}

//===----------------------------------------------------------------------===//
// Matrix products, embeddings, convolution and pooling
//===----------------------------------------------------------------------===//

def Memopt_MatmulOp : Memopt_Op<"matmul",
    [Pure, DeclareOpInterfaceMethods<Memopt_DifferentiableOpInterface>]> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_matmul", "", "in0, out0">.declaration;
  let summary = "(batched) matrix product with f32 accumulation";
  let description = [{
    `lhs` is `[batch..., M, K]` (`[batch..., K, M]` with `transpose_lhs`) and
    `rhs` is `[batch..., K, N]` (`[batch..., N, K]` with `transpose_rhs`);
    the result is `[batch..., M, N]`. Both operands have the same batch
    dimensions, or one of them is a plain matrix shared by every batch
    element (`nn.Linear` on a 3-D input). Operands share one element type;
    products accumulate in f32, and the result has the operands' element
    type or f32.

    ```mlir
    %y = memopt.matmul %x, %w transpose_rhs : tensor<2x8x64xf32>, tensor<256x64xf32> -> tensor<2x8x256xf32>
    ```
  }];
  let arguments = (ins Memopt_FloatTensor:$lhs, Memopt_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs Memopt_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`transpose_lhs` $transpose_lhs^)?
    (`transpose_rhs` $transpose_rhs^)? attr-dict `:`
    type($lhs) `,` type($rhs) `->` type($result)
  }];
}

def Memopt_Nf4MatmulOp : Memopt_Op<"nf4_matmul",
    [Pure, DeclareOpInterfaceMethods<Memopt_DifferentiableOpInterface>]> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_nf4_matmul">.declaration;
  let summary = "matrix product with an NF4-quantized frozen weight";
  let description = [{
    `memopt.matmul` of `lhs` (`[batch..., M, K]`) and a frozen weight stored
    in NF4 (docs/Quantization.md): `rhs` holds the packed bytes of a weight
    of shape `rhs_shape`, `[N, K]` with `transpose_rhs` (`nn.Linear`'s
    `x W^T`) and `[K, N]` without (its input gradient). The runtime
    dequantizes a chunk of the weight's columns at a time into a planned
    scratch buffer, rounded to `lhs`'s element type, and multiplies with f32
    accumulation: no dequantized copy of the whole weight exists. The result
    has `lhs`'s element type. Only `lhs` is differentiable.

    ```mlir
    %y = memopt.nf4_matmul %x, %w shape [256, 64] transpose_rhs : tensor<2x8x64xbf16>, tensor<8324xi8> -> tensor<2x8x256xbf16>
    ```
  }];
  let arguments = (ins Memopt_FloatTensor:$lhs, Memopt_PackedTensor:$rhs,
                       Memopt_Pair:$rhs_shape, UnitAttr:$transpose_rhs);
  let results = (outs Memopt_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `shape` $rhs_shape (`transpose_rhs` $transpose_rhs^)?
    attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
}

def Memopt_EmbeddingOp : Memopt_Op<"embedding",
    [Pure, DeclareOpInterfaceMethods<Memopt_DifferentiableOpInterface>]> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_embedding", "", "in0, in1">.declaration;
  let summary = "row lookup in an embedding table";
  let description = [{
    `result[i..., :] = weight[indices[i...], :]`, as `nn.Embedding`.
    `padding_idx`, a row of the table, leaves the lookup unchanged and keeps
    that row out of the gradient (`nn.Embedding(padding_idx=...)`): its row
    of `memopt.embedding_grad` is zero.

    ```mlir
    %e = memopt.embedding %wte, %ids : tensor<100x64xf32>, tensor<2x8xi64> -> tensor<2x8x64xf32>
    %p = memopt.embedding %wte, %ids padding_idx 0 : tensor<100x64xf32>, tensor<2x8xi64> -> tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins Memopt_FloatTensor:$weight,
                       Memopt_IndexTensor:$indices,
                       OptionalAttr<I64Attr>:$padding_idx);
  let results = (outs Memopt_FloatTensor:$result);
  let assemblyFormat = [{
    $weight `,` $indices (`padding_idx` $padding_idx^)? attr-dict `:`
    type($weight) `,` type($indices) `->` type($result)
  }];
}

def Memopt_EmbeddingGradOp : Memopt_Op<"embedding_grad",
    [Pure, DeclareOpInterfaceMethods<Memopt_DifferentiableOpInterface>]> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_embedding_grad", "", "in0, in1">.declaration;
  let summary = "gradient of an embedding lookup";
  let description = [{
    A zero table of the result's type into which each row of `grad` is added
    at the row its index names (repeated indices accumulate). Rows whose
    index is `padding_idx` are skipped, so that row of the result stays zero
    (PyTorch's `embedding_backward`). In a forward function it is a
    scatter-add (`torch.scatter_add` by constant indices); its VJP is the
    lookup of the result gradient's rows, `memopt.embedding`.
  }];
  let arguments = (ins Memopt_FloatTensor:$grad, Memopt_IndexTensor:$indices,
                       OptionalAttr<I64Attr>:$padding_idx);
  let results = (outs Memopt_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $indices (`padding_idx` $padding_idx^)? attr-dict `:`
    type($grad) `,` type($indices) `->` type($result)
  }];
}

class Memopt_ConvOpBase<string mnemonic, string firstName, string secondName,
                        list<Trait> traits = []>
    : Memopt_Op<mnemonic, !listconcat([Pure], traits)> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_" # mnemonic>.declaration;
  let arguments = !con(
      !dag(ins, [Memopt_FloatTensor, Memopt_FloatTensor],
           [firstName, secondName]),
      (ins DefaultValuedAttr<Memopt_Pair, "{1, 1}">:$strides,
      DefaultValuedAttr<Memopt_Pair, "{0, 0}">:$padding,
      DefaultValuedAttr<Memopt_Pair, "{1, 1}">:$dilations,
      DefaultValuedAttr<I64Attr, "1">:$groups));
  let results = (outs Memopt_FloatTensor:$result);
  let assemblyFormat = "$" # firstName # " `,` $" # secondName #
      " (`strides` $strides^)? (`padding` $padding^)?"
      " (`dilations` $dilations^)? (`groups` $groups^)? attr-dict `:`"
      " type($" # firstName # ") `,` type($" # secondName # ") `->`"
      " type($result)";
}

def Memopt_Conv2DOp : Memopt_ConvOpBase<"conv2d", "input", "filter",
                                        [DeclareOpInterfaceMethods<Memopt_DifferentiableOpInterface>]> {
  let summary = "2-D convolution (NCHW input, OIHW filter)";
  let description = [{
    As `F.conv2d` without bias: `input` is `[N, C, H, W]`, `filter` is
    `[O, C / groups, KH, KW]`, the result `[N, O, OH, OW]` with
    `OH = (H + 2 * padding[0] - dilations[0] * (KH - 1) - 1) / strides[0] + 1`.

    ```mlir
    %y = memopt.conv2d %x, %w padding [1, 1] : tensor<4x3x16x16xf32>, tensor<8x3x3x3xf32> -> tensor<4x8x16x16xf32>
    ```
  }];
}

def Memopt_Conv2DGradInputOp
    : Memopt_ConvOpBase<"conv2d_grad_input", "grad", "filter",
                        [DeclareOpInterfaceMethods<Memopt_DifferentiableOpInterface>]> {
  let summary = "gradient of conv2d with respect to its input";
  let description = [{
    The transposed convolution of the result gradient with the filter; the
    result type is the forward input's (it is not implied by the strides:
    PyTorch's `output_padding` picks a larger one). It is also
    `F.conv_transpose2d` of `grad` by `filter` (`[C_in, C_out / groups, kh,
    kw]`, PyTorch's layout), which is why it is differentiable: it is linear
    in both operands, its VJP a `conv2d` of the result gradient by the
    filter and a `conv2d_grad_filter` of `grad` and the result gradient.

    ```mlir
    %y = memopt.conv2d_grad_input %x, %w strides [2, 2] padding [1, 1] : tensor<1x8x4x4xf32>, tensor<8x3x3x3xf32> -> tensor<1x3x8x8xf32>
    ```
  }];
}

def Memopt_Conv2DGradFilterOp
    : Memopt_ConvOpBase<"conv2d_grad_filter", "grad", "input"> {
  let summary = "gradient of conv2d with respect to its filter";
  let description = [{
    The correlation of the forward input with the result gradient; the
    result type is the filter's.
  }];
}

class Memopt_PoolOpBase<string mnemonic, string summaryText>
    : Memopt_Op<mnemonic, [Pure, DeclareOpInterfaceMethods<Memopt_DifferentiableOpInterface>]> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_" # mnemonic>.declaration;
  let summary = summaryText;
  let arguments = (ins Memopt_FloatTensor:$input, Memopt_Pair:$kernel,
                       Memopt_Pair:$strides,
                       DefaultValuedAttr<Memopt_Pair, "{0, 0}">:$padding);
  let results = (outs Memopt_FloatTensor:$result);
  let assemblyFormat = [{
    $input `kernel` $kernel `strides` $strides (`padding` $padding^)?
    attr-dict `:` type($input) `to` type($result)
  }];
}

def Memopt_MaxPool2DOp : Memopt_PoolOpBase<"max_pool2d", "2-D max pooling"> {
  let description = [{
    As `F.max_pool2d` on `[N, C, H, W]` (no dilation, floor mode; padding
    counts as -inf): `OH = (H + 2 * padding[0] - kernel[0]) / strides[0] + 1`.

    ```mlir
    %p = memopt.max_pool2d %x kernel [2, 2] strides [2, 2] : tensor<4x8x16x16xf32> to tensor<4x8x8x8xf32>
    ```
  }];
}

def Memopt_AvgPool2DOp
    : Memopt_PoolOpBase<"avg_pool2d", "2-D average pooling"> {
  let description = [{
    As `F.avg_pool2d` on `[N, C, H, W]` (floor mode, padding counted in the
    divisor): output size as for `memopt.max_pool2d`.
  }];
}

def Memopt_MaxPool2DGradOp : Memopt_Op<"max_pool2d_grad", [Pure]> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_max_pool2d_grad">.declaration;
  let summary = "gradient of 2-D max pooling";
  let description = [{
    Routes each element of `grad` to the position of its window's maximum in
    `input` (the first one, in row-major order, on ties).
  }];
  let arguments = (ins Memopt_FloatTensor:$grad, Memopt_FloatTensor:$input,
                       Memopt_Pair:$kernel, Memopt_Pair:$strides,
                       DefaultValuedAttr<Memopt_Pair, "{0, 0}">:$padding);
  let results = (outs Memopt_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $input `kernel` $kernel `strides` $strides
    (`padding` $padding^)? attr-dict `:` type($grad) `,`
    custom<SameTypes>(type($input), type($result))
  }];
}

def Memopt_AvgPool2DGradOp : Memopt_Op<"avg_pool2d_grad", [Pure]> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_avg_pool2d_grad">.declaration;
  let summary = "gradient of 2-D average pooling";
  let description = [{
    Spreads each element of `grad` evenly over its window; the result type
    is the forward input's.
  }];
  let arguments = (ins Memopt_FloatTensor:$grad, Memopt_Pair:$kernel,
                       Memopt_Pair:$strides,
                       DefaultValuedAttr<Memopt_Pair, "{0, 0}">:$padding);
  let results = (outs Memopt_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `kernel` $kernel `strides` $strides (`padding` $padding^)?
    attr-dict `:` type($grad) `to` type($result)
  }];
}

//===----------------------------------------------------------------------===//
// Fused attention
//===----------------------------------------------------------------------===//

def Memopt_AttentionOp : Memopt_Op<"attention",
    [Pure, DeclareOpInterfaceMethods<Memopt_DifferentiableOpInterface>]> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_attention">.declaration;
  let summary = "scaled dot-product attention without the score matrix";
  let description = [{
    `softmax(mask(scale * q k^T)) v` with optional dropout on the
    probabilities, computed block by block (FlashAttention-2): the
    `[..., Sq, Sk]` scores, probabilities and dropout mask never exist. `q`
    is `[batch..., Sq, D]`, `k` `[batch..., Sk, D]`, `v` `[batch..., Sk,
    Dv]` with at most two batch dimensions (batch, heads); `out` is `[batch...,
    Sq, Dv]` and `lse` the f32 log-sum-exp of each query row's scores, which
    the backward reads to recompute the probabilities.

    A score is masked, i.e. replaced by `mask_value` (-inf by default), where
    `causal` is set and the key index exceeds the query index, or where the
    optional i1 `mask` (shape `[batch..., Sq, Sk]`, any dimension 1 to
    broadcast) is true, as `masked_fill` does. Dropout draws the mask
    `memopt.dropout` with the same `p`, `seed` and `stream` would draw on the
    probability tensor, so the fused op and the unfused ops it replaces
    agree element for element (`--memopt-fuse-kernels` forms it from them).

    ```mlir
    %o, %lse = memopt.attention %q, %k, %v scale 1.250000e-01 causal : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x16x8xf32>, tensor<2x4x16xf32>
    ```
  }];
  let arguments = (ins Memopt_FloatTensor:$q, Memopt_FloatTensor:$k,
      Memopt_FloatTensor:$v, Optional<Memopt_MaskTensor>:$mask,
      F64Attr:$scale, UnitAttr:$causal,
      DefaultValuedAttr<F64Attr, "-INFINITY">:$mask_value,
      DefaultValuedAttr<F64Attr, "0.0">:$dropout_p,
      DefaultValuedAttr<I64Attr, "0">:$seed,
      DefaultValuedAttr<I64Attr, "0">:$stream);
  let results = (outs Memopt_FloatTensor:$out, Memopt_F32Tensor:$lse);
  let assemblyFormat = [{
    $q `,` $k `,` $v (`mask` $mask^)? `scale` $scale (`causal` $causal^)?
    (`mask_value` $mask_value^)? (`dropout` $dropout_p^)? (`seed` $seed^)?
    (`stream` $stream^)? attr-dict `:` type($q) `,` type($k) `,` type($v)
    (`,` type($mask)^)? `->` type($out) `,` type($lse)
  }];
}

def Memopt_AttentionGradOp : Memopt_Op<"attention_grad", [Pure,
    AllTypesMatch<["q", "grad_q"]>, AllTypesMatch<["k", "grad_k"]>,
    AllTypesMatch<["v", "grad_v"]>, AllTypesMatch<["out", "grad_out"]>]> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_attention_grad">.declaration;
  let summary = "gradient of memopt.attention";
  let description = [{
    The gradients of `q`, `k` and `v` from the forward's operands and
    attributes, its `out` and `lse`, and the gradient of `out`. The scores
    are recomputed block by block from `q`, `k` and `lse`.
  }];
  let arguments = (ins Memopt_FloatTensor:$q, Memopt_FloatTensor:$k,
      Memopt_FloatTensor:$v, Memopt_FloatTensor:$out,
      Memopt_F32Tensor:$lse, Memopt_FloatTensor:$grad_out,
      Optional<Memopt_MaskTensor>:$mask, F64Attr:$scale, UnitAttr:$causal,
      DefaultValuedAttr<F64Attr, "-INFINITY">:$mask_value,
      DefaultValuedAttr<F64Attr, "0.0">:$dropout_p,
      DefaultValuedAttr<I64Attr, "0">:$seed,
      DefaultValuedAttr<I64Attr, "0">:$stream);
  let results = (outs Memopt_FloatTensor:$grad_q, Memopt_FloatTensor:$grad_k,
                      Memopt_FloatTensor:$grad_v);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $out `,` $lse `,` $grad_out (`mask` $mask^)?
    `scale` $scale (`causal` $causal^)? (`mask_value` $mask_value^)?
    (`dropout` $dropout_p^)? (`seed` $seed^)? (`stream` $stream^)? attr-dict
    `:` type($q) `,` type($k) `,` type($v) `,` type($out) `,` type($lse)
    (`,` type($mask)^)?
  }];
}

//===----------------------------------------------------------------------===//
// Randomness
//===----------------------------------------------------------------------===//

def Memopt_DropoutOp : Memopt_Op<"dropout",
    [Pure, Memopt_InPlaceOpInterface,
     DeclareOpInterfaceMethods<Memopt_DifferentiableOpInterface>]> {
  let summary = "counter-based dropout";
  let description = [{
    Zeroes each element with probability `p` and scales the others by
    `1 / (1 - p)`, as `F.dropout` in training mode. The mask is a pure
    function of (`seed`, `stream`, the training step, the element index)
    through a Philox-style counter-based generator: the same op at the same
    step draws the same mask wherever it runs, so a recomputed dropout
    reproduces its result bit for bit and the backward (dropout of the
    gradient with the same attributes) needs no saved mask. Each dropout in
    a model has its own `stream`.

    With `shared` k > 0, the elements that differ only in the last k
    dimensions share one mask bit, numbered by their position in the
    leading dimensions: k = rank - 1 is stochastic depth's row mode (one
    coin per example, `torchvision.ops.stochastic_depth`), k = 2 on
    `[N, C, H, W]` is `F.dropout2d` (one per channel), k = rank one coin
    for the whole tensor (stochastic depth's batch mode).

    ```mlir
    %d = memopt.dropout %x p 1.0e-01 seed 0 stream 3 : tensor<2x8x64xf32>
    %r = memopt.dropout %y p 2.0e-01 seed 0 stream 4 shared 3 : tensor<2x8x4x4xf32>
    ```
  }];
  let arguments = (ins Memopt_FloatTensor:$input, F64Attr:$p, I64Attr:$seed,
                       I64Attr:$stream,
                       DefaultValuedAttr<I64Attr, "0">:$shared);
  let results = (outs Memopt_FloatTensor:$result);
  let assemblyFormat = [{
    $input `p` $p `seed` $seed `stream` $stream (`shared` $shared^)?
    attr-dict `:` custom<SameTypes>(type($input), type($result))
  }];
  let extraClassDeclaration = Memopt_RuntimeCall<"memopt_dropout">.declaration # [{
    /// How many consecutive elements share one mask bit.
    int64_t getGroupSize();
  }];
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

def Memopt_CrossEntropyOp : Memopt_Op<"cross_entropy",
    [Pure, DeclareOpInterfaceMethods<Memopt_DifferentiableOpInterface>]> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_cross_entropy", "", "in0, in1">.declaration;
  let summary = "softmax cross-entropy with ignore_index and label smoothing";
  let description = [{
    `logits` is `[..., C]` and `labels` its leading dimensions. Items whose
    label equals `ignore_index` contribute nothing; `reduction<mean>` (the
    default) divides the sum by the number of the other items, as
    `F.cross_entropy`. Computed in f32; the loss is a 0-d f32 tensor.

    `label_smoothing` ε in [0, 1) is `F.cross_entropy`'s: an item's loss is
    `(1 - ε) (lse - logits[label]) + ε/C sum_c (lse - logits[c])`, the
    cross-entropy against `(1 - ε) onehot(label) + ε/C`; ignored items still
    contribute nothing, and the mean divides by the same count.

    ```mlir
    %l = memopt.cross_entropy %logits, %labels ignore_index -100 : tensor<16x100xf32>, tensor<16xi64>
    %s = memopt.cross_entropy %logits, %labels label_smoothing 1.000000e-01 : tensor<16x100xf32>, tensor<16xi64>
    ```
  }];
  let arguments = (ins Memopt_FloatTensor:$logits,
      Memopt_IndexTensor:$labels,
      DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
      DefaultValuedAttr<Memopt_LossReductionAttr,
                        "::memopt::LossReduction::Mean">:$reduction,
      DefaultValuedAttr<F64Attr, "0.0">:$label_smoothing);
  let results = (outs Memopt_F32Scalar:$loss);
  let assemblyFormat = [{
    $logits `,` $labels (`ignore_index` $ignore_index^)?
    (`reduction` `` $reduction^)? (`label_smoothing` $label_smoothing^)?
    attr-dict `:` type($logits) `,` type($labels)
  }];
}

def Memopt_CrossEntropyGradOp : Memopt_Op<"cross_entropy_grad", [Pure]> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_cross_entropy_grad", "", "in0, in1">.declaration;
  let summary = "gradient of cross-entropy with respect to the logits";
  let description = [{
    `grad * (softmax(logits) - (1 - ε) onehot(labels) - ε/C)` per item,
    with ε its `label_smoothing`, zero for ignored items, divided by the
    count of the others under `reduction<mean>`.
  }];
  let arguments = (ins Memopt_FloatTensor:$logits,
      Memopt_IndexTensor:$labels, Memopt_F32Scalar:$grad,
      DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
      DefaultValuedAttr<Memopt_LossReductionAttr,
                        "::memopt::LossReduction::Mean">:$reduction,
      DefaultValuedAttr<F64Attr, "0.0">:$label_smoothing);
  let results = (outs Memopt_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels `,` $grad (`ignore_index` $ignore_index^)?
    (`reduction` `` $reduction^)? (`label_smoothing` $label_smoothing^)?
    attr-dict `:` custom<SameTypes>(type($logits), type($result)) `,`
    type($labels)
  }];
}

def Memopt_LinearCrossEntropyOp : Memopt_Op<"linear_cross_entropy",
    [Pure, DeclareOpInterfaceMethods<Memopt_DifferentiableOpInterface>]> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_linear_cross_entropy", "", "in0, in1, in2">.declaration;
  let summary = "cross-entropy of a linear layer without its logits";
  let description = [{
    `cross_entropy(x w^T + bias, labels)` for `x` `[..., D]`, `w` `[C, D]`
    and an optional `bias` `[C]`, computed `chunk` classes at a time: no
    `[..., C]` logits tensor exists, only an f32 `[rows, chunk]` scratch
    buffer next to the kernel. `lse` is the f32 log-sum-exp of each item's
    logits, which the backward reads. `ignore_index` and `reduction` are
    those of `memopt.cross_entropy`. `--memopt-fuse-kernels` forms it from a
    matmul (plus bias) feeding a cross-entropy without label smoothing,
    choosing `chunk` from the memory account. The products run in `x`'s
    element type; `w` has it too or is f32 (a mixed-precision master weight,
    rounded to `x`'s type a chunk at a time, so that no low-precision copy of
    the whole weight exists).

    ```mlir
    %l, %lse = memopt.linear_cross_entropy %x, %w, %labels chunk 64 : tensor<16x32xf32>, tensor<100x32xf32>, tensor<16xi64> -> tensor<16xf32>
    ```
  }];
  let arguments = (ins Memopt_FloatTensor:$x, Memopt_FloatTensor:$w,
      Memopt_IndexTensor:$labels, Optional<Memopt_FloatTensor>:$bias,
      I64Attr:$chunk,
      DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
      DefaultValuedAttr<Memopt_LossReductionAttr,
                        "::memopt::LossReduction::Mean">:$reduction);
  let results = (outs Memopt_F32Scalar:$loss, Memopt_F32Tensor:$lse);
  let assemblyFormat = [{
    $x `,` $w `,` $labels (`bias` $bias^)? `chunk` $chunk
    (`ignore_index` $ignore_index^)? (`reduction` `` $reduction^)? attr-dict
    `:` type($x) `,` type($w) `,` type($labels) (`,` type($bias)^)? `->`
    type($lse)
  }];
}

def Memopt_LinearCrossEntropyGradOp
    : Memopt_Op<"linear_cross_entropy_grad", [Pure]> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_linear_cross_entropy_grad", "", "in0, in1, in2">.declaration;
  let summary = "gradient of memopt.linear_cross_entropy";
  let description = [{
    The gradients of `x`, `w` and (when there is one) `bias` from the
    forward's operands, its `lse` and the loss's incoming gradient `grad`,
    `chunk` classes at a time: each chunk's rows of the weight gradient are
    complete within the chunk; the gradient of `x` accumulates in f32.
    `grad_w` has `w`'s type: for an f32 `w` under a 16-bit `x`, the GEMM's
    f32 result unrounded.
  }];
  let arguments = (ins Memopt_FloatTensor:$x, Memopt_FloatTensor:$w,
      Memopt_IndexTensor:$labels, Memopt_F32Tensor:$lse,
      Memopt_F32Scalar:$grad, Optional<Memopt_FloatTensor>:$bias,
      I64Attr:$chunk,
      DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
      DefaultValuedAttr<Memopt_LossReductionAttr,
                        "::memopt::LossReduction::Mean">:$reduction);
  let results = (outs Memopt_FloatTensor:$grad_x, Memopt_FloatTensor:$grad_w,
                      Optional<Memopt_FloatTensor>:$grad_bias);
  let assemblyFormat = [{
    $x `,` $w `,` $labels `,` $lse `,` $grad (`bias` $bias^)? `chunk` $chunk
    (`ignore_index` $ignore_index^)? (`reduction` `` $reduction^)? attr-dict
    `:` type($x) `,` type($w) `,` type($labels) `,` type($lse)
    (`,` type($bias)^)? `->` type($grad_x) `,` type($grad_w)
    (`,` type($grad_bias)^)?
  }];
}

def Memopt_Nf4LinearCrossEntropyOp
    : Memopt_Op<"nf4_linear_cross_entropy",
                [Pure, DeclareOpInterfaceMethods<Memopt_DifferentiableOpInterface>]> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_nf4_linear_cross_entropy", "", "in0, in2">.declaration;
  let summary = "fused LM-head loss with an NF4-quantized frozen weight";
  let description = [{
    `memopt.linear_cross_entropy` whose weight is a frozen `[C, D]` matrix
    stored in NF4 (docs/Quantization.md): `w` holds the packed bytes of a
    weight of shape `w_shape`. Each chunk's rows of the weight are
    dequantized into the planned scratch, rounded to `x`'s element type, just
    before its product: no dequantized copy of the whole weight exists. Only
    `x` (and `bias`) are differentiable.

    ```mlir
    %l, %lse = memopt.nf4_linear_cross_entropy %x, %w shape [100, 32], %labels chunk 64 : tensor<16x32xf32>, tensor<1660xi8>, tensor<16xi64> -> tensor<16xf32>
    ```
  }];
  let arguments = (ins Memopt_FloatTensor:$x, Memopt_PackedTensor:$w,
      Memopt_Pair:$w_shape, Memopt_IndexTensor:$labels,
      Optional<Memopt_FloatTensor>:$bias, I64Attr:$chunk,
      DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
      DefaultValuedAttr<Memopt_LossReductionAttr,
                        "::memopt::LossReduction::Mean">:$reduction);
  let results = (outs Memopt_F32Scalar:$loss, Memopt_F32Tensor:$lse);
  let assemblyFormat = [{
    $x `,` $w `shape` $w_shape `,` $labels (`bias` $bias^)? `chunk` $chunk
    (`ignore_index` $ignore_index^)? (`reduction` `` $reduction^)? attr-dict
    `:` type($x) `,` type($w) `,` type($labels) (`,` type($bias)^)? `->`
    type($lse)
  }];
}

def Memopt_Nf4LinearCrossEntropyGradOp
    : Memopt_Op<"nf4_linear_cross_entropy_grad", [Pure]> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_nf4_linear_cross_entropy_grad", "", "in0, in2">.declaration;
  let summary = "gradient of memopt.nf4_linear_cross_entropy";
  let description = [{
    `memopt.linear_cross_entropy_grad` with the NF4 weight of the forward,
    which has no gradient: `grad_x` and, when there is a bias, `grad_bias`.
  }];
  let arguments = (ins Memopt_FloatTensor:$x, Memopt_PackedTensor:$w,
      Memopt_Pair:$w_shape, Memopt_IndexTensor:$labels, Memopt_F32Tensor:$lse,
      Memopt_F32Scalar:$grad, Optional<Memopt_FloatTensor>:$bias,
      I64Attr:$chunk,
      DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
      DefaultValuedAttr<Memopt_LossReductionAttr,
                        "::memopt::LossReduction::Mean">:$reduction);
  let results = (outs Memopt_FloatTensor:$grad_x,
                      Optional<Memopt_FloatTensor>:$grad_bias);
  let assemblyFormat = [{
    $x `,` $w `shape` $w_shape `,` $labels `,` $lse `,` $grad (`bias` $bias^)?
    `chunk` $chunk (`ignore_index` $ignore_index^)?
    (`reduction` `` $reduction^)? attr-dict `:` type($x) `,` type($w) `,`
    type($labels) `,` type($lse) (`,` type($bias)^)? `->` type($grad_x)
    (`,` type($grad_bias)^)?
  }];
}

def Memopt_LabelCountOp : Memopt_Op<"label_count", [Pure]> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_label_count">.declaration;
  let summary = "number of labels that are not ignored";
  let description = [{
    The number of elements of `labels` that differ from `ignore_index`, as
    an f32 scalar: the divisor of a `reduction<mean>` cross-entropy. Gradient
    accumulation (`--memopt-accumulate`) computes it once on the full batch
    to normalise every micro-batch's loss by the full batch's count.

    ```mlir
    %n = memopt.label_count %labels ignore_index -100 : tensor<4x16xi64>
    ```
  }];
  let arguments = (ins Memopt_IndexTensor:$labels,
      DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs Memopt_F32Scalar:$count);
  let assemblyFormat = [{
    $labels (`ignore_index` $ignore_index^)? attr-dict `:` type($labels)
  }];
}

def Memopt_MseLossOp : Memopt_Op<"mse_loss",
    [Pure, DeclareOpInterfaceMethods<Memopt_DifferentiableOpInterface>]> {
  let extraClassDeclaration = Memopt_RuntimeCall<"memopt_mse_loss">.declaration;
  let summary = "mean squared error";
  let description = [{
    `sum((input - target)^2)`, divided by the element count under
    `reduction<mean>` (the default), as `F.mse_loss`. Computed in f32.

    ```mlir
    %l = memopt.mse_loss %pred, %target : tensor<8x4xf32>
    ```
  }];
  let arguments = (ins Memopt_FloatTensor:$input, Memopt_FloatTensor:$target,
      DefaultValuedAttr<Memopt_LossReductionAttr,
                        "::memopt::LossReduction::Mean">:$reduction);
  let results = (outs Memopt_F32Scalar:$loss);
  let assemblyFormat = [{
    $input `,` $target (`reduction` `` $reduction^)? attr-dict `:`
    custom<SameTypes>(type($input), type($target))
  }];
}

def Memopt_MseLossGradOp : Memopt_Op<"mse_loss_grad", [Pure]> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_mse_loss_grad">.declaration;
  let summary = "gradient of the mean squared error";
  let description = [{
    `grad * 2 * (input - target)`, divided by the element count under
    `reduction<mean>`.
  }];
  let arguments = (ins Memopt_FloatTensor:$input, Memopt_FloatTensor:$target,
      Memopt_F32Scalar:$grad,
      DefaultValuedAttr<Memopt_LossReductionAttr,
                        "::memopt::LossReduction::Mean">:$reduction);
  let results = (outs Memopt_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $target `,` $grad (`reduction` `` $reduction^)? attr-dict `:`
    custom<SameTypes>(type($input), type($target), type($result))
  }];
}

//===----------------------------------------------------------------------===//
// Optimizer updates
//===----------------------------------------------------------------------===//

def Memopt_SgdUpdateOp : Memopt_Op<"sgd_update",
    [Pure, DeclareOpInterfaceMethods<Memopt_InPlaceOpInterface,
                                    ["mayWriteResultOver"]>]> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_sgd_update">.declaration;
  let summary = "SGD with momentum and weight decay";
  let description = [{
    As `torch.optim.SGD` (no dampening, not Nesterov):
    `g' = grad + weight_decay * param`, `buf' = momentum * buf + g'`,
    `param' = param - lr * buf'`. With `skip_if` true, every output equals
    its input (an update skipped after a gradient overflow).

    ```mlir
    %p2, %b2 = memopt.sgd_update %p, %g, %b lr 1.0e-02 momentum 9.0e-01 weight_decay 0.0 : tensor<64x32xf32>
    ```
  }];
  let arguments = (ins Memopt_FloatTensor:$param, Memopt_FloatTensor:$grad,
                       Memopt_FloatTensor:$momentum_buffer,
                       Optional<Memopt_I1Scalar>:$skip, F64Attr:$lr,
                       F64Attr:$momentum, F64Attr:$weight_decay);
  let results = (outs Memopt_FloatTensor:$new_param,
                      Memopt_FloatTensor:$new_momentum_buffer);
  let assemblyFormat = [{
    $param `,` $grad `,` $momentum_buffer (`skip_if` $skip^)?
    `lr` $lr `momentum` $momentum `weight_decay` $weight_decay attr-dict `:`
    custom<SameTypes>(type($param), type($grad), type($momentum_buffer),
                      type($new_param), type($new_momentum_buffer))
  }];
}

def Memopt_AdamWUpdateOp : Memopt_Op<"adamw_update",
    [Pure, DeclareOpInterfaceMethods<Memopt_InPlaceOpInterface,
                                    ["mayWriteResultOver"]>]> {
  let summary = "AdamW with bias correction and decoupled weight decay";
  let description = [{
    As `torch.optim.AdamW`, with `step` the 1-based count of this update:
    `param *= 1 - lr * weight_decay`; `m' = beta1 * m + (1 - beta1) * grad`;
    `v' = beta2 * v + (1 - beta2) * grad^2`;
    `param' = param - lr / (1 - beta1^step) * m' /
    (sqrt(v') / sqrt(1 - beta2^step) + eps)`. With `skip_if` true, every
    output equals its input.

    The moments have the parameter's type, or are 8-bit: each a 1-D `i8`
    tensor of the packed bytes of the runtime's QuantizeMath.h (one code
    per element, then one f32 absmax per block of 256), dequantized, updated
    in f32 and quantized block by block; the type after `state` says so.

    ```mlir
    %p2, %m2, %v2 = memopt.adamw_update %p, %g, %m, %v step %t lr 1.0e-03 betas(9.0e-01, 9.990000e-01) eps 1.0e-08 weight_decay 1.0e-02 : tensor<64x32xf32>
    %p3, %m3, %v3 = memopt.adamw_update %q, %h, %qm, %qv step %t lr 1.0e-03 betas(9.0e-01, 9.990000e-01) eps 1.0e-08 weight_decay 1.0e-02 : tensor<64x64xf32> state tensor<4128xi8>
    ```
  }];
  let arguments = (ins Memopt_FloatTensor:$param, Memopt_FloatTensor:$grad,
                       Memopt_StateTensor:$exp_avg,
                       Memopt_StateTensor:$exp_avg_sq,
                       Memopt_I64Scalar:$step,
                       Optional<Memopt_I1Scalar>:$skip, F64Attr:$lr,
                       F64Attr:$beta1, F64Attr:$beta2, F64Attr:$eps,
                       F64Attr:$weight_decay);
  let results = (outs Memopt_FloatTensor:$new_param,
                      Memopt_StateTensor:$new_exp_avg,
                      Memopt_StateTensor:$new_exp_avg_sq);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq `step` $step
    (`skip_if` $skip^)? `lr` $lr `betas` `(` $beta1 `,` $beta2 `)`
    `eps` $eps `weight_decay` $weight_decay attr-dict `:`
    custom<ParamAndStateTypes>(type($param), type($grad), type($new_param),
                               type($exp_avg), type($exp_avg_sq),
                               type($new_exp_avg), type($new_exp_avg_sq))
  }];
  let extraClassDeclaration = Memopt_RuntimeCall<"memopt_adamw_update">.declaration # [{
    /// Whether the moments are stored in 8 bits.
    bool hasQuantizedState() {
      return getExpAvg().getType().getElementType().isInteger(8);
    }
  }];
}

def Memopt_ScaleByOp : Memopt_Op<"scale_by",
    [Pure, DeclareOpInterfaceMethods<Memopt_InPlaceOpInterface,
                                    ["mayWriteResultOver"]>]> {
  let extraClassDeclaration = Memopt_RuntimeCall<"memopt_scale_by">.declaration;
  let summary = "multiply a tensor by a scalar computed in the step";
  let description = [{
    `input * factor` for each element, in f32, with `factor` a 0-d f32
    tensor that the step computes (gradient clipping's coefficient: the
    in-place multiply of `torch.nn.utils.clip_grad_norm_`). The result may
    be written over the input.

    ```mlir
    %c = memopt.scale_by %g, %coef : tensor<64x32xf32>
    ```
  }];
  let arguments = (ins Memopt_FloatTensor:$input, Memopt_F32Scalar:$factor);
  let results = (outs Memopt_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $factor attr-dict `:`
    custom<SameTypes>(type($input), type($result))
  }];
}

def Memopt_TransferOp : Memopt_Op<"transfer", [Pure, SameOperandsAndResultType]> {
  let summary = "copy a tensor between device memory and host memory";
  let description = [{
    The same tensor in the other memory: `to host` copies a value that the
    device computed into host memory, for an op that runs on the host
    (`memopt.on_host`), `to device` copies a value that the host computed
    back. `--memopt-offload-optimizer` inserts them (docs/Offload.md); the
    runtime's `memopt_transfer` copies the bytes.

    ```mlir
    %h = memopt.transfer %g to host : tensor<64x32xf32>
    ```
  }];
  let arguments = (ins Memopt_BytesTensor:$input, Memopt_MemoryKindAttr:$to);
  let results = (outs Memopt_BytesTensor:$result);
  let assemblyFormat = "$input `to` `` $to attr-dict `:` type($input)";
  let hasVerifier = 0;
}

def Memopt_IncrementOp : Memopt_Op<"increment",
    [Pure, Memopt_InPlaceOpInterface]> {
  let summary = "advance the optimizer's step counter";
  let description = [{
    `step + 1`, or `step` unchanged when `skip_if` is true (a skipped
    update does not count, as with GradScaler).

    ```mlir
    %t1 = memopt.increment %t0 skip_if %found_inf
    ```
  }];
  let arguments = (ins Memopt_I64Scalar:$step,
                       Optional<Memopt_I1Scalar>:$skip);
  let results = (outs Memopt_I64Scalar:$result);
  let assemblyFormat = "$step (`skip_if` $skip^)? attr-dict";
  let hasVerifier = 0;
}

//===----------------------------------------------------------------------===//
// Loss scaling
//===----------------------------------------------------------------------===//

def Memopt_ScaleLossOp : Memopt_Op<"scale_loss",
    [Pure, Memopt_InPlaceOpInterface]> {
  let summary = "multiply the loss by the loss scale";
  let description = [{
    `loss * scale`: the value the backward pass starts from when loss
    scaling is on.

    ```mlir
    %ls = memopt.scale_loss %loss, %scale
    ```
  }];
  let arguments = (ins Memopt_F32Scalar:$loss, Memopt_F32Scalar:$scale);
  let results = (outs Memopt_F32Scalar:$result);
  let assemblyFormat = "$loss `,` $scale attr-dict";
  let hasVerifier = 0;
}

def Memopt_UnscaleOp : Memopt_Op<"unscale",
    [Pure, DeclareOpInterfaceMethods<InferTypeOpInterface>,
     DeclareOpInterfaceMethods<Memopt_InPlaceOpInterface,
                               ["mayWriteResultOver"]>]> {
  let extraClassDeclaration =
      Memopt_RuntimeCall<"memopt_unscale", "", "ins1">.declaration;
  let summary = "unscale gradients and check that all are finite";
  let description = [{
    Multiplies every gradient by `1 / scale` and returns them with
    `found_inf`, true when any element of any of them is infinite or NaN
    (GradScaler's unscale and all-finite check in one pass over the data).

    ```mlir
    %g1, %g2, %found_inf = memopt.unscale %scale, %d1, %d2 : tensor<64x32xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Memopt_F32Scalar:$scale,
                       Variadic<Memopt_FloatTensor>:$grads);
  let results = (outs Variadic<Memopt_FloatTensor>:$results,
                      Memopt_I1Scalar:$found_inf);
  let assemblyFormat = "$scale `,` $grads attr-dict `:` type($grads)";
}

def Memopt_UpdateScaleOp : Memopt_Op<"update_scale",
    [Pure, DeclareOpInterfaceMethods<Memopt_InPlaceOpInterface,
                                    ["mayWriteResultOver"]>]> {
  let summary = "dynamic loss-scale update";
  let description = [{
    GradScaler's update: on overflow, `scale * backoff` and the growth
    tracker resets to 0; otherwise the tracker counts one more good step, and
    when it reaches `interval` the scale grows by `growth` and the tracker
    resets.

    ```mlir
    %s2, %n2 = memopt.update_scale %s, %n, %found_inf growth 2.0 backoff 5.0e-01 interval 2000
    ```
  }];
  let arguments = (ins Memopt_F32Scalar:$scale,
                       Memopt_I64Scalar:$growth_tracker,
                       Memopt_I1Scalar:$found_inf, F64Attr:$growth_factor,
                       F64Attr:$backoff_factor, I64Attr:$growth_interval);
  let results = (outs Memopt_F32Scalar:$new_scale,
                      Memopt_I64Scalar:$new_growth_tracker);
  let assemblyFormat = [{
    $scale `,` $growth_tracker `,` $found_inf `growth` $growth_factor
    `backoff` $backoff_factor `interval` $growth_interval attr-dict
  }];
}

//===----------------------------------------------------------------------===//
// Buffers
//===----------------------------------------------------------------------===//

def Memopt_KernelOp : Memopt_Op<"kernel", [AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "one tensor op on buffers, in destination-passing style";
  let description = [{
    The bufferized form of the tensor op named by `kernel`: it reads the
    buffers `ins` (that op's operands, in order), writes the buffers `outs`
    (one per result, in order) and carries that op's attributes in `with`.
    An output may be an input's buffer (an in-place update). Code generation
    turns each kernel into one runtime call (docs/Pipeline.md).

    ```mlir
    memopt.kernel "memopt.matmul" ins(%x, %w : memref<4x8xf32>, memref<3x8xf32>) outs(%h : memref<4x3xf32>) with {transpose_rhs}
    ```
  }];
  let arguments = (ins StrAttr:$kernel, Variadic<AnyStaticShapeMemRef>:$ins,
                       Variadic<AnyStaticShapeMemRef>:$outs,
                       DictionaryAttr:$op_attributes);
  let assemblyFormat = [{
    $kernel (`ins` `(` $ins^ `:` type($ins) `)`)?
    `outs` `(` $outs `:` type($outs) `)` `with` $op_attributes attr-dict
  }];
}

def Memopt_TransferWaitOp : Memopt_Op<"transfer_wait"> {
  let summary = "wait for an asynchronous copy between the memories";
  let description = [{
    The end of the copy that the `memopt.transfer` kernel with the same
    `slot` started (`--memopt-overlap-transfers`): ops after it may read
    `target` and write over `source`; the ops between the two run while the
    bytes move. It reads both buffers, so each stays live until the copy is
    complete. With `host`, the host waits too: a host kernel that follows
    may read `target` or reuse host memory that the copy read. The
    runtime's `memopt_transfer_wait`.

    ```mlir
    memopt.transfer_wait %h, %d slot 0 : memref<8x16xf32>, memref<8x16xf32>
    ```
  }];
  let arguments = (ins Arg<AnyStaticShapeMemRef, "", [MemRead]>:$source,
                       Arg<AnyStaticShapeMemRef, "", [MemRead, MemWrite]>:$target,
                       I64Attr:$slot, UnitAttr:$host);
  let assemblyFormat = [{
    $source `,` $target `slot` $slot (`host` $host^)? attr-dict `:`
    type($source) `,` type($target)
  }];
  let hasVerifier = 1;
}

#endif // MEMOPT_DIALECT_MEMOPT_IR_MEMOPTOPS_TD
