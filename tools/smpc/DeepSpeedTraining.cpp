//===- DeepSpeedTraining.cpp - smpc --deepspeed: what is trained how -----===//
//
// The optimizer, scheduler, fp16/bf16 and zero_optimization keys of a
// DeepSpeed config, by DeepSpeed's rules and defaults (DeepSpeedConfig.cpp
// has the rest).
//
//===----------------------------------------------------------------------===//

#include "DeepSpeedReader.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <cmath>
#include <limits>

using namespace smpc::deepspeed;

namespace smpc::deepspeed {

std::string shown(const json::Value &v) { return shownValue(v); }

std::string number(double v) { return shortestNumber(v); }

} // namespace smpc::deepspeed

namespace {

/// Keys of zero_optimization that only tune how ZeRO runs.
const char *kZeroTuningKeys[] = {"allgather_partitions",
                                 "allgather_bucket_size",
                                 "overlap_comm",
                                 "reduce_scatter",
                                 "reduce_bucket_size",
                                 "contiguous_gradients",
                                 "round_robin_gradients",
                                 "sub_group_size",
                                 "stage3_prefetch_bucket_size",
                                 "stage3_param_persistence_threshold",
                                 "stage3_max_live_parameters",
                                 "stage3_max_reuse_distance",
                                 "stage3_gather_16bit_weights_on_model_save",
                                 "stage3_gather_fp16_weights_on_model_save",
                                 "gather_16bit_weights_on_model_save",
                                 "load_from_fp32_weights",
                                 "elastic_checkpoint",
                                 "ignore_unused_parameters",
                                 "legacy_stage1",
                                 "memory_efficient_linear",
                                 "pipeline_loading_checkpoint",
                                 "override_module_apply",
                                 "log_trace_cache_warnings",
                                 "use_multi_rank_bucket_allreduce",
                                 "mics_hierarchical_params_gather",
                                 "zero_hpz_partition_size",
                                 "module_granularity_threshold",
                                 "use_all_reduce_for_fetch_params",
                                 "prefetch_bucket_size",
                                 "param_persistence_threshold",
                                 "max_live_parameters",
                                 "max_reuse_distance",
                                 "cpu_offload_use_pin_memory",
                                 "stage3_module_granularity_threshold"};

} // namespace

bool smpc::deepspeed::zeroTuningKey(llvm::StringRef key) {
  return llvm::is_contained(kZeroTuningKeys, key);
}

