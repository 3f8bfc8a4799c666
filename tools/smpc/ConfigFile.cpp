//===- ConfigFile.cpp - smpc --config FILE: SageMaker-style keys ----------===//
//
// Each key of the file becomes "items": a flag it sets (tokens for the
// command line) or a flag value it rules out (ddp: false rules out --dp > 1
// only through --dp 1; fp16: false rules out --precision fp16). Items of
// different keys, and items and the command line's flags, must agree; the
// surviving tokens go in front of the command line's own, so smpc checks
// them exactly as it checks flags.
//
//===----------------------------------------------------------------------===//

#include "ConfigFile.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>

namespace {

/// List: a comma-separated value, as a string or a list of strings.
enum class Kind { Switch, Value, List, Repeated, Dims };

/// Every smpc flag a config file may set by its own name.
const std::pair<const char *, Kind> kFlags[] = {
    {"--target", Kind::Value},
    {"--batch-size", Kind::Value},
    {"--dim", Kind::Dims},
    {"--tie", Kind::Repeated},
    {"--untie", Kind::Repeated},
    {"--no-padding-row", Kind::Repeated},
    {"--trainable", Kind::Repeated},
    {"--no-raise", Kind::Switch},
    {"--no-fuse-attention", Kind::Switch},
    {"--no-dropout", Kind::Switch},
    {"--without-export-metadata", Kind::Switch},
    {"--seed", Kind::Value},
    {"--no-pad-vocab", Kind::Switch},
    {"--no-gelu-epilogue", Kind::Switch},
    {"--dgelu-epilogue", Kind::Switch},
    {"--no-bias-grad-epilogue", Kind::Switch},
    {"--no-residual-epilogue", Kind::Switch},
    {"--no-fuse-loss-grad", Kind::Switch},
    {"--sequence-parallel", Kind::Switch},
    {"--no-sequence-parallel", Kind::Switch},
    {"--train", Kind::Switch},
    {"--loss", Kind::Value},
    {"--optimizer", Kind::Value},
    {"--lr", Kind::Value},
    {"--lr-schedule", Kind::Value},
    {"--warmup-steps", Kind::Value},
    {"--decay-steps", Kind::Value},
    {"--eval-every", Kind::Value},
    {"--eval-delay", Kind::Value},
    {"--eval-on-start", Kind::Switch},
    {"--shift-labels", Kind::Switch},
    {"--eval-accuracy", Kind::Switch},
    {"--eval-batch-size", Kind::Value},
    {"--eval-metrics", Kind::List},
    {"--eval-predictions", Kind::Switch},
    {"--eval-logits", Kind::Switch},
    {"--warmup-type", Kind::Value},
    {"--warmup-min-lr", Kind::Value},
    {"--warmup-min-ratio", Kind::Value},
    {"--cos-min-ratio", Kind::Value},
    {"--momentum", Kind::Value},
    {"--dampening", Kind::Value},
    {"--nesterov", Kind::Switch},
    {"--weight-decay", Kind::Value},
    {"--beta1", Kind::Value},
    {"--beta2", Kind::Value},
    {"--eps", Kind::Value},
    {"--clip-grad-norm", Kind::Value},
    {"--freeze", Kind::Value},
    {"--no-decay", Kind::Value},
    {"--hf-no-decay", Kind::Switch},
    {"--precision", Kind::Value},
    {"--master-weights", Kind::Value},
    {"--loss-scale", Kind::Value},
    {"--loss-scale-window", Kind::Value},
    {"--loss-scale-hysteresis", Kind::Value},
    {"--consecutive-hysteresis", Kind::Switch},
    {"--min-loss-scale", Kind::Value},
    {"--loss-scaler", Kind::Value},
    {"--devices", Kind::Value},
    {"--dp", Kind::Value},
    {"--tp", Kind::Value},
    {"--pp", Kind::Value},
    {"--pp-cuts", Kind::Value},
    {"--microbatches", Kind::Value},
    {"--schedule", Kind::Value},
    {"--virtual-stages", Kind::Value},
    {"--placement", Kind::Value},
    {"--checkpoint-activations", Kind::Value},
    {"--offload-activations", Kind::Switch},
    {"--activation-loading-horizon", Kind::Value},
    {"--bucket-mb", Kind::Value},
    {"--shard-optimizer-state", Kind::Switch},
    {"--no-shard-optimizer-state", Kind::Switch},
    {"--zero-stage", Kind::Value},
    {"--gather-prefetch", Kind::Value},
    {"--sharded-dp", Kind::Value},
    {"--profile-db", Kind::Value},
    {"--cluster", Kind::Value},
    {"--global-batch", Kind::Value},
    {"--microbatch-size", Kind::Value},
    {"--max-plans", Kind::Value},
    {"--optimize", Kind::Value},
    {"--no-memory-plan", Kind::Switch},
    {"--json", Kind::Value},
    {"--report", Kind::Value},
};

/// SageMaker model-parallel v1 keys (docs/python.md has the table).
const char *kSageMakerKeys[] = {"pipeline_parallel_degree",
                                "partitions",
                                "tensor_parallel_degree",
                                "microbatches",
                                "pipeline",
                                "placement_strategy",
                                "ddp",
                                "shard_optimizer_state",
                                "optimize",
                                "auto_partition",
                                "offload_activations",
                                "activation_loading_horizon",
                                "fp16",
                                "bf16",
                                "prescaled_batch",
                                "sharded_data_parallel_degree"};

/// SageMaker keys with no smp counterpart: refused by name.
const char *kUnsupportedSageMakerKeys[] = {"horovod",
                                           "memory_weight",
                                           "active_microbatches",
                                           "skip_tracing",
                                           "tensor_parallel_seed",
                                           "delayed_parameter_initialization",
                                           "fp32_grad_accumulation",
                                           "predefined_hooks",
                                           "contiguous",
                                           "ddp_port",
                                           "ddp_dist_backend",
                                           "default_partition",
                                           "load_partition",
                                           "sdp_reduce_bucket_size",
                                           "sdp_param_persistence_threshold",
                                           "sdp_max_live_parameters",
                                           "sdp_hierarchical_allgather",
                                           "sdp_gradient_clipping"};

std::optional<Kind> flagKind(llvm::StringRef flag) {
  for (const auto &[name, kind] : kFlags)
    if (flag == name)
      return kind;
  return std::nullopt;
}

using Item = ConfigItem;

llvm::Error error(llvm::StringRef origin, const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 origin + ": " + msg);
}

