//===- MemoptAttrs.td - memopt attributes ------------------*- tablegen -*-===//
//
// Enumerations used as op attributes. Each prints as `keyword<value>` inside
// an op's custom assembly, e.g. `memopt.gelu %x approximate<tanh>`.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_IR_MEMOPTATTRS_TD
#define MEMOPT_DIALECT_MEMOPT_IR_MEMOPTATTRS_TD

include "memopt/Dialect/Memopt/IR/MemoptDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Memopt_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "how gelu evaluates the Gaussian CDF", [
      I32EnumAttrCase<"None", 0, "none">,
      I32EnumAttrCase<"Tanh", 1, "tanh">
    ]> {
  let cppNamespace = "::memopt";
  let genSpecializedAttr = 0;
}

def Memopt_GeluApproximationAttr : EnumAttr<Memopt_Dialect,
    Memopt_GeluApproximation, "approximate"> {
  let assemblyFormat = "`<` $value `>`";
}

def Memopt_LossReduction : I32EnumAttr<"LossReduction",
    "how a loss combines its per-item terms", [
      I32EnumAttrCase<"Mean", 0, "mean">,
      I32EnumAttrCase<"Sum", 1, "sum">
    ]> {
  let cppNamespace = "::memopt";
  let genSpecializedAttr = 0;
}

def Memopt_LossReductionAttr : EnumAttr<Memopt_Dialect,
    Memopt_LossReduction, "reduction"> {
  let assemblyFormat = "`<` $value `>`";
}

def Memopt_ComparePredicate : I32EnumAttr<"ComparePredicate",
    "the relation an elementwise comparison tests", [
      I32EnumAttrCase<"Eq", 0, "eq">,
      I32EnumAttrCase<"Ne", 1, "ne">,
      I32EnumAttrCase<"Lt", 2, "lt">,
      I32EnumAttrCase<"Le", 3, "le">,
      I32EnumAttrCase<"Gt", 4, "gt">,
      I32EnumAttrCase<"Ge", 5, "ge">
    ]> {
  let cppNamespace = "::memopt";
  let genSpecializedAttr = 0;
}

def Memopt_ComparePredicateAttr : EnumAttr<Memopt_Dialect,
    Memopt_ComparePredicate, "predicate">;


// Where a buffer lives and an op runs (optimizer offload, docs/Offload.md).
def Memopt_MemoryKind : I32EnumAttr<"MemoryKind",
    "the memory a buffer lives in", [
      I32EnumAttrCase<"Device", 0, "device">,
      I32EnumAttrCase<"Host", 1, "host">
    ]> {
  let cppNamespace = "::memopt";
  let genSpecializedAttr = 0;
}

def Memopt_MemoryKindAttr : EnumAttr<Memopt_Dialect,
    Memopt_MemoryKind, "memory"> {
  let assemblyFormat = "$value";
}

#endif // MEMOPT_DIALECT_MEMOPT_IR_MEMOPTATTRS_TD
