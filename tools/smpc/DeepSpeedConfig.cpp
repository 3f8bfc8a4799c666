//===- DeepSpeedConfig.cpp - smpc --deepspeed FILE: a DeepSpeed config ----===//
//
// Each key of the file becomes ConfigFile.h's items (flags it sets), which
// ConfigFile's configItemTokens checks against each other and the command
// line. DeepSpeed's own rules and defaults are followed where they decide
// the numbers trained: its batch arithmetic (train_batch_size = micro-batch
// x accumulation steps x data-parallel ranks), its optimizers' defaults
// (FusedAdam decays nothing unless told; "Adam" is AdamW unless
// adam_w_mode is false), its schedulers' formulas and its loss scaler's.
//
//===----------------------------------------------------------------------===//

#include "DeepSpeedConfig.h"
#include "ConfigFile.h"
#include "DeepSpeedReader.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>

namespace json = llvm::json;
using namespace smpc::deepspeed;

namespace {

/// Keys that only tune how DeepSpeed runs (buckets, overlap, logging,
/// profiling, checkpoint I/O): what is trained does not depend on them.
const char *kTuningKeys[] = {"steps_per_print",
                             "wall_clock_breakdown",
                             "dump_state",
                             "memory_breakdown",
                             "flops_profiler",
                             "tensorboard",
                             "wandb",
                             "csv_monitor",
                             "comet",
                             "comms_logger",
                             "monitor_config",
                             "activation_checkpointing",
                             "aio",
                             "checkpoint",
                             "zero_allow_untested_optimizer",
                             "zero_force_ds_cpu_optimizer",
                             "prescale_gradients",
                             "gradient_predivide_factor",
                             "sparse_gradients",
                             "disable_allgather",
                             "timers",
                             "use_data_before_expert_parallelism",
                             "graph_harvesting",
                             "pipeline",
                             "eigenvalue",
                             "progressive_layer_drop",
                             "nebula",
                             "autotuning",
                             "compile",
                             "dataloader_drop_last"};

/// Keys of features that change what is trained and that smp does not have.
const char *kUnsupportedKeys[] = {"amp",
                                  "elasticity",
                                  "compression_training",
                                  "data_efficiency",
                                  "curriculum_learning",
                                  "sparse_attention",
                                  "quantize_training",
                                  "sequence_parallel_size",
                                  "moe",
                                  "hybrid_engine",
                                  "weight_quantization",
                                  "pld",
                                  "seq_parallel_communication_data_type"};

} // namespace

llvm::Expected<std::optional<double>> Reader::numberAt(const json::Object &o,
                                                       llvm::StringRef key,
                                                       llvm::StringRef path,
                                                       bool positive) const {
  const json::Value *v = o.get(key);
  if (!v || v->kind() == json::Value::Null)
    return std::nullopt;
  auto d = v->getAsNumber();
  if (!d || !std::isfinite(*d) || *d < 0 || (positive && *d == 0))
    return expects(path, *v, positive ? "a positive number" : "a number >= 0");
  return *d;
}

llvm::Expected<std::optional<int64_t>>
Reader::countAt(const json::Object &o, llvm::StringRef key) const {
  const json::Value *v = o.get(key);
  if (!v || v->kind() == json::Value::Null)
    return std::nullopt;
  auto i = v->getAsInteger();
  if (!i || *i < 1)
    return expects(key, *v, "a positive integer");
  return *i;
}

std::optional<int64_t> Reader::knownDp(bool &given) const {
  std::optional<int64_t> tp;
  for (const ConfigItem &item : items)
    if (item.flag == "--tp")
      tp = std::stoll(item.value);
  return dataParallelDegree(cli, tp, /*microbatchesPinned=*/false, given);
}

