//===- TrainingArgs.cpp - smpc --training-args FILE: the HF Trainer's -----===//
//
// transformers' Trainer (4.x and 5.x) reads its TrainingArguments into what
// it trains: the global batch per_device_train_batch_size x
// gradient_accumulation_steps x ranks, torch's AdamW (or SGD) over two
// parameter groups (get_decay_parameter_names: no decay for norms and
// biases), clip_grad_norm_ at max_grad_norm, get_scheduler's schedule over
// max_steps with get_warmup_steps' warmup, and fp16 (torch's GradScaler) or
// bf16 autocast. This file does what the Trainer does with each key, as
// smpc flags.
//
//===----------------------------------------------------------------------===//

#include "TrainingArgs.h"

#include "ConfigFile.h"
#include "smp/base/EvalMetrics.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>
#include <optional>

namespace json = llvm::json;

namespace {

/// Keys that say how the Trainer logs, evaluates, saves, reports, loads
/// data or places itself: not what it trains.
bool runningKey(llvm::StringRef key) {
  static const char *kPrefixes[] = {"eval_",
                                    "logging_",
                                    "save_",
                                    "hub_",
                                    "push_to_hub",
                                    "dataloader_",
                                    "ddp_",
                                    "fsdp",
                                    "torch_compile",
                                    "tpu_",
                                    "log_",
                                    "trackio_",
                                    "generation_",
                                    "include_",
                                    "per_device_eval_",
                                    "per_gpu_eval_",
                                    "do_",
                                    "activation_checkpointing",
                                    "gradient_checkpointing",
                                    "liger_kernel"};
  static const char *kKeys[] = {"output_dir",
                                "overwrite_output_dir",
                                "evaluation_strategy",
                                "prediction_loss_only",
                                "batch_eval_metrics",
                                "torch_empty_cache_steps",
                                "local_rank",
                                "debug",
                                "past_index",
                                "run_name",
                                "disable_tqdm",
                                "remove_unused_columns",
                                "label_names",
                                "load_best_model_at_end",
                                "metric_for_best_model",
                                "greater_is_better",
                                "ignore_data_skip",
                                "report_to",
                                "skip_memory_metrics",
                                "resume_from_checkpoint",
                                "mp_parameters",
                                "full_determinism",
                                "torchdynamo",
                                "ray_scope",
                                "dispatch_batches",
                                "split_batches",
                                "accelerator_config",
                                "parallelism_config",
                                "project",
                                "enable_jit_checkpoint",
                                "restore_callback_states_from_checkpoint",
                                "no_cuda",
                                "jit_mode_eval",
                                "tf32",
                                "length_column_name",
                                "optim_target_modules",
                                "fp16_backend",
                                "fp16_full_eval",
                                "bf16_full_eval",
                                "sortish_sampler",
                                "predict_with_generate",
                                "auto_find_batch_size",
                                "tp_size",
                                "num_train_epochs",
                                "seed",
                                "data_seed",
                                "train_sampling_strategy",
                                "group_by_length",
                                "fp16_opt_level",
                                "use_cpu",
                                "use_cache",
                                "use_liger_kernel",
                                "use_ipex",
                                "use_mps_device",
                                "use_legacy_prediction_loop"};
  return llvm::any_of(kPrefixes,
                      [&](const char *p) { return key.starts_with(p); }) ||
         llvm::is_contained(kKeys, key);
}

/// Keys this reader follows.
bool trainingKey(llvm::StringRef key) {
  static const char *kKeys[] = {"per_device_train_batch_size",
                                "per_gpu_train_batch_size",
                                "gradient_accumulation_steps",
                                "max_steps",
                                "learning_rate",
                                "lr_scheduler_type",
                                "lr_scheduler_kwargs",
                                "warmup_steps",
                                "warmup_ratio",
                                "optim",
                                "optim_args",
                                "adafactor",
                                "weight_decay",
                                "adam_beta1",
                                "adam_beta2",
                                "adam_epsilon",
                                "max_grad_norm",
                                "bf16",
                                "fp16",
                                "half_precision_backend",
                                "label_smoothing_factor",
                                "neftune_noise_alpha",
                                "average_tokens_across_devices",
                                "deepspeed"};
  return llvm::is_contained(kKeys, key);
}

/// A TrainingArguments object's keys, read as the Trainer reads them.
class ArgsReader {
public:
  ArgsReader(const json::Object &root, llvm::StringRef origin,
             const std::vector<std::string> &commandLine)
      : root(root), origin(origin), args(commandLine),
        cli(commandLineFlags(commandLine)) {}