/// A number or a string as a flag's text (integers without a fraction).
std::optional<std::string> scalarText(const llvm::json::Value &v) {
  if (auto s = v.getAsString())
    return s->str();
  if (auto i = v.getAsInteger())
    return std::to_string(*i);
  if (auto d = v.getAsNumber())
    return shortestNumber(*d);
  return std::nullopt;
}

/// Flag values compare as numbers when both are numbers.
bool sameValue(llvm::StringRef a, llvm::StringRef b) {
  if (a == b)
    return true;
  double x, y;
  return !a.getAsDouble(x) && !b.getAsDouble(y) && x == y;
}

/// The known key closest to `key`, if one is close.
std::string closestKey(llvm::StringRef key) {
  std::vector<std::string> names(std::begin(kSageMakerKeys),
                                 std::end(kSageMakerKeys));
  for (const auto &f : kFlags) {
    std::string n = llvm::StringRef(f.first).drop_front(2).str();
    names.push_back(n);
    std::replace(n.begin(), n.end(), '-', '_');
    names.push_back(n);
  }
  std::string best;
  unsigned bestDistance = std::max<unsigned>(2, key.size() / 3) + 1;
  for (const std::string &n : names) {
    unsigned d = key.edit_distance(n, true, bestDistance);
    if (d < bestDistance)
      bestDistance = d, best = n;
  }
  return best;
}