/// train_batch_size = train_micro_batch_size_per_gpu x
/// gradient_accumulation_steps x data-parallel ranks, as DeepSpeed derives
/// the missing ones. smp's step is the global batch's whatever its split,
/// so the global batch is what must come out right.
llvm::Error Reader::readBatch(const json::Object &root) {
  const char *kT = "train_batch_size", *kM = "train_micro_batch_size_per_gpu",
             *kG = "gradient_accumulation_steps";
  auto t = countAt(root, kT);
  auto m = countAt(root, kM);
  auto g = countAt(root, kG);
  if (!t)
    return t.takeError();
  if (!m)
    return m.takeError();
  if (!g)
    return g.takeError();
  if (!*t && !*m)
    return fail("gives neither \"train_batch_size\" nor "
                "\"train_micro_batch_size_per_gpu\", which DeepSpeed refuses "
                "too: give the global batch as \"train_batch_size\"");
  bool dpGiven = false;
  dp = knownDp(dpGiven);
  // All three fix the data-parallel degree DeepSpeed would run with: with
  // nothing on the command line saying otherwise, it is the plan's.
  if (*t && *m && *g && dp && !dpGiven && **t % (**m * **g) == 0 &&
      **t / (**m * **g) > 1) {
    dp = **t / (**m * **g);
    items.push_back(ConfigItem{
        kT,
        std::to_string(**t) + " (= " + std::to_string(**m) + " x " +
            std::to_string(**g) + " x dp " + std::to_string(*dp) + ")",
        "--dp", std::to_string(*dp)});
  }
  std::string dpText =
      dp ? std::to_string(*dp) + " data-parallel rank" + (*dp == 1 ? "" : "s")
         : "";
  json::Value tv = *t ? json::Value(**t) : json::Value(nullptr);
  if (*t && *m && *g) {
    if (dp && **t != **m * **g * *dp)
      return fail("\"train_batch_size\": " + std::to_string(**t) +
                  " is not train_micro_batch_size_per_gpu " +
                  std::to_string(**m) + " x gradient_accumulation_steps " +
                  std::to_string(**g) + " x " + dpText + " (" +
                  std::to_string(**m * **g * *dp) +
                  "), which DeepSpeed refuses too: change one of them, or "
                  "give the data-parallel degree they imply (--dp " +
                  (**t % (**m * **g) ? std::string("D")
                                     : std::to_string(**t / (**m * **g))) +
                  ")");
    if (!dp && **t % (**m * **g))
      return fail("\"train_batch_size\": " + std::to_string(**t) +
                  " is not a multiple of train_micro_batch_size_per_gpu x "
                  "gradient_accumulation_steps (" +
                  std::to_string(**m * **g) + ")");
  }
  if (*t)
    set(kT, tv, "--batch-size", std::to_string(**t));
  if (!dp) {
    // The planner chooses dp and the micro-batches: it is told the global
    // batch and the samples a micro-batch holds.
    if (!*t)
      return fail(std::string("the planner (--devices N without --dp, --tp "
                              "or --pp) needs the global batch: give "
                              "\"train_batch_size\" (or --dp, from which "
                              "DeepSpeed's rule derives it)"));
    if (*m)
      set(kM, json::Value(**m), "--microbatch-size", std::to_string(**m));
    return llvm::Error::success();
  }
  if (!*t && *m) // DeepSpeed: micro x accumulation x dp
    set(kM, json::Value(**m), "--batch-size",
        std::to_string(**m * g->value_or(1) * *dp));
  if (*g)
    set(kG, json::Value(**g), "--microbatches", std::to_string(**g));
  else if (*t && *m) {
    if (**t % (**m * *dp))
      return fail("\"train_batch_size\": " + std::to_string(**t) +
                  " is not a multiple of train_micro_batch_size_per_gpu " +
                  std::to_string(**m) + " x " + dpText +
                  ": DeepSpeed cannot derive gradient_accumulation_steps "
                  "either");
    set(kM, json::Value(**m), "--microbatches",
        std::to_string(**t / (**m * *dp)));
  }
  return llvm::Error::success();
}

llvm::Error Reader::readOther(llvm::StringRef key, const json::Value &v) {
  if (llvm::is_contained(kTuningKeys, key)) {
    tuning.push_back(key.str());
    return llvm::Error::success();
  }
  if (key == "gradient_clipping") {
    auto d = v.getAsNumber();
    if (!d || !std::isfinite(*d) || *d < 0)
      return expects(key, v, "a number >= 0 (0: no clipping)");
    if (*d > 0)
      set(key, v, "--clip-grad-norm", number(*d));
    else
      items.push_back(
          ConfigItem{key.str(), shown(v), "--clip-grad-norm", "", false});
    return llvm::Error::success();
  }
  if (key == "tensor_parallel") {
    const json::Object *o = v.getAsObject();
    if (!o)
      return expects(key, v, "an object ({\"autotp_size\": N})");
    for (const auto &[k, value] : *o) {
      if (k != "autotp_size")
        return fail("unknown key \"tensor_parallel." + k.str() + "\"");
      auto i = value.getAsInteger();
      if (!i || *i < 1)
        return expects("tensor_parallel.autotp_size", value,
                       "a positive integer");
      set("tensor_parallel.autotp_size", value, "--tp", std::to_string(*i));
    }
    return llvm::Error::success();
  }
  if (key == "communication_data_type" || key == "data_types") {
    // The type gradients are reduced (accumulated) in: only rounding in a
    // 16-bit run; in an fp32 run a 16-bit type would train other numbers.
    std::string s = shown(v);
    bool wide = v.kind() == json::Value::Null ||
                llvm::StringRef(s).contains("fp32") ||
                llvm::StringRef(s).contains("float32") || s == "{}";
    if (!fp32 || wide) {
      tuning.push_back(key.str());
      return llvm::Error::success();
    }
    return fail("\"" + key + "\": " + s +
                " reduces the gradients of an fp32 run in 16 bits; smp "
                "reduces them in fp32: remove it");
  }
  if (llvm::is_contained(kUnsupportedKeys, key)) {
    const json::Object *o = v.getAsObject();
    const json::Value *e = o ? o->get("enabled") : nullptr;
    if ((e && e->getAsBoolean() == std::optional<bool>(false)) ||
        v.getAsBoolean() == std::optional<bool>(false) ||
        v.kind() == json::Value::Null)
      return llvm::Error::success();
    return fail("\"" + key +
                "\" is a DeepSpeed feature that changes what is "
                "trained and that smp does not have; remove it (or set "
                "\"enabled\": false)");
  }
  return fail("unknown key \"" + key +
              "\" (docs/python.md lists the DeepSpeed keys smpc reads)");
}