  llvm::Error read();

  std::vector<ConfigItem> items;
  std::vector<std::string> notes; // ignored keys worth a warning
  /// The DeepSpeed config only this file names ("deepspeed"): smpc reads
  /// it as --deepspeed.
  std::string passOn;

private:
  llvm::Error fail(const llvm::Twine &msg) const {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   origin + ": " + msg);
  }
  /// The value at `key`, null and absent alike as nullptr.
  const json::Value *at(llvm::StringRef key) const {
    const json::Value *v = root.get(key);
    return v && v->kind() != json::Value::Null ? v : nullptr;
  }
  std::string shown(llvm::StringRef key) const {
    const json::Value *v = at(key);
    return v ? shownValue(*v) : "null";
  }
  llvm::Expected<std::optional<double>> number(llvm::StringRef key) const {
    const json::Value *v = at(key);
    if (!v)
      return std::nullopt;
    if (auto d = v->getAsNumber())
      return *d;
    return fail("\"" + key + "\" expects a number, got " + shownValue(*v));
  }
  /// load_best_model_at_end: the Trainer ends on its best checkpoint's
  /// parameters, smprun on the last step's.
  std::string bestModelNote() const {
    std::string metric = text("metric_for_best_model").value_or("loss").str();
    if (!llvm::StringRef(metric).starts_with("eval_"))
      metric = "eval_" + metric;
    // A metric smpc can count, not asked for (--eval-accuracy,
    // --eval-metrics on the command line): say how.
    std::string name = metric.substr(5);
    auto given = [&](llvm::StringRef flag) {
      return llvm::any_of(
          args, [&](llvm::StringRef a) { return a.starts_with(flag); });
    };
    bool asked = given("--eval-accuracy") || given("--eval-metrics") ||
                 given("--eval-predictions");
    // A compute_metrics of the user's own runs on the predictions.
    const char *own = "a compute_metrics of your own: --eval-predictions and "
                      "smp.train(compute_metrics=...)";
    std::string how =
        asked || name == "loss" ? ""
        : smp::base::isEvalMetric(name)
            ? " (smpc --eval-metrics " + name + " reports " + metric +
                  " as scikit-learn or scipy computes it; " + own + ")"
            : std::string(" (") + own + ")";
    return "load_best_model_at_end true: the Trainer ends on the parameters "
           "of its checkpoint with the best " +
           metric +
           " (metric_for_best_model), smprun on the last step's: the "
           "evaluations in smprun's --metrics say which step was best, and "
           "smprun --checkpoint-every keeps its checkpoint to resume or "
           "export from" +
           how;
  }
  bool isTrue(llvm::StringRef key) const {
    const json::Value *v = at(key);
    return v && v->getAsBoolean() == std::optional<bool>(true);
  }
  std::optional<llvm::StringRef> text(llvm::StringRef key) const {
    const json::Value *v = at(key);
    return v ? v->getAsString() : std::nullopt;
  }
  void set(llvm::StringRef key, const char *flag, std::string value = "") {
    items.push_back(ConfigItem{key.str(), shown(key), flag, std::move(value)});
  }
  void rule(llvm::StringRef key, llvm::StringRef shownAs, const char *flag,
            std::string value = "", bool present = true) {
    items.push_back(
        ConfigItem{key.str(), shownAs.str(), flag, std::move(value), present});
  }

  /// Whether the DeepSpeed config has `path` (a.b.c), "auto" or not: the
  /// Trainer fills or checks (HfTrainerDeepSpeedConfig.fill_match) only
  /// the keys the config has.
  bool dsHas(llvm::StringRef path) const {
    if (!ds)
      return false;
    llvm::SmallVector<llvm::StringRef> parts;
    path.split(parts, '.');
    const json::Object *o = ds->getAsObject();
    for (size_t i = 0; o && i + 1 < parts.size(); ++i)
      o = o->getObject(parts[i]);
    return o && o->get(parts.back());
  }