/// DeepSpeed's dynamic loss scaler (fp16.loss_scale 0) of its ZeRO
/// optimizers: the scale starts at 2^initial_scale_power, doubles once
/// loss_scale_window + 1 steps without an overflow followed one (or the
/// start), then every loss_scale_window of them, and an overflow skips the
/// step and halves it once hysteresis overflows have been seen (never below
/// min_loss_scale): smpc --loss-scaler deepspeed.
llvm::Error Reader::readFp16(const json::Object &fp16) {
  if (zeroStage == 0)
    return fail("\"fp16\" without ZeRO runs DeepSpeed's FP16_Optimizer, "
                "which smp does not follow: DeepSpeed 0.19's engine does not "
                "scale the loss for it, yet it divides the gradients by the "
                "loss scale; set \"zero_optimization\": {\"stage\": 1} "
                "(its loss scaling smp follows, on one rank too) or train in "
                "\"bf16\"");
  static const char *kKeys[] = {
      "enabled",    "fp16_master_weights_and_grads", "auto_cast",
      "loss_scale", "initial_scale_power",           "loss_scale_window",
      "hysteresis", "consecutive_hysteresis",        "min_loss_scale"};
  for (const auto &kv : fp16)
    if (!llvm::is_contained(kKeys, kv.first))
      return fail("unknown key \"fp16." + kv.first.str() + "\"");
  if (const json::Value *v = fp16.get("auto_cast");
      v && v->getAsBoolean() != std::optional<bool>(false))
    return fail("\"fp16.auto_cast\": " + shown(*v) +
                " casts the model's inputs to fp16, which smp does not do "
                "(its fp16 computes the model in fp16 from fp32 master "
                "weights); remove it");
  if (const json::Value *v = fp16.get("loss_scale");
      v && v->getAsNumber() != std::optional<double>(0.0))
    return fail("\"fp16.loss_scale\": " + shown(*v) +
                " is a static loss scale; smp scales the loss dynamically "
                "(torch.amp.GradScaler, DeepSpeed's loss_scale 0): set it "
                "to 0");
  items.push_back(ConfigItem{"fp16", "enabled (DeepSpeed's loss scaler)",
                             "--loss-scaler", "deepspeed"});
  // The scaler's settings, DeepSpeed's defaults (0.19's precision_config:
  // 2^16, 1000, 2, 1) where the file leaves them out.
  auto setting = [&](const char *key, const char *flag, int64_t fallback,
                     int64_t lo, int64_t hi, const char *what) -> llvm::Error {
    std::string path = std::string("fp16.") + key;
    const json::Value *v = fp16.get(key);
    auto i = v ? v->getAsInteger() : std::optional<int64_t>(fallback);
    if (!i || *i < lo || *i > hi)
      return expects(path, *v, what);
    items.push_back(ConfigItem{
        path,
        v ? shown(*v)
          : "absent (DeepSpeed's default: " + std::to_string(fallback) + ")",
        flag,
        flag == llvm::StringRef("--loss-scale") ? number(std::ldexp(1.0, *i))
                                                : std::to_string(*i)});
    return llvm::Error::success();
  };
  int64_t most = std::numeric_limits<int64_t>::max();
  if (llvm::Error e = setting("initial_scale_power", "--loss-scale", 16, 0, 126,
                              "an integer in [0, 126]"))
    return e;
  if (llvm::Error e = setting("loss_scale_window", "--loss-scale-window", 1000,
                              1, most, "a positive integer"))
    return e;
  if (llvm::Error e = setting("hysteresis", "--loss-scale-hysteresis", 2, 1,
                              most, "a positive integer"))
    return e;
  auto floor = numberAt(fp16, "min_loss_scale", "fp16.min_loss_scale", true);
  if (!floor)
    return floor.takeError();
  items.push_back(ConfigItem{"fp16.min_loss_scale",
                             *floor ? shown(*fp16.get("min_loss_scale"))
                                    : "absent (DeepSpeed's default: 1)",
                             "--min-loss-scale", number(floor->value_or(1.0))});
  if (const json::Value *v = fp16.get("consecutive_hysteresis")) {
    if (!v->getAsBoolean())
      return expects("fp16.consecutive_hysteresis", *v, "true or false");
    if (*v->getAsBoolean())
      items.push_back(ConfigItem{"fp16.consecutive_hysteresis", shown(*v),
                                 "--consecutive-hysteresis"});
  }
  return llvm::Error::success();
}

