//===- ModelState.cpp - memory account of the model state -----------------===//
//
// Counts the bytes of the state a training step keeps alive across steps.
// For AdamW in f32 this is the well-known 16 bytes per parameter: 4 for the
// weight, 4 for its gradient and 8 for the two moments.
//
//===----------------------------------------------------------------------===//

#include "memopt/Support/ByteSize.h"
#include "memopt/Support/ModelState.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

using namespace memopt;

std::optional<OptimizerKind> memopt::parseOptimizerKind(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<OptimizerKind>>(name)
      .Case("adamw", OptimizerKind::AdamW)
      .Case("sgd", OptimizerKind::Sgd)
      .Default(std::nullopt);
}

int64_t MemoryPool::totalBytes() const {
  int64_t total = 0;
  for (const auto &[dtype, bytes] : bytesByDtype)
    total += bytes;
  return total;
}

int64_t ModelStateAccount::totalBytes() const {
  int64_t total = 0;
  for (const MemoryPool &pool : pools)
    total += pool.totalBytes();
  return total;
}

ModelStateAccount
memopt::computeModelStateAccount(const std::vector<StateTensor> &params,
                                 const std::vector<StateTensor> &buffers,
                                 OptimizerKind optimizer) {
  ModelStateAccount account;
  account.optimizer = optimizer;
  MemoryPool weights{"weights", {}}, frozen{"frozen weights", {}},
      masters{"master weights", {}},
      gradients{"gradients", {}}, optimizerState{"optimizer state", {}},
      bufferPool{"buffers", {}};
  int64_t moments = optimizer == OptimizerKind::AdamW ? 2 : 1;
  for (const StateTensor &param : params) {
    int64_t bytes = param.numElements * param.elementBytes;
    if (param.frozen) {
      account.numFrozenParameters += param.numElements;
      ++account.numFrozenTensors;
      frozen.bytesByDtype[param.dtype] += bytes;
      continue;
    }
    account.numParameters += param.numElements;
    ++account.numParameterTensors;
    if (param.copyElementBytes > 0) {
      weights.bytesByDtype[param.copyDtype] +=
          param.numElements * param.copyElementBytes;
      masters.bytesByDtype[param.dtype] += bytes;
    } else {
      weights.bytesByDtype[param.dtype] += bytes;
    }
    gradients.bytesByDtype[param.dtype] += bytes;
    optimizerState.bytesByDtype[param.dtype] += moments * bytes;
  }
  if (optimizer == OptimizerKind::AdamW && account.numParameterTensors > 0)
    optimizerState.bytesByDtype["i64"] += 8; // the step counter
  for (const StateTensor &buffer : buffers)
    bufferPool.bytesByDtype[buffer.dtype] +=
        buffer.numElements * buffer.elementBytes;
  account.pools = {weights};
  if (!frozen.bytesByDtype.empty())
    account.pools.push_back(frozen);
  if (!masters.bytesByDtype.empty())
    account.pools.push_back(masters);
  account.pools.insert(account.pools.end(),
                       {gradients, optimizerState, bufferPool});
  return account;
}

void memopt::printModelStateAccount(llvm::raw_ostream &os,
                                    const ModelStateAccount &account) {
  os << "  parameters       " << account.numParameters << " in "
     << account.numParameterTensors << " tensors\n";
  if (account.numFrozenTensors > 0)
    os << "  frozen           " << account.numFrozenParameters << " in "
       << account.numFrozenTensors << " tensors\n";
  auto printRow = [&](llvm::StringRef name, int64_t bytes,
                      const std::map<std::string, int64_t> &byDtype) {
    os << "  " << llvm::left_justify(name, 16) << " "
       << llvm::right_justify(std::to_string(bytes), 14) << " B  "
       << llvm::left_justify("(" + formatBytes(bytes) + ")", 14);
    llvm::ListSeparator sep(", ");
    for (const auto &[dtype, dtypeBytes] : byDtype)
      os << sep << dtype << " " << dtypeBytes << " B";
    os << "\n";
  };
  for (const MemoryPool &pool : account.pools)
    printRow(pool.name, pool.totalBytes(), pool.bytesByDtype);
  printRow("total", account.totalBytes(), {});
  if (account.numParameters > 0) {
    // Per trained parameter: not the buffers, not the frozen weights.
    int64_t trained = 0;
    bool withMasters = false;
    for (const MemoryPool &pool : account.pools) {
      if (pool.name == "buffers" || pool.name == "frozen weights")
        continue;
      trained += pool.totalBytes();
      withMasters |= pool.name == "master weights";
    }
    os << "  per parameter    "
       << llvm::format("%.2f", static_cast<double>(trained) /
                                   account.numParameters)
       << " B (weights, " << (withMasters ? "master weights, " : "")
       << "gradients and optimizer state)\n";
  }
}
