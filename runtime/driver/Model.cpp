//===- Model.cpp - the model description embedded in a program -----------===//
//
// The JSON that memopt-compile writes (OUT/model.json) and embeds in a
// program (model_info.cpp): each argument's role, dtype, shape, shard and
// bounds, and how the step was compiled. Written and read here, from one set
// of structs (ModelDescription.h); read in full and checked before a run
// uses any of it.
//
//===----------------------------------------------------------------------===//

#include "ModelDescription.h"

#include "memopt/runtime.h"
#include "memopt/runtime/QuantizeMath.h"

#include <nlohmann/json.hpp>

#include <limits>
#include <set>

using namespace memopt::driver;

namespace {

/// Reads a JSON array of non-negative integer extents into `shape`; false
/// when it is not one.
bool parseExtents(const nlohmann::json &json, std::vector<int64_t> &shape) {
  if (!json.is_array())
    return false;
  for (const nlohmann::json &dim : json) {
    if (!dim.is_number_unsigned() ||
        dim.get<uint64_t>() >
            static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return false;
    shape.push_back(static_cast<int64_t>(dim.get<uint64_t>()));
  }
  return true;
}

/// Sets `value` to the number `object` holds under `key`, if it holds one
/// (the recorded hyper-parameters: their defaults stand otherwise).
void readNumber(const nlohmann::json &object, const char *key, double &value) {
  auto found = object.find(key);
  if (found != object.end() && found->is_number())
    value = found->get<double>();
}

/// Parses one argument object of the model description.
bool parseArgument(const nlohmann::json &json, size_t index,
                   ModelArgument &argument, std::string &error) {
  std::string where = "argument " + std::to_string(index);
  if (!json.is_object()) {
    error = where + " is not an object";
    return false;
  }
  auto field = [&](const char *key) -> const nlohmann::json * {
    auto it = json.find(key);
    return it == json.end() ? nullptr : &*it;
  };
  const nlohmann::json *name = field("name");
  if (!name || !name->is_string() || name->get<std::string>().empty()) {
    error = where + " has no name";
    return false;
  }
  argument.name = name->get<std::string>();
  where += " ('" + argument.name + "')";
  const nlohmann::json *role = field("role");
  if (!role || !role->is_string() ||
      !parseRole(role->get<std::string>(), argument.role)) {
    error = where + " has no valid role";
    return false;
  }
  const nlohmann::json *dtype = field("dtype");
  if (!dtype || !dtype->is_string() ||
      !parseModelDtype(dtype->get<std::string>(), argument.dtype)) {
    error = where + " has no valid dtype";
    return false;
  }
  const nlohmann::json *shape = field("shape");
  if (!shape || !shape->is_array()) {
    error = where + " has no shape";
    return false;
  }
  if (!parseExtents(*shape, argument.shape)) {
    error = where + " has a negative or non-integer dimension";
    return false;
  }
  uint64_t numElements = 0;
  uint64_t elementBytes = getDtypeSize(argument.dtype);
  if (!getNumElements(argument.shape, elementBytes, numElements) ||
      numElements * elementBytes > kMaxArenaBytes) {
    error = where + " is too large";
    return false;
  }
  argument.byteSize = argument.wholeByteSize = numElements * elementBytes;
  if (const nlohmann::json *batchDim = field("batch_dim")) {
    if (!batchDim->is_number_unsigned() ||
        batchDim->get<uint64_t>() >= argument.shape.size() ||
        (argument.role != Role::Input && argument.role != Role::Label)) {
      error = where + " has an invalid batch_dim";
      return false;
    }
    argument.batchDim = static_cast<int64_t>(batchDim->get<uint64_t>());
  }
  bool integer =
      argument.dtype == TensorDtype::I64 || argument.dtype == TensorDtype::I32;
  if (const nlohmann::json *bound = field("bound")) {
    if (!bound->is_number_unsigned() ||
        bound->get<uint64_t>() >
            static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        !integer ||
        (argument.role != Role::Input && argument.role != Role::Label)) {
      error = where + " has an invalid bound";
      return false;
    }
    argument.bound = static_cast<int64_t>(bound->get<uint64_t>());
  }
  if (const nlohmann::json *ignore = field("ignore_index")) {
    if (!ignore->is_number_integer() || !argument.bound ||
        (ignore->is_number_unsigned() &&
         ignore->get<uint64_t>() >
             static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))) {
      error = where + " has an invalid ignore_index";
      return false;
    }
    argument.ignoreIndex = ignore->get<int64_t>();
  }
  if (const nlohmann::json *packed = field("nf4_of")) {
    std::vector<int64_t> dims;
    uint64_t elements = 0;
    if (!parseExtents(*packed, dims) || argument.role != Role::Frozen ||
        argument.dtype != TensorDtype::U8 || argument.shape.size() != 1 ||
        !getNumElements(dims, 1, elements) || elements == 0 ||
        memopt_nf4_packed_bytes(static_cast<int64_t>(elements)) !=
            argument.byteSize) {
      error = where + " has an invalid nf4_of";
      return false;
    }
    argument.nf4Of = std::move(dims);
  }
  if (const nlohmann::json *memory = field("memory")) {
    if (!memory->is_string() || (memory->get<std::string>() != "host" &&
                                 memory->get<std::string>() != "device")) {
      error = where + " has an invalid memory (expected \"host\" or "
                      "\"device\")";
      return false;
    }
    argument.host = memory->get<std::string>() == "host";
  }
  if (const nlohmann::json *full = field("shard_of")) {
    std::vector<int64_t> dims;
    uint64_t fullElements = 0;
    if (!parseExtents(*full, dims) || argument.shape.size() != 1 ||
        !getNumElements(dims, elementBytes, fullElements)) {
      error = where + " has an invalid shard_of";
      return false;
    }
    argument.shardOf = std::move(dims);
    argument.wholeByteSize = fullElements * elementBytes;
  }
  return true;
}
} // namespace