llvm::Error Reader::readPrecision(const json::Object &root) {
  auto enabled = [&](llvm::StringRef key) -> llvm::Expected<bool> {
    const json::Value *v = root.get(key);
    if (!v)
      return false;
    const json::Object *o = v->getAsObject();
    if (!o)
      return expects(key, *v, "an object ({\"enabled\": true, ...})");
    const json::Value *e = o->get("enabled");
    if (!e)
      return false; // DeepSpeed's default
    if (!e->getAsBoolean())
      return expects((key + ".enabled").str(), *e, "true or false");
    return *e->getAsBoolean();
  };
  auto fp16 = enabled("fp16");
  if (!fp16)
    return fp16.takeError();
  const char *bf16Key = root.get("bfloat16") ? "bfloat16" : "bf16";
  if (root.get("bfloat16") && root.get("bf16"))
    return fail("\"bf16\" and \"bfloat16\" are one setting: give one");
  auto bf16 = enabled(bf16Key);
  if (!bf16)
    return bf16.takeError();
  if (*fp16 && *bf16)
    return fail("\"fp16\" and \"" + llvm::Twine(bf16Key) +
                "\" are both enabled; DeepSpeed refuses that too: enable one");
  if (const json::Value *b = root.get(bf16Key))
    for (const auto &[k, v] : *b->getAsObject())
      if (k != "enabled" && k != "immediate_grad_update" &&
          k != "check_grad_overflow")
        return fail("unknown key \"" + llvm::Twine(bf16Key) + "." + k.str() +
                    "\"");
  fp32 = !*fp16 && !*bf16;
  const char *precision = *fp16 ? "fp16" : *bf16 ? "bf16" : "fp32";
  std::string key = *fp16   ? "fp16.enabled"
                    : *bf16 ? std::string(bf16Key) + ".enabled"
                            : "fp16/bf16";
  items.push_back(
      ConfigItem{key, fp32 ? "not enabled (DeepSpeed trains in fp32)" : "true",
                 "--precision", precision});
  // DeepSpeed's bf16 and fp16 optimizers keep fp32 master weights, also of
  // a model stored in 16 bits (a no-op for an fp32 export).
  if (!fp32)
    items.push_back(ConfigItem{key, "true (fp32 master weights)",
                               "--master-weights", "fp32"});
  if (*fp16)
    return readFp16(*root.getObject("fp16"));
  return llvm::Error::success();
}

llvm::Error Reader::readZero(const json::Value &v) {
  const json::Object *z = v.getAsObject();
  if (!z)
    return expects("zero_optimization", v, "an object");
  int64_t stage = 0;
  if (const json::Value *s = z->get("stage")) {
    auto i = s->getAsInteger();
    if (!i || *i < 0 || *i > 3)
      return expects("zero_optimization.stage", *s, "0, 1, 2 or 3");
    stage = *i;
  }
  // ZeRO on one rank shards nothing (DeepSpeed runs it; smp has no flag
  // for it): the stage matters where there are data-parallel ranks.
  if (dp != std::optional<int64_t>(1))
    items.push_back(ConfigItem{"zero_optimization.stage",
                               z->get("stage") ? shown(*z->get("stage"))
                                               : "0 (DeepSpeed's default)",
                               "--zero-stage", std::to_string(stage)});
  for (const auto &[k, value] : *z) {
    llvm::StringRef key = k;
    std::string path = "zero_optimization." + key.str();
    if (key == "stage")
      continue;
    if (llvm::is_contained(kZeroTuningKeys, key)) {
      tuning.push_back(path);
      continue;
    }
    if (key == "offload_optimizer" || key == "offload_param") {
      const json::Object *o = value.getAsObject();
      const json::Value *device = o ? o->get("device") : nullptr;
      if (value.kind() == json::Value::Null ||
          (device &&
           device->getAsString() == std::optional<llvm::StringRef>("none")))
        continue;
      return fail("\"" + path + "\": " + shown(value) +
                  " offloads to the host (ZeRO-Offload), which smp does not "
                  "do: it keeps optimizer state and parameters on the device "
                  "and says at compile time whether they fit. Remove it (the "
                  "numbers trained are the same); to save device memory use "
                  "--zero-stage 3, --checkpoint-activations or "
                  "--offload-activations");
    }
    if (key == "cpu_offload" || key == "cpu_offload_param") {
      if (value.getAsBoolean() == std::optional<bool>(false))
        continue;
      return fail("\"" + path + "\": " + shown(value) +
                  " offloads to the host (ZeRO-Offload), which smp does not "
                  "do; remove it (see offload_optimizer)");
    }
    if (key == "mics_shard_size") {
      auto i = value.getAsInteger();
      if (!i)
        return expects(path, value, "an integer");
      if (*i > 0)
        set(path, value, "--sharded-dp", std::to_string(*i));
      continue;
    }
    if (key.starts_with("zero_quantized")) {
      if (value.getAsBoolean() == std::optional<bool>(false))
        continue;
      return fail("\"" + path + "\": " + shown(value) +
                  " quantizes what ZeRO++ communicates, which changes the "
                  "numbers trained; smp communicates them unquantized: "
                  "remove it");
    }
    return fail("unknown key \"" + path + "\"");
  }
  return llvm::Error::success();
}