  llvm::Error findDeepSpeed();
  llvm::Error readKeys();
  llvm::Error readBatch();
  llvm::Error readOptimizer();
  llvm::Error readSchedule();
  llvm::Error readTrainerSchedule(double rate, std::optional<int64_t> total);
  llvm::Error readSchedulerKwargs(llvm::StringRef type, double rate);
  llvm::Expected<std::optional<int64_t>> trainingSteps() const;
  llvm::Expected<int64_t> warmupSteps(std::optional<int64_t> total) const;
  llvm::Error readPrecision();
  llvm::Error readLoss();
  llvm::Error readEvaluation();
  llvm::Error readEvalSettings();

  const json::Object &root;
  std::string origin;
  std::vector<std::string> args;
  std::multimap<std::string, std::string> cli;
  int64_t dp = 1;
  int64_t globalBatch = 0; // readBatch's
  /// The DeepSpeed config the Trainer runs with, if any.
  std::optional<json::Value> ds;
};

/// The Trainer with DeepSpeed (its "deepspeed" argument, or --deepspeed):
/// the DeepSpeed config is read as --deepspeed reads it, and these
/// arguments fill its "auto" values or must match its others, key by key,
/// as transformers' HfTrainerDeepSpeedConfig does.
llvm::Error ArgsReader::findDeepSpeed() {
  std::optional<std::string> given;
  for (size_t i = 0; i < args.size(); ++i) {
    llvm::StringRef a = args[i];
    if (a.starts_with("--deepspeed="))
      given = a.drop_front(12).str();
    else if (a == "--deepspeed" && i + 1 < args.size())
      given = args[i + 1];
  }
  const json::Value *named = at("deepspeed");
  if (named && !named->getAsString())
    return fail("\"deepspeed\": " + shownValue(*named) +
                " is a config smpc cannot read from here: write it to a "
                "file and pass --deepspeed FILE");
  std::string path = given   ? *given
                     : named ? named->getAsString()->str()
                             : std::string();
  if (path.empty())
    return llvm::Error::success();
  if (given && named && *given != *named->getAsString())
    return fail("\"deepspeed\": " + shownValue(*named) + " and --deepspeed " +
                *given + " name two DeepSpeed configs; give one");
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return fail("\"deepspeed\": " + path + ": cannot read (" +
                buffer.getError().message() +
                "; the Trainer opens it from the directory it runs in): pass "
                "--deepspeed FILE");
  if (!given)
    passOn = path;
  // A config that does not parse is refused by --deepspeed's reader.
  if (auto parsed = json::parse((*buffer)->getBuffer()))
    ds = std::move(*parsed);
  else
    llvm::consumeError(parsed.takeError());
  return llvm::Error::success();
}

llvm::Error ArgsReader::readKeys() {
  std::vector<std::string> unknown;
  for (const auto &kv : root) {
    llvm::StringRef key = kv.first;
    if (!trainingKey(key) && !runningKey(key) && !smpc::isSftConfigKey(key))
      unknown.push_back(key.str());
  }
  llvm::sort(unknown);
  if (!unknown.empty())
    return fail("not keys of transformers' TrainingArguments (nor of TRL's "
                "SFTConfig): " +
                llvm::join(unknown, ", ") +
                " (another subclass's, such as TRL's DPOConfig, may change "
                "what is trained, which smpc cannot know; remove them from "
                "the file if they do not)");
  if (llvm::Error e = smpc::readSftConfigKeys(root, origin, notes))
    return e;
  if (llvm::Error e = findDeepSpeed())
    return e;
  // Ignored keys whose value changes how the run goes (not its numbers).
  for (const char *key : {"gradient_checkpointing", "torch_compile", "tf32",
                          "use_liger_kernel", "auto_find_batch_size"})
    if (isTrue(key))
      notes.push_back(std::string(key) + " " + shown(key));
  if (isTrue("load_best_model_at_end"))
    notes.push_back(bestModelNote());
  if (const json::Value *f = at("fsdp"))
    if (!(f->getAsString() && f->getAsString()->empty()) &&
        !(f->getAsArray() && f->getAsArray()->empty()))
      notes.push_back("fsdp " + shown("fsdp"));
  return llvm::Error::success();
}