//===----------------------------------------------------------------------===//
// Model description
//===----------------------------------------------------------------------===//

namespace {
constexpr std::pair<const char *, Role> kRoles[] = {
    {"param", Role::Param}, {"frozen", Role::Frozen},
    {"input", Role::Input}, {"label", Role::Label},
    {"state", Role::State}, {"optim", Role::Optim},
    {"loss", Role::Loss},   {"param_copy", Role::ParamCopy}};

constexpr std::pair<const char *, TensorDtype> kDtypes[] = {
    {"f32", TensorDtype::F32},   {"f16", TensorDtype::F16},
    {"bf16", TensorDtype::BF16}, {"i64", TensorDtype::I64},
    {"i32", TensorDtype::I32},   {"i1", TensorDtype::Bool},
    {"u8", TensorDtype::U8}};

/// The entry of `table` spelled `name`.
template <typename T, size_t N>
bool lookup(const std::pair<const char *, T> (&table)[N],
            const std::string &name, T &value) {
  for (const auto &[spelling, entry] : table) {
    if (name == spelling) {
      value = entry;
      return true;
    }
  }
  return false;
}

/// The spelling of `value` in `table`.
template <typename T, size_t N>
const char *spell(const std::pair<const char *, T> (&table)[N], T value) {
  for (const auto &[spelling, entry] : table)
    if (entry == value)
      return spelling;
  return "";
}
} // namespace

bool memopt::driver::parseRole(const std::string &name, Role &role) {
  return lookup(kRoles, name, role);
}

const char *memopt::driver::getRoleName(Role role) {
  return spell(kRoles, role);
}

bool memopt::driver::parseModelDtype(const std::string &name,
                                     TensorDtype &dtype) {
  return lookup(kDtypes, name, dtype);
}

const char *memopt::driver::getModelDtypeName(TensorDtype dtype) {
  return spell(kDtypes, dtype);
}

