//===- Resume.cpp - What a checkpoint must agree on to resume -------------===//

#include "smprt/train/Resume.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <map>

namespace smprt {

std::vector<ParamSpec> artifactParameters(const Artifact &artifact) {
  std::vector<ParamSpec> out;
  for (const auto &p : artifact.manifest.parameters())
    out.push_back({p.name(), p.dtype(), {p.shape().begin(), p.shape().end()}});
  std::sort(out.begin(), out.end(),
            [](const ParamSpec &a, const ParamSpec &b) { return a.name < b.name; });
  return out;
}

uint64_t modelFingerprint(const std::vector<ParamSpec> &params) {
  std::string text;
  for (const ParamSpec &p : params) {
    text += p.name;
    text += '\0';
    text += describeParam(p.dtype, p.shape);
    text += '\n';
  }
  return checksum64(text.data(), text.size());
}

std::string describeParam(uint32_t dtype, const std::vector<int64_t> &shape) {
  std::string s = dtype <= static_cast<uint32_t>(DType::U64)
                      ? dtypeName(static_cast<DType>(dtype))
                      : "dtype" + std::to_string(dtype);
  s += "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

RunRecord runRecordOf(const Artifact &artifact) {
  const auto &m = artifact.manifest;
  RunRecord r;
  r.optimizer = m.training().optimizer_spec();
  if (r.optimizer.empty()) // an artifact of an smpc before the spec
    r.optimizer = m.training().optimizer();
  // The global batch: a data input's leading dim (this rank's share) times
  // the data-parallel shares (as the trainer reads them).
  int64_t shards = artifact.program.data_shards() ? artifact.program.data_shards()
                                                  : std::max(1u, m.num_ranks());
  for (const auto &in : m.inputs())
    if (!in.name().empty() && in.name()[0] != '@' && in.shape_size() > 0) {
      r.globalBatch = in.shape(0) * shards;
      break;
    }
  r.microbatches = m.training().microbatches();
  r.modelFingerprint = modelFingerprint(artifactParameters(artifact));
  r.plan = "dp=" + std::to_string(std::max(1u, m.dp())) +
           " tp=" + std::to_string(std::max(1u, m.tp())) +
           " pp=" + std::to_string(std::max(1u, m.pp()));
  if (m.pp() > 1 && !m.schedule().empty()) // "1f1b pp=2 microbatches=4 ..."
    r.plan += " " + m.schedule().substr(0, m.schedule().find(' '));
  if (char *abs = ::realpath(artifact.dir.c_str(), nullptr)) {
    r.artifact = abs;
    std::free(abs);
  } else {
    r.artifact = artifact.dir;
  }
  return r;
}

void setRunRecord(const RunRecord &r, smp::artifact::Checkpoint &index) {
  index.set_optimizer_spec(r.optimizer);
  index.set_global_batch(r.globalBatch);
  index.set_microbatches(r.microbatches);
  index.set_model_fingerprint(r.modelFingerprint);
  index.set_plan(r.plan);
  index.set_optimizer_start_step(r.optimizerStartStep);
  index.set_data_start_step(r.dataStartStep);
  index.set_artifact(r.artifact);
  if (r.schedule)
    *index.mutable_lr_schedule() = *r.schedule;
}

RunRecord runRecordFrom(const smp::artifact::Checkpoint &index) {
  RunRecord r;
  r.optimizer = index.optimizer_spec();
  r.globalBatch = index.global_batch();
  r.microbatches = index.microbatches();
  r.modelFingerprint = index.model_fingerprint();
  r.plan = index.plan();
  r.optimizerStartStep = index.optimizer_start_step();
  r.dataStartStep = index.data_start_step();
  r.artifact = index.artifact();
  if (index.has_lr_schedule())
    r.schedule = index.lr_schedule();
  return r;
}

bool isOptimizerState(const std::string &name) {
  // The loss scaler's: @loss_scale, @loss_scale_overflows, @growth_tracker.
  return name.rfind("@loss_scale", 0) != 0 && name != "@growth_tracker";
}

std::string ResumeInfo::summary() const {
  std::string s = "resumed from " + checkpoint + " (step " +
                  std::to_string(step) + " of " + std::to_string(totalSteps) +
                  "; written by " + std::to_string(numRanks) + " rank" +
                  (numRanks == 1 ? "" : "s");
  if (!written.plan.empty())
    s += ", " + written.plan;
  if (written.microbatches)
    s += ", " + std::to_string(written.microbatches) + " micro-batch" +
         (written.microbatches == 1 ? "" : "es");
  if (!written.optimizer.empty())
    s += ", " + written.optimizer;
  if (written.globalBatch)
    s += ", global batch " + std::to_string(written.globalBatch);
  s += ")";
  if (resetOptimizer)
    s += "; optimizer state reset";
  if (resetData)
    s += "; data restarted at sample 0";
  return s;
}

std::string modelDifference(const std::vector<ParamSpec> &ckpt,
                            const std::vector<ParamSpec> &mine,
                            const std::string &model, size_t &count) {
  std::map<std::string, const ParamSpec *> theirs, ours;
  for (const ParamSpec &p : ckpt)
    theirs[p.name] = &p;
  for (const ParamSpec &p : mine)
    ours[p.name] = &p;
  std::string first;
  count = 0;
  auto note = [&](const std::string &what) {
    if (count++ == 0)
      first = what;
  };
  for (const auto &[name, p] : theirs) {
    auto it = ours.find(name);
    if (it == ours.end())
      note("the checkpoint has parameter '" + name + "' (" +
           describeParam(p->dtype, p->shape) + ") that " + model +
           " does not");
    else if (it->second->dtype != p->dtype || it->second->shape != p->shape)
      note("parameter '" + name + "' is " + describeParam(p->dtype, p->shape) +
           " in the checkpoint but " +
           describeParam(it->second->dtype, it->second->shape) + " in " +
           model);
  }
  for (const auto &[name, p] : ours)
    if (!theirs.count(name))
      note(model + " has parameter '" + name + "' (" +
           describeParam(p->dtype, p->shape) + ") that the checkpoint does not");
  return first;
}

Status checkResume(const Artifact &artifact, const std::vector<ParamSpec> &params,
                   const ResumeOptions &options, ResumeInfo &info) {
  const std::string &ck = info.checkpoint;
  const std::string &model = artifact.dir;
  RunRecord mine = runRecordOf(artifact);
  const RunRecord &theirs = info.written;
  // The model: parameter names, dtypes and global shapes (the checkpoint's
  // own tensors say what its model was, whatever wrote it).
  std::vector<ParamSpec> ours = artifactParameters(artifact);
  if (ours.empty()) {
    info.warnings.push_back(model + " lists no parameters (compiled by an "
                                    "older smpc): the checkpoint's model "
                                    "could only be checked tensor by tensor");
  } else {
    size_t count = 0;
    std::string diff = modelDifference(params, ours, model, count);
    if (!diff.empty())
      return Status::failure(
          ck + ": written for another model: " + diff +
          (count > 1 ? " (and " + std::to_string(count - 1) + " more)" : "") +
          "; a checkpoint resumes only the model that wrote it" +
          (theirs.artifact.empty() ? "" : " (" + theirs.artifact + ")"));
  }
  info.resumed = mine;
  info.resumed.optimizerStartStep = theirs.optimizerStartStep;
  info.resumed.dataStartStep = theirs.dataStartStep;
  std::vector<std::string> unchecked;
  // The optimizer: its kind and hyper-parameters (the state's meaning).
  if (theirs.optimizer.empty()) {
    unchecked.push_back("optimizer");
  } else if (theirs.optimizer != mine.optimizer && !options.resetOptimizer) {
    return Status::failure(
        ck + ": the checkpoint's optimizer is " + theirs.optimizer + " but " +
        model + " trains with " + mine.optimizer +
        "; pass --reset-optimizer to start fresh optimizer state at step " +
        std::to_string(info.step) + ", or resume with an artifact compiled "
        "with the checkpoint's optimizer");
  }
  if (options.resetOptimizer) {
    info.resetOptimizer = true;
    info.resumed.optimizerStartStep = info.step;
  }
  // The batch: step k reads samples from k * global batch on.
  if (theirs.globalBatch == 0) {
    unchecked.push_back("global batch");
  } else if (theirs.globalBatch != mine.globalBatch && !options.resetData) {
    return Status::failure(
        ck + ": the checkpoint's global batch is " +
        std::to_string(theirs.globalBatch) + " samples per step but " + model +
        "'s is " + std::to_string(mine.globalBatch) +
        " (the data position of step " + std::to_string(info.step) +
        " depends on it); pass --reset-data to restart the data at sample 0, "
        "or compile with --batch-size " + std::to_string(theirs.globalBatch));
  }
  if (options.resetData) {
    info.resetData = true;
    info.resumed.dataStartStep = info.step;
  }
  if (!unchecked.empty()) {
    std::string what;
    for (size_t i = 0; i < unchecked.size(); ++i)
      what += (i ? (i + 1 == unchecked.size() ? " and " : ", ") : "") +
              unchecked[i];
    info.warnings.push_back(ck + " records no " + what +
                            " (written by an older smprun): resuming "
                            "without checking them against " + model);
  }
  return Status::success();
}

} // namespace smprt