/// The global batch: per_device_train_batch_size x
/// gradient_accumulation_steps x the data-parallel ranks the command line
/// gives (1 without --dp or --devices; --devices over --tp x --pp).
llvm::Error ArgsReader::readBatch() {
  const char *kM = at("per_gpu_train_batch_size")
                       ? "per_gpu_train_batch_size"
                       : "per_device_train_batch_size";
  auto m = number(kM);
  auto g = number("gradient_accumulation_steps");
  if (!m || !g)
    return m ? g.takeError() : m.takeError();
  int64_t perDevice = static_cast<int64_t>(m->value_or(8));
  int64_t accumulate = static_cast<int64_t>(g->value_or(1));
  if (perDevice < 1 || accumulate < 1)
    return fail(std::string("\"") + kM +
                "\" and "
                "\"gradient_accumulation_steps\" must be positive");
  // The file pins the micro-batches, so the planner does not choose dp;
  // degrees that do not divide --devices smpc refuses itself.
  bool given;
  dp = dataParallelDegree(cli, std::nullopt, /*microbatchesPinned=*/true, given)
           .value_or(1);
  int64_t batch = perDevice * accumulate * dp;
  globalBatch = batch;
  rule(kM,
       shown(kM) + " (x " + std::to_string(accumulate) + " x dp " +
           std::to_string(dp) + " = " + std::to_string(batch) + ")",
       "--batch-size", std::to_string(batch));
  rule("gradient_accumulation_steps", std::to_string(accumulate),
       "--microbatches", std::to_string(accumulate));
  return llvm::Error::success();
}

/// optim, weight_decay (with the Trainer's groups), Adam's betas and eps,
/// max_grad_norm. With a DeepSpeed "optimizer" the Trainer builds none: it
/// fills or checks that optimizer's params (and gives DeepSpeed every
/// parameter, in one group); DeepSpeed clips at its "gradient_clipping"
/// only.
llvm::Error ArgsReader::readOptimizer() {
  bool dsOptimizer = dsHas("optimizer");
  bool sgd = false;
  if (!dsOptimizer) {
    if (isTrue("adafactor"))
      return fail("\"adafactor\": true trains with Adafactor, which smp does "
                  "not have (sgd, adam, adamw)");
    llvm::StringRef optim = text("optim").value_or("adamw_torch");
    static const char *kAdamW[] = {
        "adamw_torch",      "adamw_torch_fused",     "adamw_hf",
        "adamw_apex_fused", "adamw_torch_npu_fused", "adamw_torch_xla"};
    sgd = optim == "sgd";
    if (!sgd && !llvm::is_contained(kAdamW, optim))
      return fail("\"optim\": \"" + optim +
                  "\" is an optimizer smp does not have: use \"adamw_torch\" "
                  "(or \"adamw_torch_fused\") or \"sgd\"");
    if (const json::Value *a = at("optim_args"))
      if (!(a->getAsString() && a->getAsString()->empty()))
        return fail("\"optim_args\": " + shownValue(*a) +
                    " is not read by smpc: set the optimizer's options with "
                    "--momentum, --beta1, ... and remove it");
    set("optim", "--optimizer", sgd ? "sgd" : "adamw");
  }
  auto wd = number("weight_decay");
  if (!wd)
    return wd.takeError();
  double decay = wd->value_or(0.0);
  if (!dsOptimizer || dsHas("optimizer.params.weight_decay"))
    rule("weight_decay", shortestNumber(decay), "--weight-decay",
         shortestNumber(decay));
  // The Trainer's two groups (only where there is a decay to take away),
  // unless the command line names the parameters without decay itself.
  if (!dsOptimizer && decay > 0 && !cli.count("--no-decay"))
    rule("weight_decay", shortestNumber(decay) + " (the Trainer's groups)",
         "--hf-no-decay");
  for (auto [key, flag, fallback, dsKey] :
       {std::tuple{"adam_beta1", "--beta1", 0.9, "optimizer.params.betas"},
        std::tuple{"adam_beta2", "--beta2", 0.999, "optimizer.params.betas"},
        std::tuple{"adam_epsilon", "--eps", 1e-8, "optimizer.params.eps"}}) {
    auto v = number(key);
    if (!v)
      return v.takeError();
    if (dsOptimizer ? dsHas(dsKey) : !sgd)
      rule(key, shortestNumber(v->value_or(fallback)), flag,
           shortestNumber(v->value_or(fallback)));
  }
  auto clip = number("max_grad_norm");
  if (!clip)
    return clip.takeError();
  double c = root.get("max_grad_norm") ? clip->value_or(0.0) : 1.0;
  if (ds && !dsHas("gradient_clipping"))
    return llvm::Error::success();
  if (c > 0)
    rule("max_grad_norm", shortestNumber(c), "--clip-grad-norm",
         shortestNumber(c));
  else
    rule("max_grad_norm", shortestNumber(c) + " (no clipping)",
         "--clip-grad-norm", "", false);
  return llvm::Error::success();
}

