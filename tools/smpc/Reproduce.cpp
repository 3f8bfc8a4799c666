//===- Reproduce.cpp - The smpc command that reproduces a plan ------------===//

#include "Reproduce.h"

#include "llvm/ADT/StringRef.h"

#include <cctype>
#include <set>
#include <vector>

namespace {

std::string shellQuote(const std::string &arg) {
  bool plain = !arg.empty();
  for (char c : arg)
    plain &= std::isalnum(static_cast<unsigned char>(c)) ||
             llvm::StringRef("-_./=:,@%+").contains(c);
  if (plain)
    return arg;
  std::string out = "'";
  for (char c : arg)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

} // namespace

std::string reproducingCommand(const Options &opts) {
  // The planner's flags (with their values) give way to its choice.
  static const std::set<std::string> kPlannerFlags = {
      "--devices",         "--cluster",      "--optimize",
      "--microbatch-size", "--global-batch", "--checkpoint-activations",
      "--max-plans"};
  static const std::set<std::string> kPlannerSwitches = {
      "--no-shard-optimizer-state", "--no-memory-plan"};
  std::vector<std::string> args;
  std::set<std::string> given;
  for (size_t i = 0; i < opts.argv.size(); ++i) {
    std::string a = opts.argv[i];
    std::string flag = a.substr(0, a.find('='));
    if (opts.autoPlan && kPlannerFlags.count(flag)) {
      if (a.find('=') == std::string::npos)
        ++i; // its value
      continue;
    }
    if (opts.autoPlan && kPlannerSwitches.count(a))
      continue;
    given.insert(flag);
    args.push_back(a);
  }
  if (opts.autoPlan) {
    const auto &p = opts.plan;
    auto pin = [&](const std::string &flag, const std::string &value) {
      if (given.insert(flag).second) {
        args.push_back(flag);
        if (!value.empty())
          args.push_back(value);
      }
    };
    pin("--dp", std::to_string(p.dp));
    pin("--tp", std::to_string(p.tp));
    pin("--pp", std::to_string(p.pp));
    pin("--microbatches", std::to_string(p.microbatches));
    if (p.pp > 1)
      pin("--schedule", p.schedule);
    if (p.virtualStages > 1)
      pin("--virtual-stages", std::to_string(p.virtualStages));
    if (!opts.ppCuts.empty())
      pin("--pp-cuts", opts.ppCuts);
    if (p.zeroStage > 0 && !given.count("--shard-optimizer-state"))
      pin("--zero-stage", std::to_string(p.zeroStage));
    if (p.zeroStage > 0 && p.shardedDp > 0 && p.shardedDp < p.dp)
      pin("--sharded-dp", std::to_string(p.shardedDp));
    if (p.sequenceParallel)
      pin("--sequence-parallel", "");
    if (p.recompute != "none" && p.recomputeStages.empty())
      pin("--checkpoint-activations", p.recompute);
    if (!p.recomputeStages.empty()) {
      // Recomputation of some stages only: the planner decides it again
      // for the pinned degrees (the same choice).
      pin("--devices", std::to_string(opts.devices));
      pin("--cluster", opts.cluster);
      pin("--checkpoint-activations", "auto");
    }
    if (p.offload)
      pin("--offload-activations", "");
  }
  std::string out = "smpc";
  for (const std::string &a : args)
    out += " " + shellQuote(a);
  return out;
}
