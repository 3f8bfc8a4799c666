//===- DeepSpeedReader.h - smpc --deepspeed: the reader's parts -*- C++ -*-===//
//
// The reader of a DeepSpeed config, shared by DeepSpeedConfig.cpp (batch
// sizes, top-level keys) and DeepSpeedTraining.cpp (optimizer, scheduler,
// precision, ZeRO). Internal to smpc.
//
//===----------------------------------------------------------------------===//

#ifndef SMPC_DEEPSPEEDREADER_H
#define SMPC_DEEPSPEEDREADER_H

#include "ConfigFile.h"

#include "llvm/Support/JSON.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace smpc::deepspeed {

namespace json = llvm::json;

/// A JSON value as written ("0.1", "[0.9, 0.95]", "\"auto\"").
std::string shown(const json::Value &v);
/// The shortest text that reads back as `v`.
std::string number(double v);
/// Whether `key` of zero_optimization only tunes how ZeRO runs.
bool zeroTuningKey(llvm::StringRef key);

/// Reads one file's keys into items.
class Reader {
public:
  Reader(llvm::StringRef origin, const std::vector<std::string> &commandLine)
      : origin(origin), cli(commandLineFlags(commandLine)) {}

  /// Reads `root`, whose "auto" values resolveAuto fills in first.
  llvm::Error read(json::Object &root);

  std::vector<ConfigItem> items;
  std::vector<std::string> tuning; // keys listed in the warning
  /// "auto" values filled with the Hugging Face Trainer's defaults (no
  /// flag on the command line gave them), for the warning.
  std::vector<std::string> trainerDefaults;

private:
  llvm::Error fail(const llvm::Twine &msg) const {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   origin + ": " + msg);
  }
  llvm::Error expects(llvm::StringRef key, const json::Value &v,
                      const char *what) const {
    return fail("\"" + key + "\" expects " + what + ", got " + shown(v));
  }
  void set(llvm::StringRef key, const json::Value &v, const char *flag,
           std::string value = "") {
    items.push_back(ConfigItem{key.str(), shown(v), flag, std::move(value)});
  }
  /// A number ≥ 0 (`positive`: > 0) at `key` of `o`, if present.
  llvm::Expected<std::optional<double>> numberAt(const json::Object &o,
                                                 llvm::StringRef key,
                                                 llvm::StringRef path,
                                                 bool positive = false) const;
  /// A positive integer at `key` of `o`, if present.
  llvm::Expected<std::optional<int64_t>> countAt(const json::Object &o,
                                                 llvm::StringRef key) const;
  /// The data-parallel degree the rest of the command line fixes, if any
  /// (none: the planner chooses it); `given` is false where it is 1 only
  /// because nothing says otherwise.
  std::optional<int64_t> knownDp(bool &given) const;

  llvm::Error readBatch(const json::Object &root);
  /// {"type": T, "params": {...}} at `key` (also allowing `extra`).
  llvm::Expected<std::pair<llvm::StringRef, const json::Object *>>
  typeAndParams(llvm::StringRef key, const json::Value &v,
                llvm::StringRef extra = "") const;
  llvm::Error readOptimizer(const json::Value &v);
  llvm::Error readScheduler(const json::Value &v);
  llvm::Error readPrecision(const json::Object &root);
  llvm::Error readFp16(const json::Object &fp16);
  llvm::Error readZero(const json::Value &v);
  llvm::Error readOther(llvm::StringRef key, const json::Value &v);
  /// The Hugging Face Trainer's "auto" values: what it would fill them
  /// with from its arguments, which are smpc's flags here (DeepSpeedAuto.cpp).
  llvm::Error resolveAuto(json::Object &root);
  /// scheduler.params.total_num_steps was "auto": the run's --steps.
  bool autoTotalSteps = false;

  std::string origin;
  std::multimap<std::string, std::string> cli;
  bool fp32 = true;             // neither fp16 nor bf16 enabled
  bool schedulerSetsLr = false; // WarmupLR, WarmupDecayLR
  int64_t zeroStage = 0;
  std::optional<int64_t> dp; // readBatch's data-parallel degree (none: planned)
};

} // namespace smpc::deepspeed

#endif // SMPC_DEEPSPEEDREADER_H