/// The schedule's length, max_steps (the Trainer's num_training_steps),
/// else --decay-steps; none when both are missing.
llvm::Expected<std::optional<int64_t>> ArgsReader::trainingSteps() const {
  auto maxSteps = number("max_steps");
  if (!maxSteps)
    return maxSteps.takeError();
  if (maxSteps->value_or(-1) > 0)
    return static_cast<int64_t>(**maxSteps);
  return flagInt(cli, "--decay-steps");
}

/// get_warmup_steps: warmup_steps as a count, else (below 1, or v4's
/// warmup_ratio) a fraction of the schedule's `total` steps.
llvm::Expected<int64_t>
ArgsReader::warmupSteps(std::optional<int64_t> total) const {
  auto steps = number("warmup_steps");
  auto ratio = number("warmup_ratio");
  if (!steps || !ratio)
    return steps ? ratio.takeError() : steps.takeError();
  double ws = steps->value_or(0.0);
  if (ws >= 1)
    return static_cast<int64_t>(ws);
  double fraction = ws > 0 ? ws : ratio->value_or(0);
  if (fraction <= 0)
    return 0;
  if (!total)
    return fail(
        std::string(ws > 0 ? "\"warmup_steps\" " : "\"warmup_ratio\" ") +
        shortestNumber(fraction) + " is a fraction of max_steps, which is " +
        shown("max_steps") +
        ": set max_steps, or pass --decay-steps N (the Trainer "
        "counts them from num_train_epochs and the dataset's size, "
        "which smpc does not see)");
  return static_cast<int64_t>(
      std::ceil(static_cast<double>(*total) * fraction));
}

/// learning_rate, lr_scheduler_type (+ kwargs), warmup_steps (or v4's
/// warmup_ratio) and max_steps, as get_scheduler and get_warmup_steps use
/// them; with a DeepSpeed "scheduler", what the Trainer fills in it.
llvm::Error ArgsReader::readSchedule() {
  auto lr = number("learning_rate");
  if (!lr)
    return lr.takeError();
  double rate = lr->value_or(5e-5);
  if (!dsHas("optimizer") || dsHas("optimizer.params.lr") ||
      dsHas("scheduler.params.warmup_max_lr"))
    rule("learning_rate", shortestNumber(rate), "--lr", shortestNumber(rate));
  auto total = trainingSteps();
  if (!total)
    return total.takeError();
  if (dsHas("scheduler")) {
    if (dsHas("scheduler.params.total_num_steps") && *total)
      rule("max_steps", shown("max_steps"), "--decay-steps",
           std::to_string(**total));
    if (dsHas("scheduler.params.warmup_num_steps")) {
      auto warmup = warmupSteps(*total);
      if (!warmup)
        return warmup.takeError();
      // The Trainer fills at least 1 (DeepSpeed 0.19.6 refuses 0).
      rule("warmup_steps", std::to_string(std::max<int64_t>(1, *warmup)),
           "--warmup-steps", std::to_string(std::max<int64_t>(1, *warmup)));
    }
    return llvm::Error::success();
  }
  return readTrainerSchedule(rate, *total);
}