/// The items of a SageMaker key; nullopt when `key` is not one.
std::optional<llvm::Expected<std::vector<Item>>>
sageMakerItems(llvm::StringRef key, const llvm::json::Value &v,
               llvm::StringRef origin) {
  if (!llvm::is_contained(kSageMakerKeys, key))
    return std::nullopt;
  std::string shown = shownValue(v);
  auto item = [&](const char *flag, std::string value = "",
                  bool present = true) {
    return Item{key.str(), shown, flag, std::move(value), present};
  };
  auto bad = [&](const char *expects) -> llvm::Expected<std::vector<Item>> {
    return error(origin,
                 "\"" + key + "\" expects " + expects + ", got " + shown);
  };
  auto positive = [&]() -> std::optional<std::string> {
    auto i = v.getAsInteger();
    if (!i || *i < 1)
      return std::nullopt;
    return std::to_string(*i);
  };
  if (key == "sharded_data_parallel_degree") {
    // SageMaker's sharded data parallelism (MiCS): 1 (its default) is off.
    auto n = positive();
    if (!n)
      return bad("a positive integer (1: off)");
    if (*n == "1")
      return std::vector<Item>{item("--sharded-dp", "", false)};
    return std::vector<Item>{item("--sharded-dp", *n)};
  }
  auto flag = v.getAsBoolean();
  if (key == "pipeline_parallel_degree" || key == "partitions" ||
      key == "tensor_parallel_degree" || key == "microbatches" ||
      key == "activation_loading_horizon") {
    auto n = positive();
    if (!n)
      return bad("a positive integer");
    const char *f = key == "tensor_parallel_degree" ? "--tp"
                    : key == "microbatches"         ? "--microbatches"
                    : key == "activation_loading_horizon"
                        ? "--activation-loading-horizon"
                        : "--pp";
    return std::vector<Item>{item(f, *n)};
  }
  if (key == "pipeline") {
    // SageMaker's "interleaved" interleaves forward and backward passes of
    // micro-batches (1F1B); "simple" runs every forward first (GPipe).
    auto s = v.getAsString();
    if (s && *s == "interleaved")
      return std::vector<Item>{item("--schedule", "1f1b")};
    if (s && *s == "simple")
      return std::vector<Item>{item("--schedule", "gpipe")};
    return bad("\"interleaved\" (1F1B) or \"simple\" (GPipe)");
  }
  if (key == "placement_strategy" || key == "optimize") {
    auto s = v.getAsString();
    if (!s || s->empty())
      return bad(key == "optimize" ? "\"speed\" or \"memory\""
                                   : "\"cluster\", \"spread\" or an order "
                                     "of D, P and T");
    return std::vector<Item>{
        item(key == "optimize" ? "--optimize" : "--placement", s->str())};
  }
  if (!flag)
    return bad("true or false");
  if (key == "ddp")
    // Data parallelism takes the devices the other degrees leave; without
    // it there is none.
    return *flag ? std::vector<Item>{} : std::vector<Item>{item("--dp", "1")};
  if (key == "shard_optimizer_state")
    return std::vector<Item>{
        item(*flag ? "--shard-optimizer-state" : "--no-shard-optimizer-state"),
        item(*flag ? "--no-shard-optimizer-state" : "--shard-optimizer-state",
             "", false)};
  if (key == "auto_partition")
    // false: the stages start where pp_cuts says (checked by the caller).
    return *flag ? std::vector<Item>{item("--pp-cuts", "", false)}
                 : std::vector<Item>{};
  if (key == "offload_activations")
    return std::vector<Item>{item("--offload-activations", "", *flag)};
  if (key == "fp16" || key == "bf16") {
    std::string p = key.str();
    return std::vector<Item>{item("--precision", p, *flag)};
  }
  // prescaled_batch.
  if (*flag)
    return error(origin,
                 "\"prescaled_batch\": true (each tensor-parallel rank is "
                 "fed a batch already scaled for its group) is not how smp "
                 "reads data: --batch-size is the global batch, smprun gives "
                 "each data-parallel rank its share and every tensor-parallel "
                 "rank the same samples; remove the key");
  return std::vector<Item>{};
}

