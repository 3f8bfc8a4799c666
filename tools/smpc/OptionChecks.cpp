//===- OptionChecks.cpp - smpc's refusals of flag combinations ------------===//
//
// Flags that would have no effect, or another effect than they say, in a
// command line are refused with one line that says why (Options.h).
//
//===----------------------------------------------------------------------===//

#include "Options.h"

#include "smp/base/LrSchedules.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Regex.h"

#include <algorithm>
#include <string>

bool plannerChooses(const Options &opts) {
  const Options::Pinned &p = opts.pinned;
  return opts.devices > 1 && ((!p.dp && !p.tp && !p.pp && !p.microbatches) ||
                              p.recompute == "auto");
}

namespace {

/// The schedule's flags, each of which applies to some --lr-schedule kinds.
std::optional<int> checkScheduleFlags(const Options &opts) {
  auto has = [&](const char *f) { return opts.given.count(f) != 0; };
  const std::string &k = opts.lrSchedule;
  bool deepSpeed = smp::base::isDeepSpeedSchedule(k);
  if (has("--decay-steps") && !smp::base::scheduleDecays(k))
    return fail(
        "--decay-steps applies to --lr-schedule cosine, "
        "warmup-decay-lr, warmup-cosine-lr, hf-linear and hf-cosine "
        "(" +
        std::string(k == "warmup-lr" ? "warmup-lr" : "a constant rate") +
        " does not decay)");
  if (has("--warmup-type") && !deepSpeed)
    return fail("--warmup-type applies to DeepSpeed's schedules (--lr-schedule "
                "warmup-lr, warmup-decay-lr, warmup-cosine-lr); " +
                k + " warms up linearly");
  if (has("--warmup-min-lr") && k != "warmup-lr" && k != "warmup-decay-lr")
    return fail("--warmup-min-lr applies to --lr-schedule warmup-lr and "
                "warmup-decay-lr" +
                std::string(k == "warmup-cosine-lr"
                                ? " (warmup-cosine-lr starts at "
                                  "--warmup-min-ratio x --lr)"
                                : ""));
  if (has("--warmup-min-ratio") && k != "warmup-cosine-lr")
    return fail("--warmup-min-ratio applies to --lr-schedule "
                "warmup-cosine-lr");
  if (has("--cos-min-ratio") && !smp::base::scheduleHasCosineFloor(k))
    return fail("--cos-min-ratio applies to --lr-schedule warmup-cosine-lr "
                "and hf-cosine");
  // DeepSpeed's and Hugging Face's schedules take any length (after a
  // warmup longer than it they stay at their floor), as they do.
  if (has("--decay-steps") && !deepSpeed &&
      !smp::base::isHuggingFaceSchedule(k) &&
      opts.decaySteps <= opts.warmupSteps)
    return fail("--decay-steps " + std::to_string(opts.decaySteps) +
                " leaves no steps to decay over after --warmup-steps " +
                std::to_string(opts.warmupSteps) +
                "; give more --decay-steps than --warmup-steps");
  return std::nullopt;
}

/// Flags naming parameters that say opposite things of one: --tie and
/// --untie, --trainable and --freeze (whose regex matches anywhere in a
/// name, as BuildGradients reads it).
std::optional<int> checkParameterFlags(const Options &opts) {
  const auto &imp = opts.import;
  for (const std::string &n : imp.tie)
    if (llvm::is_contained(imp.untie, n))
      return fail("--tie " + n + " and --untie " + n +
                  " contradict each other (keep it shared, or train the "
                  "copies apart); give one");
  if (opts.plan.freeze.empty() || !opts.given.count("--freeze"))
    return std::nullopt;
  llvm::Regex frozen(opts.plan.freeze);
  for (const std::string &n : imp.trainable)
    if (frozen.isValid() && frozen.match(n))
      return fail("--trainable " + n + " and --freeze '" + opts.plan.freeze +
                  "' (which matches it) contradict each other; give one");
  return std::nullopt;
}

/// The optimizer's, clipping's, schedule's and weight-decay groups' flags.
std::optional<int> checkOptimizerFlags(const Options &opts) {
  auto has = [&](const char *f) { return opts.given.count(f) != 0; };
  auto num = [&](const char *f) {
    auto it = opts.numbers.find(f);
    return it == opts.numbers.end() ? 0.0 : it->second;
  };
  bool sgd = opts.plan.optimizer == "sgd";
  for (const char *f : {"--momentum", "--dampening", "--nesterov"})
    if (has(f) && !sgd)
      return fail(std::string(f) + " applies to --optimizer sgd, not " +
                  opts.plan.optimizer +
                  " (Adam's moments are --beta1/--beta2)");
  for (const char *f : {"--beta1", "--beta2", "--eps"})
    if (has(f) && sgd)
      return fail(std::string(f) + " applies to --optimizer adam or adamw, "
                                   "not sgd");
  for (const char *f : {"beta1", "beta2"})
    if (opts.numbers.count(f) && num(f) >= 1)
      return fail(std::string("--") + f + " must be in [0, 1), got " +
                  std::to_string(num(f)));
  if (has("--nesterov") && (num("momentum") <= 0 || num("dampening") != 0))
    return fail("--nesterov needs --momentum > 0 and no --dampening (as "
                "torch.optim.SGD requires)");
  if (has("--clip-grad-norm") && num("clip-grad-norm") <= 0)
    return fail("--clip-grad-norm 0 would zero every gradient (as "
                "clip_grad_norm_ does); leave the flag out for no clipping");
  if (auto e = checkScheduleFlags(opts))
    return e;
  if (has("--hf-no-decay") && has("--no-decay"))
    return fail("--hf-no-decay and --no-decay both say which parameters get "
                "no weight decay; give one");
  bool decays = opts.numbers.count("weight-decay")
                    ? num("weight-decay") > 0
                    : opts.plan.optimizer == "adamw";
  if (has("--hf-no-decay") && !decays)
    return fail("--hf-no-decay changes nothing: the weight decay is 0 (pass "
                "--weight-decay X, or leave the flag out)");
  return std::nullopt;
}

} // namespace