/// The Trainer's own schedule (get_scheduler).
llvm::Error ArgsReader::readTrainerSchedule(double rate,
                                            std::optional<int64_t> total) {
  llvm::StringRef type = text("lr_scheduler_type").value_or("linear");
  const char *kind = type == "linear"               ? "hf-linear"
                     : type == "cosine"             ? "hf-cosine"
                     : type == "cosine_with_min_lr" ? "hf-cosine"
                     : (type == "constant" || type == "constant_with_warmup")
                         ? "hf-constant"
                         : nullptr;
  if (!kind)
    return fail("\"lr_scheduler_type\": \"" + type +
                "\" is a schedule smp does not have: use \"linear\", "
                "\"cosine\", \"cosine_with_min_lr\", \"constant\" or "
                "\"constant_with_warmup\"");
  rule("lr_scheduler_type", shown("lr_scheduler_type"), "--lr-schedule", kind);
  if (llvm::Error e = readSchedulerKwargs(type, rate))
    return e;
  bool decays = type != "constant" && type != "constant_with_warmup";
  const json::Value *maxSteps = at("max_steps");
  bool fromFile = maxSteps && maxSteps->getAsNumber().value_or(-1) > 0;
  if (decays && total && fromFile)
    rule("max_steps", shown("max_steps"), "--decay-steps",
         std::to_string(*total));
  // "constant" has no warmup whatever the arguments say.
  int64_t warmup = 0;
  if (type != "constant") {
    auto w = warmupSteps(total);
    if (!w)
      return w.takeError();
    warmup = *w;
  }
  rule(!at("warmup_steps") && at("warmup_ratio") ? "warmup_ratio"
                                                 : "warmup_steps",
       std::to_string(warmup) + " steps", "--warmup-steps",
       std::to_string(warmup));
  if (decays && !total)
    notes.push_back("max_steps " + shown("max_steps") +
                    ": the schedule decays over smprun's --steps (pass "
                    "--decay-steps N to fix its length)");
  return llvm::Error::success();
}

/// get_scheduler's keyword arguments: a cosine's half cycle and floor.
llvm::Error ArgsReader::readSchedulerKwargs(llvm::StringRef type, double rate) {
  bool cosine = type == "cosine" || type == "cosine_with_min_lr";
  std::optional<double> floor;
  if (const json::Value *kv = at("lr_scheduler_kwargs")) {
    const json::Object *kw = kv->getAsObject();
    if (!kw)
      return fail("\"lr_scheduler_kwargs\" expects an object, got " +
                  shownValue(*kv));
    for (const auto &[k, v] : *kw) {
      auto d = v.getAsNumber();
      if (cosine && k == "num_cycles" && d && *d == 0.5)
        continue;
      if (type == "cosine_with_min_lr" && d && k == "min_lr_rate")
        floor = *d;
      else if (type == "cosine_with_min_lr" && d && k == "min_lr")
        floor = *d / rate;
      else
        return fail("\"lr_scheduler_kwargs\": \"" + k.str() +
                    "\": " + shownValue(v) +
                    " is not followed by smp (a cosine's "
                    "\"num_cycles\" 0.5, cosine_with_min_lr's \"min_lr\" "
                    "or \"min_lr_rate\")");
    }
  }
  if (type == "cosine_with_min_lr" && !floor)
    return fail("\"lr_scheduler_type\": \"cosine_with_min_lr\" needs "
                "\"min_lr\" or \"min_lr_rate\" in \"lr_scheduler_kwargs\" "
                "(as the Trainer does)");
  if (floor)
    rule("lr_scheduler_kwargs", shown("lr_scheduler_kwargs"), "--cos-min-ratio",
         shortestNumber(*floor));
  return llvm::Error::success();
}

/// bf16 or fp16 (torch's GradScaler with its defaults, as the Trainer's
/// accelerate runs it), else fp32.
llvm::Error ArgsReader::readPrecision() {
  bool bf16 = isTrue("bf16"), fp16 = isTrue("fp16");
  if (bf16 && fp16)
    return fail("\"bf16\" and \"fp16\" are both true (the Trainer refuses "
                "it too); set one");
  if (fp16 &&
      text("half_precision_backend") == std::optional<llvm::StringRef>("apex"))
    return fail("\"half_precision_backend\": \"apex\" scales the loss by "
                "apex's rules, which smp does not follow: use \"auto\" "
                "(torch's GradScaler)");
  const char *key = bf16 ? "bf16" : "fp16";
  std::string precision = bf16 ? "bf16" : fp16 ? "fp16" : "fp32";
  if (ds) {
    // The Trainer fills (or checks) fp16.enabled and bf16.enabled where the
    // config has them; DeepSpeed's own loss scaler runs.
    bool dsFp16 = dsHas("fp16.enabled");
    bool dsBf16 = dsHas("bf16.enabled") || dsHas("bfloat16.enabled");
    if ((fp16 && !dsFp16) || (bf16 && !dsBf16))
      return fail(std::string("\"") + key +
                  "\": true, but the DeepSpeed config has no \"" + key +
                  "\" section, so DeepSpeed would train in fp32: add \"" + key +
                  "\": {\"enabled\": \"auto\"} to it");
    if (dsFp16 || dsBf16)
      rule(key, shown(key), "--precision", precision);
    return llvm::Error::success();
  }
  rule(key, shown(key), "--precision", precision);
  if (fp16)
    rule("fp16", "true (torch's GradScaler)", "--loss-scaler", "torch");
  return llvm::Error::success();
}