llvm::Error Reader::read(json::Object &root) {
  if (llvm::Error e = resolveAuto(root))
    return e;
  if (const json::Object *z = root.getObject("zero_optimization"))
    zeroStage = z->getInteger("stage").value_or(0);
  if (llvm::Error e = readPrecision(root))
    return e;
  // --tp first: the batch arithmetic needs the data-parallel degree.
  if (const json::Value *tp = root.get("tensor_parallel"))
    if (llvm::Error e = readOther("tensor_parallel", *tp))
      return e;
  if (llvm::Error e = readBatch(root))
    return e;
  std::vector<std::string> keys;
  for (const auto &kv : root)
    keys.push_back(kv.first.str());
  llvm::sort(keys);
  bool zero = false;
  for (const std::string &key : keys) {
    const json::Value &v = *root.get(key);
    llvm::Error e = llvm::Error::success();
    if (key == "train_batch_size" || key == "train_micro_batch_size_per_gpu" ||
        key == "gradient_accumulation_steps" || key == "fp16" ||
        key == "bf16" || key == "bfloat16" || key == "tensor_parallel")
      continue;
    if (key == "zero_optimization")
      zero = true, e = readZero(v);
    else if (key == "optimizer" || key == "scheduler")
      continue; // below: the scheduler may set the rate
    else
      e = readOther(key, v);
    if (e)
      return e;
  }
  if (const json::Value *s = root.get("scheduler"))
    if (llvm::Error e = readScheduler(*s))
      return e;
  if (const json::Value *o = root.get("optimizer"))
    if (llvm::Error e = readOptimizer(*o))
      return e;
  // DeepSpeed's defaults where the file is silent: no ZeRO, no clipping.
  if (!zero && dp != std::optional<int64_t>(1))
    items.push_back(ConfigItem{"zero_optimization",
                               "absent (DeepSpeed's default: stage 0)",
                               "--zero-stage", "0"});
  if (!root.get("gradient_clipping"))
    items.push_back(ConfigItem{"gradient_clipping",
                               "absent (DeepSpeed's default: no clipping)",
                               "--clip-grad-norm", "", false});
  return llvm::Error::success();
}

llvm::Expected<std::vector<std::string>>
deepSpeedFlags(llvm::StringRef text, llvm::StringRef origin,
               const std::vector<std::string> &commandLine,
               std::vector<std::string> &warnings, llvm::StringRef where) {
  auto parsed =
      parseJsonObject(text, origin, "a JSON object (a DeepSpeed config)");
  if (!parsed)
    return parsed.takeError();
  json::Object *root = parsed->getAsObject();
  Reader reader(origin, commandLine);
  if (llvm::Error e = reader.read(*root))
    return std::move(e);
  if (!reader.trainerDefaults.empty())
    warnings.push_back(origin.str() +
                       ": \"auto\" values filled as the Hugging Face Trainer "
                       "fills them when its arguments are left at their "
                       "defaults (the flag in parentheses sets one): " +
                       llvm::join(reader.trainerDefaults, ", "));
  if (!reader.tuning.empty())
    warnings.push_back(origin.str() +
                       ": ignored, as they tune how DeepSpeed runs and not "
                       "what it trains: " +
                       llvm::join(reader.tuning, ", "));
  return configItemTokens(reader.items, origin, commandLine, where);
}

llvm::Error expandDeepSpeedConfig(std::vector<std::string> &args,
                                  std::vector<std::string> &warnings,
                                  llvm::StringRef where) {
  return expandFileFlag(args, "--deepspeed", "DeepSpeed config",
                        [&](llvm::StringRef text, llvm::StringRef path,
                            const std::vector<std::string> &rest) {
                          return deepSpeedFlags(text, path, rest, warnings,
                                                where);
                        });
}