/// The items of one key of the file.
llvm::Expected<std::vector<Item>> keyItems(llvm::StringRef key,
                                           const llvm::json::Value &v,
                                           llvm::StringRef origin) {
  if (auto items = sageMakerItems(key, v, origin))
    return std::move(*items);
  if (llvm::is_contained(kUnsupportedSageMakerKeys, key))
    return error(origin, "\"" + key +
                             "\" is a SageMaker model-parallel key smp has "
                             "no counterpart for (docs/python.md lists the "
                             "keys it reads)");
  std::string flag = "--" + key.str();
  std::replace(flag.begin(), flag.end(), '_', '-');
  if (llvm::StringRef(key).starts_with("-"))
    flag = key.str();
  auto kind = flagKind(flag);
  if (!kind) {
    std::string near = closestKey(key);
    return error(origin,
                 "unknown key \"" + key + "\"" +
                     (near.empty() ? std::string(" (see docs/python.md)")
                                   : "; did you mean \"" + near + "\"?"));
  }
  std::string shown = shownValue(v);
  auto bad = [&](const char *expects) -> llvm::Expected<std::vector<Item>> {
    return error(origin, "\"" + key + "\" (" + flag + ") expects " + expects +
                             ", got " + shown);
  };
  std::vector<Item> items;
  switch (*kind) {
  case Kind::Switch:
    if (!v.getAsBoolean())
      return bad("true or false");
    items.push_back(Item{key.str(), shown, flag, "", *v.getAsBoolean()});
    break;
  case Kind::Value: {
    auto text = scalarText(v);
    if (!text)
      return bad("a number or a string");
    items.push_back(Item{key.str(), shown, flag, *text});
    break;
  }
  case Kind::List: {
    std::string joined;
    if (auto s = v.getAsString())
      joined = s->str();
    else if (auto *a = v.getAsArray())
      for (const auto &e : *a) {
        auto s = e.getAsString();
        if (!s)
          return bad("a string or a list of strings");
        joined += (joined.empty() ? "" : ",") + s->str();
      }
    else
      return bad("a string or a list of strings");
    items.push_back(Item{key.str(), shown, flag, joined});
    break;
  }
  case Kind::Repeated:
  case Kind::Dims: {
    std::vector<std::string> values;
    if (auto *o = v.getAsObject(); o && *kind == Kind::Dims) {
      for (const auto &[name, n] : *o) {
        auto i = n.getAsInteger();
        if (!i)
          return bad("{\"NAME\": VALUE, ...} with integer values");
        values.push_back(name.str() + "=" + std::to_string(*i));
      }
    } else if (auto *a = v.getAsArray()) {
      for (const auto &e : *a) {
        auto s = e.getAsString();
        if (!s)
          return bad("a list of strings");
        values.push_back(s->str());
      }
    } else if (auto s = v.getAsString()) {
      values.push_back(s->str());
    } else {
      return bad(*kind == Kind::Dims ? "{\"NAME\": VALUE, ...}"
                                     : "a string or a list of strings");
    }
    for (std::string &value : values)
      items.push_back(Item{key.str(), shown, flag, value});
    break;
  }
  }
  return items;
}

/// "\"key\": value" as written in the file.
std::string describe(const Item &item) {
  return "\"" + item.key + "\": " + item.shown;
}

} // namespace

std::string shortestNumber(double v) {
  char buf[64];
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof(buf), "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v)
      break;
  }
  return buf;
}