/// What the Trainer does to the loss.
llvm::Error ArgsReader::readLoss() {
  auto smoothing = number("label_smoothing_factor");
  if (!smoothing)
    return smoothing.takeError();
  if (smoothing->value_or(0) != 0)
    return fail(
        "\"label_smoothing_factor\": " + shown("label_smoothing_factor") +
        " smooths the labels, which smp's losses do not: set it to 0");
  if (at("neftune_noise_alpha"))
    return fail("\"neftune_noise_alpha\": " + shown("neftune_noise_alpha") +
                " adds noise to the embeddings, which smp does not: set it "
                "to null");
  // Several ranks or micro-batches: the loss of the step.
  const json::Value *avg = root.get("average_tokens_across_devices");
  int64_t accumulate = flagInt(cli, "--microbatches").value_or(1);
  for (const ConfigItem &item : items)
    if (item.flag == "--microbatches")
      accumulate = std::stoll(item.value);
  if (avg && avg->getAsBoolean() == std::optional<bool>(false) && dp > 1)
    return fail("\"average_tokens_across_devices\": false averages each "
                "rank's mean loss, smp trains the global batch's mean: set "
                "it true (transformers 5's default)");
  if (!avg && (dp > 1 || accumulate > 1))
    notes.push_back(
        "no average_tokens_across_devices (transformers before 4.46): that "
        "Trainer averaged the micro-batches' mean losses, smp trains the "
        "global batch's mean (the same where every micro-batch counts as "
        "many labels)");
  return llvm::Error::success();
}

/// eval_strategy (v4: evaluation_strategy) "steps": the Trainer evaluates
/// every eval_steps steps (unset: logging_steps, 500 by default; below 1:
/// that fraction of max_steps, rounded up), which smprun --eval-data does
/// every --eval-every steps; "epoch" is --eval-every epoch (smprun: every
/// samples / global batch steps); the evaluation's batch is the training's.
llvm::Error ArgsReader::readEvaluation() {
  std::optional<llvm::StringRef> strategy = text("eval_strategy");
  const char *strategyKey = "eval_strategy";
  if (!strategy && (strategy = text("evaluation_strategy")))
    strategyKey = "evaluation_strategy";
  // The Trainer evaluates on start whatever the strategy.
  if (isTrue("eval_on_start"))
    rule("eval_on_start", "true", "--eval-on-start");
  if (!strategy || *strategy == "no")
    return llvm::Error::success();
  if (*strategy == "epoch") {
    rule(strategyKey, shown(strategyKey), "--eval-every", "epoch");
    return readEvalSettings();
  }
  if (*strategy != "steps")
    return fail("\"" + llvm::Twine(strategyKey) +
                "\" expects \"no\", \"steps\" or \"epoch\", got " +
                shown(strategyKey));
  const char *key = at("eval_steps") ? "eval_steps" : "logging_steps";
  auto n = number(key);
  if (!n)
    return n.takeError();
  double v = n->value_or(500);
  int64_t every = static_cast<int64_t>(v);
  if (v > 0 && v < 1) {
    auto total = trainingSteps();
    if (!total)
      return total.takeError();
    if (!*total)
      return fail("\"" + llvm::Twine(key) + "\" " + shortestNumber(v) +
                  " is a fraction of max_steps, which is " +
                  shown("max_steps") +
                  ": set max_steps, or give the steps between evaluations");
    every = static_cast<int64_t>(std::ceil(static_cast<double>(**total) * v));
  } else if (v < 1 || v != std::floor(v)) {
    return fail("\"" + llvm::Twine(key) +
                "\" expects a positive number of "
                "steps (or a fraction of max_steps below 1), got " +
                shown(key));
  }
  rule(key, at(key) ? shown(key) : "500 (the default)", "--eval-every",
       std::to_string(every), at(key) != nullptr);
  return readEvalSettings();
}

