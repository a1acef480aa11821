//===- Explore.h - printing the budget search ---------------------*- C++ -*-===//
//
// memopt-compile's output of the budget search (memopt/Pipelines/
// BudgetSearch.h): the --explore table, its JSON, and the error of an
// infeasible budget.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_TOOLS_MEMOPT_COMPILE_EXPLORE_H
#define MEMOPT_TOOLS_MEMOPT_COMPILE_EXPLORE_H

#include "memopt/Pipelines/BudgetSearch.h"

#include <string>

namespace llvm {
class raw_ostream;
} // namespace llvm

namespace memopt {

/// Prints the budget, the table of combinations (the chosen one marked
/// `*`) and the explanation.
void printExploreTable(llvm::raw_ostream &os, const ExploreResult &result,
                       const ExploreOptions &options);

/// The same as JSON (docs/Budget.md, "The JSON").
std::string renderExploreJson(const ExploreResult &result,
                              const ExploreOptions &options);

/// The error of an infeasible budget: the smallest peak reached, by which
/// combination, and what would close the gap, with the bytes of each.
void printInfeasible(llvm::raw_ostream &os, const ExploreResult &result,
                     const ExploreOptions &options);

} // namespace memopt

#endif // MEMOPT_TOOLS_MEMOPT_COMPILE_EXPLORE_H