llvm::Expected<std::vector<std::string>>
configFileFlags(llvm::StringRef text, llvm::StringRef origin,
                const std::vector<std::string> &commandLine) {
  auto parsed = parseJsonObject(text, origin,
                                "a JSON object of keys (SageMaker "
                                "model-parallel parameters or smpc flag "
                                "names)");
  if (!parsed)
    return parsed.takeError();
  const llvm::json::Object *object = parsed->getAsObject();
  // Keys in the file's order is not kept by llvm::json; sort for stable
  // messages.
  std::vector<std::string> keys;
  for (const auto &kv : *object)
    keys.push_back(kv.first.str());
  llvm::sort(keys);
  std::vector<Item> items;
  for (const std::string &key : keys) {
    if (key == "config")
      return error(origin, "\"config\" cannot name another config file");
    auto more = keyItems(key, *object->get(key), origin);
    if (!more)
      return more.takeError();
    items.insert(items.end(), more->begin(), more->end());
  }
  auto tokens = configItemTokens(items, origin, commandLine);
  if (!tokens)
    return tokens.takeError();
  auto cli = commandLineFlags(commandLine);
  if (object->getBoolean("auto_partition") == false &&
      !cli.count("--pp-cuts") && !llvm::is_contained(*tokens, "--pp-cuts"))
    return error(origin, "\"auto_partition\": false needs the stage "
                         "boundaries: give \"pp_cuts\": \"A,B,...\" (the ONNX "
                         "node names at which stages 1, 2, ... start) or "
                         "--pp-cuts");
  return tokens;
}

std::multimap<std::string, std::string>
commandLineFlags(const std::vector<std::string> &args) {
  std::multimap<std::string, std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    llvm::StringRef a = args[i];
    if (!a.starts_with("--"))
      continue;
    auto [flag, value] = a.split('=');
    auto kind = flagKind(flag);
    if (!kind || *kind == Kind::Switch || a.contains('=')) {
      out.emplace(flag.str(), value.str());
      continue;
    }
    out.emplace(flag.str(), i + 1 < args.size() ? args[++i] : "");
  }
  return out;
}

std::optional<int64_t>
flagInt(const std::multimap<std::string, std::string> &cli,
        llvm::StringRef flag) {
  auto it = cli.find(flag.str());
  int64_t n;
  if (it == cli.end() || llvm::StringRef(it->second).getAsInteger(10, n))
    return std::nullopt;
  return n;
}

std::optional<int64_t>
dataParallelDegree(const std::multimap<std::string, std::string> &cli,
                   std::optional<int64_t> tp, bool microbatchesPinned,
                   bool &given) {
  given = true;
  if (auto dp = flagInt(cli, "--dp"))
    return dp;
  if (!tp)
    tp = flagInt(cli, "--tp");
  std::optional<int64_t> pp = flagInt(cli, "--pp");
  auto devices = flagInt(cli, "--devices");
  if (!devices || *devices <= 1) {
    given = devices.has_value();
    return 1;
  }
  if (!tp && !pp && !microbatchesPinned && !cli.count("--microbatches"))
    return std::nullopt; // the planner chooses
  int64_t group = tp.value_or(1) * pp.value_or(1);
  if (group < 1 || *devices % group)
    return std::nullopt; // smpc refuses the degrees itself
  return *devices / group;
}

llvm::Expected<std::vector<std::string>>
configItemTokens(const std::vector<ConfigItem> &items, llvm::StringRef origin,
                 const std::vector<std::string> &commandLine,
                 llvm::StringRef where) {
  // Keys that disagree with each other.
  for (size_t i = 0; i < items.size(); ++i)
    for (size_t j = i + 1; j < items.size(); ++j) {
      const Item &a = items[i], &b = items[j];
      if (a.flag != b.flag || a.key == b.key)
        continue;
      auto kind = flagKind(a.flag);
      if (kind == Kind::Repeated || kind == Kind::Dims)
        continue;
      bool clash =
          a.present && b.present
              ? !sameValue(a.value, b.value)
              : a.present != b.present && ((a.present ? b : a).value.empty() ||
                                           sameValue(a.value, b.value));
      if (clash)
        return error(origin, describe(a) + " and " + describe(b) +
                                 " contradict each other");
    }
  // Against the command line: a clash is refused; a flag given there with
  // the same value is not given twice.
  auto cli = commandLineFlags(commandLine);
  std::vector<std::string> tokens;
  for (const Item &item : items) {
    auto [lo, hi] = cli.equal_range(item.flag);
    bool onCommandLine = lo != hi;
    for (auto it = lo; it != hi; ++it) {
      bool clash = item.present ? !sameValue(item.value, it->second) &&
                                      flagKind(item.flag) != Kind::Repeated &&
                                      flagKind(item.flag) != Kind::Dims
                                : item.value.empty() ||
                                      sameValue(item.value, it->second);
      if (clash)
        return error(origin, describe(item) + " contradicts " + item.flag +
                                 (it->second.empty() ? "" : " " + it->second) +
                                 " " + where);
    }
    if (!item.present)
      continue;
    auto kind = flagKind(item.flag);
    if (onCommandLine && kind != Kind::Repeated && kind != Kind::Dims)
      continue; // the same value, given there
    if (onCommandLine && llvm::any_of(llvm::make_range(lo, hi), [&](auto &kv) {
          return kv.second == item.value;
        }))
      continue;
    tokens.push_back(item.flag);
    if (kind != Kind::Switch)
      tokens.push_back(item.value);
  }
  return tokens;
}