/// eval_delay (steps, or epochs with eval_strategy "epoch": no evaluation
/// before) is --eval-delay, per_device_eval_batch_size --eval-batch-size
/// (where it is not the global training batch).
llvm::Error ArgsReader::readEvalSettings() {
  auto delay = number("eval_delay");
  if (!delay)
    return delay.takeError();
  if (delay->value_or(0) < 0)
    return fail("\"eval_delay\" expects a non-negative number, got " +
                shown("eval_delay"));
  if (delay->value_or(0) > 0)
    rule("eval_delay", shown("eval_delay"), "--eval-delay",
         shortestNumber(**delay));
  // Each process evaluates batches of per_device_eval_batch_size, whatever
  // the training's accumulation; under DDP the processes' concurrent
  // batches are one batch, whose loss is the mean over all their counted
  // labels (transformers 5, average_tokens_across_devices: ddp_eval).
  const char *kE = at("per_gpu_eval_batch_size") ? "per_gpu_eval_batch_size"
                                                 : "per_device_eval_batch_size";
  auto perDevice = number(kE);
  if (!perDevice)
    return perDevice.takeError();
  double e = perDevice->value_or(8);
  if (e < 1 || e != std::floor(e))
    return fail("\"" + llvm::Twine(kE) + "\" expects a positive integer, got " +
                shown(kE));
  int64_t evalBatch = static_cast<int64_t>(e) * dp;
  if (evalBatch != globalBatch)
    rule(kE, shown(kE) + " (x dp " + std::to_string(dp) + ")",
         "--eval-batch-size", std::to_string(evalBatch), at(kE) != nullptr);
  return llvm::Error::success();
}

llvm::Error ArgsReader::read() {
  for (auto step : {&ArgsReader::readKeys, &ArgsReader::readBatch,
                    &ArgsReader::readOptimizer, &ArgsReader::readSchedule,
                    &ArgsReader::readPrecision, &ArgsReader::readLoss,
                    &ArgsReader::readEvaluation})
    if (llvm::Error e = (this->*step)())
      return e;
  // The data's order and dropout's masks are smprun's.
  bool shuffles = !text("train_sampling_strategy") ||
                  *text("train_sampling_strategy") != "sequential";
  if (shuffles || isTrue("group_by_length"))
    notes.push_back("seed " + shown("seed") + ", train_sampling_strategy " +
                    shown("train_sampling_strategy") +
                    ": the Trainer draws the batches from its shuffled "
                    "dataset, smprun reads --data in its order (shuffle the "
                    "data to train on the same batches)");
  return llvm::Error::success();
}

} // namespace

llvm::Expected<std::vector<std::string>>
trainingArgsFlags(llvm::StringRef text, llvm::StringRef origin,
                  const std::vector<std::string> &commandLine,
                  std::vector<std::string> &warnings) {
  auto parsed = parseJsonObject(
      text, origin, "a JSON object (TrainingArguments.to_json_string())");
  if (!parsed)
    return parsed.takeError();
  const json::Object *root = parsed->getAsObject();
  ArgsReader reader(*root, origin, commandLine);
  if (llvm::Error e = reader.read())
    return std::move(e);
  for (const std::string &note : reader.notes)
    warnings.push_back(origin.str() + ": " + note);
  auto tokens = configItemTokens(reader.items, origin, commandLine,
                                 "on the command line (or in --config)");
  if (tokens && !reader.passOn.empty())
    tokens->insert(tokens->end(), {"--deepspeed", reader.passOn});
  return tokens;
}

llvm::Error expandTrainingArgs(std::vector<std::string> &args,
                               std::vector<std::string> &warnings) {
  return expandFileFlag(args, "--training-args", "TrainingArguments file",
                        [&](llvm::StringRef text, llvm::StringRef path,
                            const std::vector<std::string> &rest) {
                          return trainingArgsFlags(text, path, rest, warnings);
                        });
}
