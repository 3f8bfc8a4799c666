//===- DeepSpeedAuto.cpp - smpc --deepspeed: the Trainer's "auto" values -===//
//
// A DeepSpeed config written for the Hugging Face Trainer says "auto" where
// the Trainer fills in a value from its TrainingArguments
// (transformers.integrations.deepspeed, HfTrainerDeepSpeedConfig). smpc's
// flags play those arguments: each "auto" takes the flag's value, or where
// the command line does not give it the Trainer's default for the argument
// (listed in a warning), so that the file trains what the Trainer would have
// trained with it. An "auto" smpc has no flag for is refused.
//
//===----------------------------------------------------------------------===//

#include "DeepSpeedReader.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"

using namespace smpc::deepspeed;

namespace {

/// The paths (a.b.c) of the members of `o` whose value is "auto".
void autoPaths(const json::Object &o, const std::string &prefix,
               std::vector<std::string> &out) {
  std::vector<std::string> keys;
  for (const auto &kv : o)
    keys.push_back(kv.first.str());
  llvm::sort(keys);
  for (const std::string &k : keys) {
    const json::Value &v = *o.get(k);
    std::string path = prefix.empty() ? k : prefix + "." + k;
    if (v.getAsString() == std::optional<llvm::StringRef>("auto"))
      out.push_back(path);
    else if (const json::Object *child = v.getAsObject())
      autoPaths(*child, path, out);
  }
}

/// The object holding `path`'s last key (set in `key`).
json::Object *parentOf(json::Object &root, llvm::StringRef path,
                       std::string &key) {
  llvm::SmallVector<llvm::StringRef> parts;
  path.split(parts, '.');
  json::Object *o = &root;
  for (size_t i = 0; o && i + 1 < parts.size(); ++i)
    o = o->getObject(parts[i]);
  key = parts.back().str();
  return o;
}

} // namespace

llvm::Error Reader::resolveAuto(json::Object &root) {
  std::vector<std::string> paths, unknown;
  autoPaths(root, "", paths);
  for (const std::string &path : paths) {
    std::string key;
    json::Object *parent = parentOf(root, path, key);
    llvm::StringRef p(path);
    auto cliText = [&](const char *flag) -> std::optional<std::string> {
      auto it = cli.find(flag);
      return it == cli.end() ? std::nullopt : std::optional(it->second);
    };
    auto cliNumber = [&](const char *flag) -> std::optional<double> {
      double d;
      auto text = cliText(flag);
      if (!text || llvm::StringRef(*text).getAsDouble(d))
        return std::nullopt;
      return d;
    };
    // The flag's value, else the Trainer's default (noted).
    auto fill = [&](const char *flag, double trainerDefault) {
      if (auto d = cliNumber(flag))
        return json::Value(*d);
      trainerDefaults.push_back(path + " " + number(trainerDefault) + " (" +
                                flag + ")");
      return json::Value(trainerDefault);
    };
    if (p.starts_with("zero_optimization.") && zeroTuningKey(key)) {
      (*parent)[key] = nullptr; // sizes from the model's width: ignored
    } else if (p == "train_micro_batch_size_per_gpu") {
      parent->erase(key); // derived from the others
    } else if (p == "train_batch_size" || p == "gradient_accumulation_steps" ||
               p == "scheduler.params.total_num_steps") {
      // The global batch, the accumulation steps and the schedule's length
      // come from --batch-size, --microbatches and --decay-steps, else are
      // derived (the batch from the rest of the file, the length from
      // smprun's --steps: the Trainer's max_steps).
      const char *flag = p == "train_batch_size"              ? "--batch-size"
                         : p == "gradient_accumulation_steps" ? "--microbatches"
                                                              : "--decay-steps";
      int64_t n;
      auto text = cliText(flag);
      if (text && !llvm::StringRef(*text).getAsInteger(10, n))
        (*parent)[key] = n;
      else
        parent->erase(key);
      autoTotalSteps |= p == "scheduler.params.total_num_steps";
    } else if (p == "gradient_clipping") {
      (*parent)[key] = fill("--clip-grad-norm", 1.0); // max_grad_norm
    } else if (p == "optimizer.params.lr" ||
               p == "scheduler.params.warmup_max_lr") {
      (*parent)[key] = fill("--lr", 5e-5); // learning_rate
    } else if (p == "optimizer.params.betas") {
      json::Value b1 = fill("--beta1", 0.9), b2 = fill("--beta2", 0.999);
      (*parent)[key] = json::Array{std::move(b1), std::move(b2)};
    } else if (p == "optimizer.params.eps") {
      (*parent)[key] = fill("--eps", 1e-8); // adam_epsilon
    } else if (p == "optimizer.params.weight_decay") {
      (*parent)[key] = fill("--weight-decay", 0.0);
    } else if (p == "scheduler.params.warmup_min_lr") {
      (*parent)[key] = fill("--warmup-min-lr", 0.0); // the Trainer's 0
    } else if (p == "scheduler.params.warmup_num_steps") {
      (*parent)[key] = fill("--warmup-steps", 0.0); // warmup_steps
    } else if (p == "fp16.enabled" || p == "bf16.enabled" ||
               p == "bfloat16.enabled") {
      auto precision = cliText("--precision");
      if (!precision)
        trainerDefaults.push_back(path + " false (--precision)");
      (*parent)[key] =
          precision && *precision == (p.starts_with("fp16") ? "fp16" : "bf16");
    } else {
      unknown.push_back(path);
    }
  }
  // Neither batch key left: the Trainer computes it from its arguments.
  if (llvm::is_contained(paths, "train_batch_size") &&
      !root.get("train_batch_size") &&
      !root.get("train_micro_batch_size_per_gpu"))
    return fail("\"train_batch_size\" is \"auto\" (the Hugging Face "
                "Trainer's per_device_train_batch_size x "
                "gradient_accumulation_steps x ranks): give the global batch "
                "as --batch-size");
  if (!unknown.empty())
    return fail("\"auto\" at " + llvm::join(unknown, ", ") +
                ": the Hugging Face Trainer fills it in from arguments smpc "
                "has no flag for; write the value");
  return llvm::Error::success();
}