bool memopt::driver::parseModelDescription(const std::string &json,
                                           ModelDescription &model,
                                           std::string &error) {
  model = ModelDescription();
  try {
    nlohmann::json root = nlohmann::json::parse(json);
    if (!root.is_object()) {
      error = "not a JSON object";
      return false;
    }
    auto arena = root.find("arena_bytes");
    if (arena == root.end() || !arena->is_number_unsigned() ||
        arena->get<uint64_t>() > kMaxArenaBytes) {
      error = "'arena_bytes' is not a non-negative integer below 2^62";
      return false;
    }
    model.arenaBytes = arena->get<uint64_t>();
    if (auto host = root.find("host_arena_bytes"); host != root.end()) {
      if (!host->is_number_unsigned() ||
          host->get<uint64_t>() > kMaxArenaBytes) {
        error = "'host_arena_bytes' is not a non-negative integer below 2^62";
        return false;
      }
      model.hostArenaBytes = host->get<uint64_t>();
    }
    auto arguments = root.find("arguments");
    if (arguments == root.end() || !arguments->is_array()) {
      error = "'arguments' is not an array";
      return false;
    }
    std::set<std::string> names;
    bool hasLoss = false;
    for (size_t i = 0; i < arguments->size(); ++i) {
      ModelArgument argument;
      if (!parseArgument((*arguments)[i], i, argument, error))
        return false;
      // A copy has the name of its master.
      std::string key =
          (argument.role == Role::ParamCopy ? "copy:" : "") + argument.name;
      if (!names.insert(key).second) {
        error = "argument name '" + argument.name + "' appears twice";
        return false;
      }
      if (argument.role == Role::Loss) {
        if (hasLoss) {
          error = "more than one loss argument";
          return false;
        }
        if (argument.dtype != TensorDtype::F32 || !argument.shape.empty()) {
          error =
              "the loss argument '" + argument.name + "' is not an f32 scalar";
          return false;
        }
        hasLoss = true;
        model.lossIndex = model.arguments.size();
      }
      model.arguments.push_back(std::move(argument));
    }
    if (!hasLoss) {
      error = "no argument has role 'loss'";
      return false;
    }
    for (size_t i = 0; i < model.arguments.size(); ++i) {
      const ModelArgument &argument = model.arguments[i];
      bool scalar = argument.role == Role::Optim && argument.shape.empty();
      if (argument.name == "optimizer.step" && scalar &&
          argument.dtype == TensorDtype::I64)
        model.stepIndex = i;
      if (argument.name == "optimizer.loss_scale" && scalar &&
          argument.dtype == TensorDtype::F32)
        model.lossScaleIndex = i;
      if (argument.name == "optimizer.grad_norm" && scalar &&
          argument.dtype == TensorDtype::F32)
        model.gradNormIndex = i;
    }
    auto lossScale = root.find("loss_scale");
    if (lossScale != root.end()) {
      auto mode = lossScale->find("mode");
      auto scale = lossScale->find("scale");
      if (!lossScale->is_object() || mode == lossScale->end() ||
          !mode->is_string() ||
          (*mode != "dynamic" && *mode != "static") ||
          scale == lossScale->end() || !scale->is_number() ||
          !(scale->get<double>() > 0)) {
        error = "'loss_scale' needs mode \"dynamic\" or \"static\" and a "
                "positive scale";
        return false;
      }
      LossScaleDescription description;
      description.dynamic = *mode == "dynamic";
      description.scale = scale->get<double>();
      readNumber(*lossScale, "growth_factor", description.growthFactor);
      readNumber(*lossScale, "backoff_factor", description.backoffFactor);
      auto interval = lossScale->find("growth_interval");
      if (interval != lossScale->end() && interval->is_number_integer())
        description.growthInterval = interval->get<int64_t>();
      if (description.dynamic && !model.lossScaleIndex) {
        error = "a dynamic 'loss_scale' needs the f32 scalar optim argument "
                "'optimizer.loss_scale'";
        return false;
      }
      model.lossScale = description;
    }
    if (!model.lossScale)
      model.lossScaleIndex.reset();
    auto optimizer = root.find("optimizer");
    if (optimizer != root.end() && optimizer->is_object()) {
      OptimizerDescription &description = model.optimizer;
      auto kind = optimizer->find("kind");
      if (kind != optimizer->end()) {
        if (!kind->is_string() || (*kind != "adamw" && *kind != "sgd")) {
          error = "'optimizer' has a kind other than \"adamw\" or \"sgd\"";
          return false;
        }
        description.kind = kind->get<std::string>();
      }
      readNumber(*optimizer, "lr", description.lr);
      readNumber(*optimizer, "eps", description.eps);
      readNumber(*optimizer, "momentum", description.momentum);
      readNumber(*optimizer, "weight_decay", description.weightDecay);
      auto betas = optimizer->find("betas");
      if (betas != optimizer->end() && betas->is_array() &&
          betas->size() == 2 && (*betas)[0].is_number() &&
          (*betas)[1].is_number()) {
        description.beta1 = (*betas)[0].get<double>();
        description.beta2 = (*betas)[1].get<double>();
      }
    }
    auto precision = root.find("mixed_precision");
    if (precision != root.end()) {
      if (!precision->is_string() ||
          (*precision != "bf16" && *precision != "fp16")) {
        error = "'mixed_precision' is not \"bf16\" or \"fp16\"";
        return false;
      }
      model.mixedPrecision = precision->get<std::string>();
    }
    auto schedule = root.find("lr_schedule");
    if (schedule != root.end()) {
      std::optional<memopt::runtime::LrScheduleKind> kind;
      auto field = [&](const char *name) {
        auto found = schedule->is_object() ? schedule->find(name)
                                           : schedule->end();
        return found == schedule->end() ? nullptr : &*found;
      };
      const nlohmann::json *kindName = field("kind");
      const nlohmann::json *warmup = field("warmup_steps");
      const nlohmann::json *decay = field("decay_steps");
      const nlohmann::json *ratio = field("min_lr_ratio");
      if (kindName && kindName->is_string())
        kind = memopt::runtime::parseLrScheduleKind(
            kindName->get<std::string>());
      if (!kind || !warmup || !warmup->is_number_integer() || !decay ||
          !decay->is_number_integer() || !ratio || !ratio->is_number()) {
        error = "'lr_schedule' needs a kind (constant, linear, cosine or "
                "nanogpt), integer warmup_steps and decay_steps and a "
                "min_lr_ratio";
        return false;
      }
      model.lrSchedule = {*kind, warmup->get<int64_t>(),
                          decay->get<int64_t>(), ratio->get<double>()};
      std::string why = memopt::runtime::checkLrSchedule(model.lrSchedule);
      if (!why.empty()) {
        error = "invalid 'lr_schedule': " + why;
        return false;
      }
      if (!model.stepIndex) {
        error = "an 'lr_schedule' needs the i64 scalar optim argument "
                "'optimizer.step'";
        return false;
      }
    }
    auto ranks = root.find("data_parallel");
    if (ranks != root.end()) {
      if (!ranks->is_number_unsigned() || ranks->get<uint64_t>() < 1 ||
          ranks->get<uint64_t>() > (1u << 20)) {
        error = "'data_parallel' is not a rank count";
        return false;
      }
      model.dataParallel = static_cast<int64_t>(ranks->get<uint64_t>());
    }
    auto evalStep = root.find("eval_step");
    if (evalStep != root.end()) {
      auto evalArena = evalStep->is_object() ? evalStep->find("arena_bytes")
                                             : evalStep->end();
      auto evalArguments = evalStep->is_object()
                               ? evalStep->find("arguments")
                               : evalStep->end();
      if (evalArena == evalStep->end() || !evalArena->is_number_unsigned() ||
          evalArena->get<uint64_t>() > kMaxArenaBytes ||
          evalArguments == evalStep->end() || !evalArguments->is_array()) {
        error = "'eval_step' needs 'arena_bytes' below 2^62 and an "
                "'arguments' array";
        return false;
      }
      EvalDescription eval;
      eval.arenaBytes = evalArena->get<uint64_t>();
      size_t losses = 0;
      std::set<std::string> evalNames;
      for (size_t i = 0; i < evalArguments->size(); ++i) {
        ModelArgument argument;
        if (!parseArgument((*evalArguments)[i], i, argument, error)) {
          error = "'eval_step': " + error;
          return false;
        }
        if (!evalNames.insert(argument.name).second) {
          error = "'eval_step': argument name '" + argument.name +
                  "' appears twice";
          return false;
        }
        if (argument.role == Role::Loss &&
            (argument.dtype != TensorDtype::F32 || !argument.shape.empty())) {
          error = "'eval_step': the loss argument is not an f32 scalar";
          return false;
        }
        losses += argument.role == Role::Loss;
        eval.arguments.push_back(std::move(argument));
      }
      if (losses != 1) {
        error = "'eval_step' needs exactly one loss argument";
        return false;
      }
      model.eval = std::move(eval);
    }
    // A copy's master is the sharded f32 param of its name and shape.
    for (size_t i = 0; i < model.arguments.size(); ++i) {
      const ModelArgument &copy = model.arguments[i];
      if (copy.role != Role::ParamCopy)
        continue;
      auto master = std::find_if(model.arguments.begin(), model.arguments.end(),
                                 [&](const ModelArgument &argument) {
                                   return argument.role == Role::Param &&
                                          argument.name == copy.name;
                                 });
      // ZeRO's whole low-precision copy of a sharded master, or
      // offload's copy of a host master in the master's layout: on the
      // device, or (--offload=params) a low-precision one on the host.
      bool low =
          copy.dtype == TensorDtype::F16 || copy.dtype == TensorDtype::BF16;
      bool valid = master != model.arguments.end() &&
                   master->dtype == TensorDtype::F32 &&
                   ((low && master->shardOf == copy.shape && !copy.shardOf) ||
                    ((low || (copy.dtype == TensorDtype::F32 && !copy.host)) &&
                     master->host && master->shape == copy.shape &&
                     master->shardOf == copy.shardOf));
      if (!valid) {
        error = "argument '" + copy.name +
                "' (param_copy) is not the f16 or bf16 copy of a sharded f32 "
                "param of its name and shape, nor the copy of a host one "
                "(optimizer offload)";
        return false;
      }
      master->copyIndex = i;
    }
    // A shard holds ceil(n / ranks) elements of an n-element tensor, rounded
    // up to a whole block when the parameter has 8-bit moments (their
    // shards are whole blocks; a block's record is 4 + B bytes).
    for (const ModelArgument &argument : model.arguments) {
      if (!argument.shardOf)
        continue;
      uint64_t full =
          argument.wholeByteSize / getDtypeSize(argument.dtype);
      uint64_t ranks = static_cast<uint64_t>(model.dataParallel);
      uint64_t shard = static_cast<uint64_t>(argument.shape[0]);
      uint64_t least = ranks ? (full + ranks - 1) / ranks : 0;
      uint64_t granule = runtime::kQuantRecordBytes;
      if (ranks < 2 || shard < least || shard >= least + granule) {
        error = "argument '" + argument.name + "' is a shard of " +
                std::to_string(full) + " elements, which " +
                std::to_string(argument.shape[0]) + " elements on each of " +
                std::to_string(ranks) + " rank(s) do not cut evenly";
        return false;
      }
    }
  } catch (const std::exception &e) {
    error = e.what();
    return false;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

namespace {
using OrderedJson = nlohmann::ordered_json;

/// `json` on one line (invalid UTF-8 in a name replaced, never thrown).
std::string dumpLine(const OrderedJson &json) {
  return json.dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
}

OrderedJson toJson(const ModelArgument &argument) {
  OrderedJson json;
  json["name"] = argument.name;
  json["role"] = getRoleName(argument.role);
  json["dtype"] = getModelDtypeName(argument.dtype);
  json["shape"] = argument.shape;
  if (argument.bound)
    json["bound"] = *argument.bound;
  if (argument.ignoreIndex)
    json["ignore_index"] = *argument.ignoreIndex;
  if (argument.batchDim)
    json["batch_dim"] = *argument.batchDim;
  if (argument.nf4Of)
    json["nf4_of"] = *argument.nf4Of;
  if (argument.shardOf)
    json["shard_of"] = *argument.shardOf;
  if (argument.host)
    json["memory"] = "host";
  return json;
}

/// The "arguments" array, one argument per line after `indent`.
std::string writeArguments(const std::vector<ModelArgument> &arguments,
                           const std::string &indent) {
  std::string text = "[";
  for (size_t i = 0; i < arguments.size(); ++i)
    text += (i ? ",\n" : "\n") + indent + dumpLine(toJson(arguments[i]));
  return text + "\n" + indent.substr(2) + "]";
}
} // namespace

std::string
memopt::driver::writeModelDescription(const ModelDescription &model) {
  std::string text =
      "{\n  \"arena_bytes\": " + std::to_string(model.arenaBytes);
  if (model.hostArenaBytes)
    text +=
        ",\n  \"host_arena_bytes\": " + std::to_string(model.hostArenaBytes);
  auto field = [&](const char *key, const OrderedJson &value) {
    text += std::string(",\n  \"") + key + "\": " + dumpLine(value);
  };
  const OptimizerDescription &optimizer = model.optimizer;
  OrderedJson json;
  json["kind"] = optimizer.kind;
  json["lr"] = optimizer.lr;
  if (optimizer.kind == "adamw") {
    json["betas"] = {optimizer.beta1, optimizer.beta2};
    json["eps"] = optimizer.eps;
  } else {
    json["momentum"] = optimizer.momentum;
  }
  json["weight_decay"] = optimizer.weightDecay;
  field("optimizer", json);
  if (!model.lrSchedule.isConstant())
    field("lr_schedule",
          {{"kind", runtime::getLrScheduleKindName(model.lrSchedule.kind)},
           {"warmup_steps", model.lrSchedule.warmupSteps},
           {"decay_steps", model.lrSchedule.decaySteps},
           {"min_lr_ratio", model.lrSchedule.minRatio}});
  if (model.dataParallel > 1)
    field("data_parallel", model.dataParallel);
  if (!model.mixedPrecision.empty())
    field("mixed_precision", model.mixedPrecision);
  if (const std::optional<LossScaleDescription> &scale = model.lossScale) {
    json = OrderedJson();
    json["mode"] = scale->dynamic ? "dynamic" : "static";
    json["scale"] = scale->scale;
    if (scale->dynamic) {
      json["growth_factor"] = scale->growthFactor;
      json["backoff_factor"] = scale->backoffFactor;
      json["growth_interval"] = scale->growthInterval;
    }
    field("loss_scale", json);
  }
  text += ",\n  \"arguments\": " + writeArguments(model.arguments, "    ");
  if (model.eval)
    text += ",\n  \"eval_step\": {\n    \"arena_bytes\": " +
            std::to_string(model.eval->arenaBytes) +
            ",\n    \"arguments\": " +
            writeArguments(model.eval->arguments, "      ") + "\n  }";
  return text + "\n}\n";
}