std::optional<int> checkFlagCombinations(const Options &opts) {
  auto has = [&](const char *f) { return opts.given.count(f) != 0; };
  auto num = [&](const char *f) {
    auto it = opts.numbers.find(f);
    return it == opts.numbers.end() ? 0.0 : it->second;
  };
  bool compile = opts.command == "compile", plan = opts.command == "plan";
  bool training = compile && opts.train;
  static const char *kTrainingOnly[] = {"--lr",
                                        "--lr-schedule",
                                        "--warmup-steps",
                                        "--decay-steps",
                                        "--eval-every",
                                        "--eval-delay",
                                        "--eval-on-start",
                                        "--shift-labels",
                                        "--eval-accuracy",
                                        "--eval-batch-size",
                                        "--eval-metrics",
                                        "--eval-predictions",
                                        "--eval-logits",
                                        "--warmup-type",
                                        "--warmup-min-lr",
                                        "--warmup-min-ratio",
                                        "--cos-min-ratio",
                                        "--momentum",
                                        "--dampening",
                                        "--nesterov",
                                        "--weight-decay",
                                        "--beta1",
                                        "--beta2",
                                        "--eps",
                                        "--clip-grad-norm",
                                        "--freeze",
                                        "--no-decay",
                                        "--hf-no-decay",
                                        "--loss-scale",
                                        "--loss-scale-window",
                                        "--loss-scale-hysteresis",
                                        "--consecutive-hysteresis",
                                        "--loss-scaler",
                                        "--min-loss-scale",
                                        "--bucket-mb",
                                        "--gather-prefetch",
                                        "--sharded-dp",
                                        "--sequence-parallel",
                                        "--no-sequence-parallel",
                                        "--activation-loading-horizon",
                                        "--offload-activations",
                                        "--checkpoint-activations",
                                        "--shard-optimizer-state",
                                        "--no-shard-optimizer-state",
                                        "--zero-stage",
                                        "--placement",
                                        "--pp-cuts",
                                        "--virtual-stages",
                                        "--schedule",
                                        "--microbatches",
                                        "--bn-stats",
                                        "--no-pad-vocab",
                                        "--no-gelu-epilogue",
                                        "--dgelu-epilogue",
                                        "--no-bias-grad-epilogue",
                                        "--no-residual-epilogue",
                                        "--no-fuse-loss-grad",
                                        "--trainable",
                                        "--master-weights"};
  for (const char *f : kTrainingOnly)
    if (has(f) && !training && !plan)
      return fail(std::string(f) + " applies to training (smpc compile "
                                   "--train)");
  if (!compile && !plan)
    for (const char *f : {"--loss", "--optimizer", "--precision", "--dp",
                          "--tp", "--pp", "--devices"})
      if (has(f))
        return fail(std::string(f) + " applies to smpc compile --train and "
                                     "smpc plan");
  for (const char *f :
       {"--global-batch", "--json", "--report", "--no-memory-plan"})
    if (has(f) && !plan)
      return fail(std::string(f) + " applies to smpc plan" +
                  (std::string(f) == "--global-batch"
                       ? "; smpc compile takes the global batch as --batch-size"
                       : ""));
  // Sequence parallelism needs tp > 1: pinned to 1, or left at 1 where no
  // planner chooses it.
  if (opts.pinned.sequenceParallel.value_or(false) &&
      opts.pinned.tp.value_or(plan || plannerChooses(opts) ? 0 : 1) == 1)
    return fail("--sequence-parallel splits the tokens between the "
                "tensor-parallel layers over the --tp ranks: it needs "
                "--tp > 1");
  if (auto e = checkParameterFlags(opts))
    return e;
  if (!training)
    return std::nullopt;
  if (auto e = checkOptimizerFlags(opts))
    return e;
  for (const char *f :
       {"--loss-scale", "--loss-scale-window", "--loss-scale-hysteresis",
        "--consecutive-hysteresis", "--min-loss-scale", "--loss-scaler"})
    if (has(f) && opts.plan.precision != "fp16")
      return fail(std::string(f) + " applies to --precision fp16 (bf16 and "
                                   "fp32 train without loss scaling)");
  for (const char *f : {"--loss-scale-hysteresis", "--consecutive-hysteresis",
                        "--min-loss-scale"})
    if (has(f) && !opts.plan.deepspeedWindow)
      return fail(std::string(f) + " is a setting of DeepSpeed's loss scaler: "
                                   "it needs --loss-scaler deepspeed");
  if (has("--consecutive-hysteresis") && opts.plan.hysteresis < 2)
    return fail("--consecutive-hysteresis changes when the hysteresis count "
                "resets: it needs --loss-scale-hysteresis 2 or more");
  if (has("--min-loss-scale") && num("min-loss-scale") <= 0)
    return fail("--min-loss-scale must be positive");
  if (has("--loss-scale") && num("loss-scale") <= 0)
    return fail("--loss-scale must be positive");
  bool planned = plannerChooses(opts);
  if (opts.pinned.recompute == "auto" && opts.devices <= 1)
    return fail("--checkpoint-activations auto lets the planner choose, "
                "which needs --devices N");
  if (has("--cluster") && !planned && !has("--profile-db"))
    return fail("--cluster is read by the planner (--devices N without "
                "pinned degrees) or with --profile-db; this compile uses "
                "neither");
  if (has("--optimize") && !planned && !plan)
    return fail("--optimize is what the planner optimises (smpc plan, or "
                "compile --devices N without pinned degrees); this compile "
                "has its plan pinned");
  if (has("--max-plans") && !(compile && planned))
    return fail("--max-plans is how many plans compile --devices N (without "
                "pinned degrees) tries; this command does not plan a "
                "compile");
  if (has("--microbatch-size") && !planned)
    return fail("--microbatch-size is read by the planner (--devices N "
                "without pinned degrees); pinned plans take --microbatches");
  if (has("--activation-loading-horizon") && !opts.pinned.offload && !planned)
    return fail("--activation-loading-horizon applies to "
                "--offload-activations");
  if (has("--dgelu-epilogue") && has("--no-gelu-epilogue"))
    return fail("--dgelu-epilogue moves the GELUs' gradients into the "
                "products' epilogues and --no-gelu-epilogue keeps every "
                "GELU out of them: pass one of the two");
  return std::nullopt;
}

std::optional<int> checkDegreeFlags(const Options &opts) {
  if (!opts.train || opts.command != "compile")
    return std::nullopt;
  if (opts.given.count("--schedule") && opts.plan.pp == 1)
    return fail("--schedule applies to pipelines (--pp > 1)");
  if (opts.plan.sequenceParallel && opts.plan.tp == 1)
    return fail("--sequence-parallel splits the tokens between the "
                "tensor-parallel layers over the --tp ranks: it needs "
                "--tp > 1");
  if (opts.given.count("--bucket-mb") && opts.plan.dp == 1)
    return fail("--bucket-mb applies to data parallelism (--dp > 1)");
  if (opts.plan.bnStats == "replica" && opts.plan.dp == 1)
    return fail("--bn-stats replica applies to data parallelism (--dp > 1): "
                "with one replica its statistics are the batch's");
  return std::nullopt;
}