namespace {

/// DeepSpeed's own optimizers other than Adam/AdamW (deepspeed.ops).
const char *kOtherDeepSpeedOptimizers[] = {
    "adagrad", "lamb",    "onebitadam", "onebitlamb", "zerooneadam",
    "muadam",  "muadamw", "musgd",      "lion"};

} // namespace

llvm::Expected<std::pair<llvm::StringRef, const json::Object *>>
Reader::typeAndParams(llvm::StringRef key, const json::Value &v,
                      llvm::StringRef extra) const {
  static const json::Object kNone;
  const json::Object *o = v.getAsObject();
  auto type = o ? o->getString("type") : std::nullopt;
  if (!type)
    return expects(key, v, "an object with \"type\" and \"params\"");
  for (const auto &kv : *o)
    if (kv.first != "type" && kv.first != "params" &&
        (extra.empty() || llvm::StringRef(kv.first) != extra))
      return fail("unknown key \"" + key + "." + kv.first.str() + "\"");
  const json::Value *params = o->get("params");
  if (params && !params->getAsObject())
    return expects((key + ".params").str(), *params, "an object");
  return std::make_pair(*type, params ? params->getAsObject() : &kNone);
}

/// "optimizer": {"type": T, "params": {...}} as DeepSpeed builds it: "Adam"
/// and "AdamW" are FusedAdam, decoupled weight decay (AdamW) unless "Adam"
/// has adam_w_mode false, weight_decay 0 unless given (torch_adam: torch's
/// class and its defaults); other names are torch.optim classes ("SGD").
llvm::Error Reader::readOptimizer(const json::Value &v) {
  auto parts = typeAndParams("optimizer", v, "legacy_fusion");
  if (!parts)
    return parts.takeError();
  auto [type, params] = *parts;
  std::string name = type.lower();
  bool adam = name == "adam" || name == "adamw";
  if (!adam && type != "SGD") {
    bool ours = llvm::is_contained(kOtherDeepSpeedOptimizers, name);
    return fail("\"optimizer.type\": \"" + type + "\" (" +
                (ours ? "DeepSpeed's" : "torch.optim's") +
                ") is not an optimizer smp has: it trains with SGD, Adam "
                "and AdamW");
  }
  const char *allowed[] = {
      "lr",           "betas",      "eps",        "weight_decay",
      "adam_w_mode",  "torch_adam", "amsgrad",    "bias_correction",
      "momentum",     "dampening",  "nesterov",   "maximize",
      "foreach",      "fused",      "capturable", "differentiable",
      "set_grad_none"};
  for (const auto &[k, value] : *params) {
    if (!llvm::is_contained(allowed, k))
      return fail(
          "\"optimizer.params." + k.str() + "\" is not a parameter of " + type +
          (k == "max_grad_norm" ? " (DeepSpeed refuses it too: clipping is "
                                  "\"gradient_clipping\")"
                                : std::string()));
    bool sgdOnly = k == "momentum" || k == "dampening" || k == "nesterov";
    bool adamOnly = k == "betas" || k == "eps" || k == "adam_w_mode" ||
                    k == "torch_adam" || k == "amsgrad" ||
                    k == "bias_correction";
    if ((adam && sgdOnly) || (!adam && adamOnly))
      return fail("\"optimizer.params." + k.str() +
                  "\" is not a parameter of " + type);
  }
  auto flagged = [&](llvm::StringRef k) {
    return params->getBoolean(k).value_or(false);
  };
  if (flagged("amsgrad") || flagged("maximize"))
    return fail("\"optimizer.params." +
                llvm::Twine(flagged("amsgrad") ? "amsgrad" : "maximize") +
                "\": true is not something smp's " + type + " does");
  if (params->getBoolean("bias_correction") == std::optional<bool>(false))
    return fail("\"optimizer.params.bias_correction\": false: smp's Adam "
                "always corrects the moments' bias");
  std::string path = "optimizer.params.";
  if (adam) {
    bool decoupled =
        name == "adamw" || params->getBoolean("adam_w_mode").value_or(true);
    std::string kind = decoupled ? "adamw" : "adam";
    items.push_back(ConfigItem{
        "optimizer.type",
        "\"" + type.str() + "\"" +
            (decoupled && name == "adam" ? " (adam_w_mode: AdamW)" : ""),
        "--optimizer", kind});
    if (const json::Value *b = params->get("betas")) {
      const json::Array *a = b->getAsArray();
      if (!a || a->size() != 2 || !(*a)[0].getAsNumber() ||
          !(*a)[1].getAsNumber())
        return expects(path + "betas", *b, "[beta1, beta2]");
      set(path + "betas", *b, "--beta1", number(*(*a)[0].getAsNumber()));
      set(path + "betas", *b, "--beta2", number(*(*a)[1].getAsNumber()));
    }
    auto eps = numberAt(*params, "eps", path + "eps", true);
    if (!eps)
      return eps.takeError();
    if (*eps)
      set(path + "eps", *params->get("eps"), "--eps", number(**eps));
    // FusedAdam's weight_decay defaults to 0; torch.optim.AdamW's to 0.01.
    bool torchAdamW = decoupled && flagged("torch_adam");
    if (!params->get("weight_decay"))
      items.push_back(
          ConfigItem{path + "weight_decay",
                     torchAdamW ? "absent (torch.optim.AdamW's default: 0.01)"
                                : "absent (DeepSpeed's FusedAdam default: 0)",
                     "--weight-decay", torchAdamW ? "0.01" : "0"});
  } else {
    items.push_back(
        ConfigItem{"optimizer.type", "\"SGD\"", "--optimizer", "sgd"});
    for (const char *k : {"momentum", "dampening"}) {
      auto x = numberAt(*params, k, path + k);
      if (!x)
        return x.takeError();
      if (*x)
        set(path + k, *params->get(k),
            k[0] == 'm' ? "--momentum" : "--dampening", number(**x));
    }
    if (flagged("nesterov"))
      items.push_back(ConfigItem{path + "nesterov", "true", "--nesterov"});
  }
  auto wd = numberAt(*params, "weight_decay", path + "weight_decay");
  if (!wd)
    return wd.takeError();
  if (*wd)
    set(path + "weight_decay", *params->get("weight_decay"), "--weight-decay",
        number(**wd));
  auto lr = numberAt(*params, "lr", path + "lr", true);
  if (!lr)
    return lr.takeError();
  // WarmupLR and WarmupDecayLR overwrite the optimizer's rate with theirs.
  if (!schedulerSetsLr) {
    if (*lr)
      set(path + "lr", *params->get("lr"), "--lr", number(**lr));
    else
      items.push_back(ConfigItem{path + "lr",
                                 "absent (the optimizer's default: 0.001)",
                                 "--lr", "0.001"});
  }
  return llvm::Error::success();
}