static llvm::Expected<std::optional<std::string>>
takeFileFlag(std::vector<std::string> &args, llvm::StringRef flag,
             llvm::StringRef what) {
  std::optional<std::string> path;
  std::vector<std::string> rest;
  std::string eq = flag.str() + "=";
  for (size_t i = 0; i < args.size(); ++i) {
    llvm::StringRef a = args[i];
    if (a != flag && !a.starts_with(eq)) {
      rest.push_back(args[i]);
      continue;
    }
    if (path)
      return error(flag, "given twice; give one " + what);
    if (a.starts_with(eq))
      path = a.drop_front(eq.size()).str();
    else if (i + 1 < args.size() &&
             !llvm::StringRef(args[i + 1]).starts_with("-"))
      path = args[++i];
    if (!path || path->empty())
      return error(flag, "expects a JSON file");
  }
  args = std::move(rest);
  return path;
}

/// Inserts a config file's flag tokens into `args` after the command
/// (`compile`, `plan`), so that a reproduce line reads as a command line.
static void insertAfterCommand(std::vector<std::string> &args,
                               const std::vector<std::string> &tokens) {
  size_t at = !args.empty() && !llvm::StringRef(args[0]).starts_with("-");
  args.insert(args.begin() + at, tokens.begin(), tokens.end());
}

llvm::Expected<llvm::json::Value> parseJsonObject(llvm::StringRef text,
                                                  llvm::StringRef origin,
                                                  llvm::StringRef what) {
  auto parsed = llvm::json::parse(text);
  if (!parsed)
    return error(origin,
                 "not valid JSON: " + llvm::toString(parsed.takeError()));
  if (!parsed->getAsObject())
    return error(origin, "expects " + what.str());
  return std::move(*parsed);
}

std::string shownValue(const llvm::json::Value &v) {
  if (!v.getAsInteger() && v.getAsNumber()) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.15g", *v.getAsNumber());
    return buf;
  }
  std::string s;
  llvm::raw_string_ostream os(s);
  os << v;
  return s;
}

llvm::Error expandFileFlag(std::vector<std::string> &args, llvm::StringRef flag,
                           llvm::StringRef what, const FileFlags &flagsOf) {
  auto path = takeFileFlag(args, flag, what);
  if (!path)
    return path.takeError();
  if (!*path)
    return llvm::Error::success();
  auto buffer = llvm::MemoryBuffer::getFile(**path);
  if (!buffer)
    return error(**path, "cannot read (" + buffer.getError().message() + ")");
  auto tokens = flagsOf((*buffer)->getBuffer(), **path, args);
  if (!tokens)
    return tokens.takeError();
  insertAfterCommand(args, *tokens);
  return llvm::Error::success();
}

llvm::Error expandConfigFile(std::vector<std::string> &args) {
  return expandFileFlag(args, "--config", "config file",
                        [](llvm::StringRef text, llvm::StringRef path,
                           const std::vector<std::string> &rest) {
                          return configFileFlags(text, path, rest);
                        });
}