/// "scheduler": {"type": T, "params": {...}}: DeepSpeed's WarmupLR,
/// WarmupDecayLR and WarmupCosineLR, whose formulas smprun runs as
/// --lr-schedule warmup-lr, warmup-decay-lr and warmup-cosine-lr.
llvm::Error Reader::readScheduler(const json::Value &v) {
  auto parts = typeAndParams("scheduler", v);
  if (!parts)
    return parts.takeError();
  auto [type, params] = *parts;
  const char *kind = type == "WarmupLR"         ? "warmup-lr"
                     : type == "WarmupDecayLR"  ? "warmup-decay-lr"
                     : type == "WarmupCosineLR" ? "warmup-cosine-lr"
                                                : nullptr;
  if (!kind)
    return fail("\"scheduler.type\": \"" + type +
                "\" is not a schedule smp has: it runs DeepSpeed's WarmupLR, "
                "WarmupDecayLR and WarmupCosineLR (and, without a "
                "\"scheduler\", a constant rate)");
  bool cosine = type == "WarmupCosineLR";
  std::vector<const char *> allowed = {"warmup_num_steps", "warmup_type",
                                       "last_batch_iteration"};
  if (cosine)
    allowed.insert(allowed.end(),
                   {"total_num_steps", "warmup_min_ratio", "cos_min_ratio"});
  else
    allowed.insert(allowed.end(), {"warmup_min_lr", "warmup_max_lr"});
  if (type == "WarmupDecayLR")
    allowed.push_back("total_num_steps");
  for (const auto &[k, value] : *params)
    if (!llvm::is_contained(allowed, k))
      return fail("\"scheduler.params." + k.str() +
                  "\" is not a parameter of " + type);
  std::string path = "scheduler.params.";
  items.push_back(ConfigItem{"scheduler.type", "\"" + type.str() + "\"",
                             "--lr-schedule", kind});
  if (const json::Value *last = params->get("last_batch_iteration"))
    if (last->getAsInteger() != std::optional<int64_t>(-1))
      return fail("\"scheduler.params.last_batch_iteration\": " + shown(*last) +
                  " starts the schedule part-way; smprun continues a run "
                  "with --resume CHECKPOINT instead: remove it");
  // warmup_num_steps (default 1000; DeepSpeed uses at least 2).
  int64_t warmup = 1000;
  if (const json::Value *w = params->get("warmup_num_steps")) {
    auto i = w->getAsInteger();
    if (!i || *i < 0)
      return expects(path + "warmup_num_steps", *w, "an integer >= 0");
    warmup = *i;
  }
  items.push_back(ConfigItem{path + "warmup_num_steps",
                             params->get("warmup_num_steps")
                                 ? shown(*params->get("warmup_num_steps"))
                                 : "absent (DeepSpeed's default: 1000)",
                             "--warmup-steps", std::to_string(warmup)});
  std::string warmupType = "log";
  if (const json::Value *t = params->get("warmup_type")) {
    auto s = t->getAsString();
    if (!s || (*s != "log" && *s != "linear"))
      return expects(path + "warmup_type", *t, "\"log\" or \"linear\"");
    warmupType = s->str();
  }
  items.push_back(ConfigItem{path + "warmup_type",
                             params->get("warmup_type")
                                 ? shown(*params->get("warmup_type"))
                                 : "absent (DeepSpeed's default: log)",
                             "--warmup-type", warmupType});
  // total_num_steps "auto": the Trainer's max_steps, smprun's --steps.
  const json::Value *total = params->get("total_num_steps");
  if ((cosine || type == "WarmupDecayLR") && !(autoTotalSteps && !total)) {
    auto i = total ? total->getAsInteger() : std::nullopt;
    if (!total)
      return fail("\"scheduler.params.total_num_steps\" is missing: " + type +
                  " needs it (DeepSpeed refuses the config too)");
    if (!i || *i < 1)
      return expects(path + "total_num_steps", *total, "a positive integer");
    set(path + "total_num_steps", *total, "--decay-steps", std::to_string(*i));
  }
  auto ratioOrLr = [&](const char *key, const char *flag,
                       const char *fallback) -> llvm::Error {
    auto x = numberAt(*params, key, path + key);
    if (!x)
      return x.takeError();
    items.push_back(ConfigItem{path + key,
                               *x ? shown(*params->get(key))
                                  : std::string("absent (DeepSpeed's "
                                                "default: ") +
                                        fallback + ")",
                               flag, *x ? number(**x) : fallback});
    return llvm::Error::success();
  };
  if (cosine) {
    if (llvm::Error e =
            ratioOrLr("warmup_min_ratio", "--warmup-min-ratio", "0"))
      return e;
    return ratioOrLr("cos_min_ratio", "--cos-min-ratio", "0.0001");
  }
  // WarmupLR and WarmupDecayLR set the rate from warmup_max_lr (default
  // 0.001), whatever the optimizer's lr says.
  schedulerSetsLr = true;
  if (llvm::Error e = ratioOrLr("warmup_min_lr", "--warmup-min-lr", "0"))
    return e;
  return ratioOrLr("warmup_max_lr", "--lr", "0.001");
}
