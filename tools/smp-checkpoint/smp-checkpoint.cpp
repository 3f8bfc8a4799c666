//===- smp-checkpoint.cpp - Lists, gathers and exports checkpoints --------===//
//
// smp-checkpoint list DIR [--json]
// smp-checkpoint gather DIR -o OUT_DIR
// smp-checkpoint export DIR --format npy|safetensors|onnx -o OUT [--state]
//                [--model MODEL.smpx] [--onnx SOURCE.onnx]
//
// Reads the newest checkpoint in DIR, gathering every tensor whole from the
// shards of every rank that wrote it (docs/checkpoints.md).
//
//===----------------------------------------------------------------------===//

#include "smp/base/Layout.h"
#include "smp/base/Suggest.h"
#include "smprt/Base.h"
#include "smprt/exec/Artifact.h"
#include "smprt/train/CheckpointExport.h"
#include "smprt/train/OnnxExport.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace {

using smprt::jsonString;

const char *kUsage = R"(smp-checkpoint - lists, gathers and exports smprun checkpoints.

USAGE
  smp-checkpoint list   DIR [--json]
  smp-checkpoint gather DIR -o OUT_DIR
  smp-checkpoint export DIR --format npy|safetensors|onnx -o OUT [--state]
                        [--model MODEL.smpx] [--onnx SOURCE.onnx]
  smp-checkpoint COMMAND --help
  smp-checkpoint --help

COMMANDS
  list      What the newest checkpoint in DIR holds: its step, the run that
            wrote it (ranks, plan, optimizer, global batch, artifact) and
            every tensor with its global shape, dtype, bytes and shards.
  gather    Write it as one unsharded single-rank checkpoint (OUT_DIR/latest,
            OUT_DIR/step-<N>/): it resumes under a one-rank artifact of the
            same model (smprun --checkpoint-dir OUT_DIR --resume).
  export    Write its parameters, gathered whole, as .npy files, one
            safetensors file or the trained ONNX model.

DIR is a --checkpoint-dir of smprun (the checkpoint DIR/latest names).
docs/checkpoints.md describes the format.
)";

const char *kListHelp = R"(usage: smp-checkpoint list DIR [--json]

Prints the newest checkpoint in DIR: the step and the run's total steps, the
ranks and plan that wrote it, its optimizer and hyper-parameters, its global
batch, the model's fingerprint and the artifact that wrote it, then one line
per tensor: role (param, state, or for a parameter the step does not
train buffer, such as a batch norm's running statistics, or frozen, by
smpc --freeze), name, dtype and global shape, bytes of the whole tensor
and how many ranks store a piece (or a copy) of it.
Every rank's index and tensors are read and their checksums verified.

  --json     The same as one JSON object (the Python package's
             smp.checkpoint.list reads it).
  -h, --help Show this help.
)";

const char *kGatherHelp = R"(usage: smp-checkpoint gather DIR -o OUT_DIR

Writes the newest checkpoint in DIR, every parameter and optimizer-state
tensor gathered whole from the shards of every rank, as a checkpoint of one
rank in OUT_DIR (OUT_DIR/latest and OUT_DIR/step-<N>/index.pb, tensors.bin;
created if missing). The record of the run is kept (its plan prefixed
"gathered from"), so it resumes under a one-rank artifact of the same model,
optimizer and global batch: smprun MODEL.smpx --checkpoint-dir OUT_DIR
--resume ...

  -o OUT_DIR Where to write it (required).
  -h, --help Show this help.
)";

const char *kExportHelp =
    R"(usage: smp-checkpoint export DIR --format npy|safetensors|onnx -o OUT
                             [--state] [--model MODEL.smpx] [--onnx SOURCE.onnx]

Writes the parameters of the newest checkpoint in DIR, each gathered whole
from every rank's shards, under their ONNX initializer names.

  --format npy          OUT is a directory (created): one .npy per tensor
                        (param.<name>.npy; names percent-encoded as smprun
                        encodes file names) and index.json mapping each name
                        (state tensors as "state:<name>") to its file. The
                        Python package's smp.load_checkpoint reads it. Over
                        an earlier export, the files its index.json listed
                        that this one does not write are removed.
  --format safetensors  OUT is one .safetensors file (8-byte header length,
                        a JSON header with each tensor's dtype, shape and
                        data_offsets, then the little-endian data; metadata:
                        the step, the optimizer, the plan). Loads with
                        safetensors.torch.load_file. npy and safetensors
                        name each tensor as PyTorch does where the
                        exporter's optimiser had folded it (a Linear's
                        weight stored transposed as `val_37`: written as
                        the weight, transposed back) and leave out the
                        frozen buffers an exporter named (no module path),
                        when the artifact the checkpoint records can be
                        read.
  --format onnx         OUT is the ONNX model the artifact was compiled from
                        with the trained values in its initializers (as
                        smprun --save-onnx writes it; external data past
                        2 GB). Needs the artifact: --model, else the one the
                        checkpoint records.
  -o OUT                Where to write (required).
  --state               npy, safetensors: also the optimizer state (the
                        momentum buffers and moments, under their own names).
  --model MODEL.smpx    onnx: the training artifact that wrote the checkpoint
                        (or any artifact of the same model).
  --onnx SOURCE.onnx    onnx: the original model, where the artifact's
                        recorded path has moved (a copy of the file smpc
                        compiled: its checksum is checked).
  -h, --help            Show this help.
)";

int fail(const std::string &msg) {
  std::fprintf(stderr, "smp-checkpoint: error: %s\n", msg.c_str());
  return 1;
}

/// A subcommand's arguments: DIR, and flags with or without a value.
struct Args {
  std::string dir, out, format, model, onnx;
  bool state = false, json = false, help = false;
};

/// Parses argv[2..] of `command`, which takes the flags `allowed`.
int parseArgs(const std::string &command, int argc, char **argv,
              const std::vector<std::string> &allowed, Args &args) {
  std::map<std::string, std::string *> values = {{"-o", &args.out},
                                                 {"--format", &args.format},
                                                 {"--model", &args.model},
                                                 {"--onnx", &args.onnx}};
  std::map<std::string, bool *> switches = {{"--state", &args.state},
                                            {"--json", &args.json}};
  std::string see = " (see smp-checkpoint " + command + " --help)";
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      args.help = true;
      return 0;
    }
    bool known = false;
    for (const std::string &f : allowed)
      known |= f == a;
    if (!a.empty() && a[0] == '-' && !known)
      return fail("unknown option '" + a + "' for " + command +
                  smp::base::didYouMean(a, allowed) + see);
    if (values.count(a)) {
      if (i + 1 >= argc)
        return fail(a + " needs a value" + see);
      *values[a] = argv[++i];
    } else if (switches.count(a)) {
      *switches[a] = true;
    } else if (args.dir.empty()) {
      args.dir = a;
    } else {
      return fail("unexpected argument '" + a + "'" + see);
    }
  }
  if (args.dir.empty())
    return fail(command + " needs a checkpoint directory DIR" + see);
  return 0;
}

std::string shapeText(uint32_t dtype, const std::vector<int64_t> &shape) {
  return smprt::describeParam(dtype, shape);
}

int list(const Args &args) {
  smprt::CheckpointSummary c;
  smprt::Status s = smprt::summarizeCheckpoint(args.dir, c);
  if (!s.ok())
    return fail(s.error);
  const smprt::RunRecord &r = c.record;
  uint64_t paramBytes = 0, stateBytes = 0;
  size_t params = 0, buffers = 0, frozen = 0;
  for (const auto &t : c.tensors) {
    (t.role == "param" ? paramBytes : stateBytes) += t.bytes;
    params += t.role == "param";
    buffers += t.kind == "buffer";
    frozen += t.kind == "frozen";
  }
  char fp[32];
  std::snprintf(fp, sizeof(fp), "%016" PRIx64, r.modelFingerprint);
  if (args.json) {
    std::printf("{\"checkpoint\": %s, \"step\": %lld, \"total_steps\": %lld, "
                "\"num_ranks\": %u, \"model_name\": %s, \"plan\": %s, "
                "\"optimizer\": %s, \"global_batch\": %lld, "
                "\"microbatches\": %u, \"model_fingerprint\": \"%s\", "
                "\"artifact\": %s, \"optimizer_start_step\": %lld, "
                "\"data_start_step\": %lld, \"tensors\": [",
                jsonString(c.checkpoint).c_str(), (long long)c.step,
                (long long)c.totalSteps, c.numRanks,
                jsonString(c.modelName).c_str(), jsonString(r.plan).c_str(),
                jsonString(r.optimizer).c_str(), (long long)r.globalBatch,
                r.microbatches, r.optimizer.empty() ? "" : fp,
                jsonString(r.artifact).c_str(),
                (long long)r.optimizerStartStep, (long long)r.dataStartStep);
    for (size_t i = 0; i < c.tensors.size(); ++i) {
      const auto &t = c.tensors[i];
      std::string shape;
      for (size_t k = 0; k < t.shape.size(); ++k)
        shape += (k ? ", " : "") + std::to_string(t.shape[k]);
      std::printf("%s\n  {\"name\": %s, \"role\": \"%s\", \"kind\": %s, "
                  "\"dtype\": \"%s\", \"shape\": [%s], \"bytes\": %llu, "
                  "\"ranks\": %u}",
                  i ? "," : "", jsonString(t.name).c_str(), t.role.c_str(),
                  jsonString(t.kind).c_str(),
                  smprt::dtypeName(static_cast<smprt::DType>(t.dtype)),
                  shape.c_str(), (unsigned long long)t.bytes, t.shards);
    }
    std::printf("\n]}\n");
    return 0;
  }
  std::printf("checkpoint: %s (step %lld of %lld)\n", c.checkpoint.c_str(),
              (long long)c.step, (long long)c.totalSteps);
  std::printf("written by: %u rank%s%s%s\n", c.numRanks,
              c.numRanks == 1 ? "" : "s", r.plan.empty() ? "" : ", ",
              r.plan.c_str());
  if (r.optimizer.empty()) {
    std::printf("run record: none (written by an older smprun)\n");
  } else {
    std::printf("optimizer: %s (state from step %lld)\n", r.optimizer.c_str(),
                (long long)r.optimizerStartStep);
    std::printf("batch: %lld samples per step, %u micro-batch%s (data from "
                "step %lld)\n",
                (long long)r.globalBatch, r.microbatches,
                r.microbatches == 1 ? "" : "es", (long long)r.dataStartStep);
    std::printf("model: %s, fingerprint %s, artifact %s\n",
                c.modelName.c_str(), fp, r.artifact.c_str());
  }
  std::string untrained;
  if (buffers)
    untrained += std::to_string(buffers) + " buffer" + (buffers > 1 ? "s" : "");
  if (frozen)
    untrained += (untrained.empty() ? "" : " and ") + std::to_string(frozen) +
                 " frozen by --freeze";
  std::printf(
      "tensors: %zu parameters (%llu bytes%s%s), %zu state (%llu "
      "bytes)\n",
      params, (unsigned long long)paramBytes,
      untrained.empty() ? "" : ", of which not trained: ", untrained.c_str(),
      c.tensors.size() - params, (unsigned long long)stateBytes);
  int width = 0;
  for (const auto &t : c.tensors)
    width = std::max(width, static_cast<int>(t.name.size()));
  for (const char *role : {"param", "state"})
    for (const auto &t : c.tensors)
      if (t.role == role)
        std::printf("  %-6s %-*s  %-18s %10llu bytes  on %u rank%s\n",
                    t.kind.empty() ? t.role.c_str() : t.kind.c_str(), width,
                    t.name.c_str(), shapeText(t.dtype, t.shape).c_str(),
                    (unsigned long long)t.bytes, t.shards,
                    t.shards == 1 ? "" : "s");
  return 0;
}

int gather(const Args &args) {
  if (args.out.empty())
    return fail("gather needs -o OUT_DIR (see smp-checkpoint gather --help)");
  std::string written;
  smprt::Status s = smprt::writeGatheredCheckpoint(args.dir, args.out, written);
  if (!s.ok())
    return fail(s.error);
  std::printf("wrote %s (one rank)\n", written.c_str());
  return 0;
}

/// Warns when the artifact that wrote the checkpoint trained parameters
/// the ONNX exporter's optimiser had folded into constants (`embedding_1#rows`,
/// `expand#rows`): written under those names, which no PyTorch module has,
/// they would be skipped without a word by load_state_dict(strict=False).
/// Silent where the artifact cannot be read (moved): npy and safetensors
/// do not need it.
void warnFolded(const smprt::CheckpointSummary &c) {
  smp::artifact::Manifest manifest;
  if (c.record.artifact.empty() ||
      !smprt::loadManifest(c.record.artifact, manifest).ok() ||
      !manifest.has_training())
    return;
  std::string names;
  size_t count = 0;
  std::set<std::string> renamed; // exported under PyTorch's name
  for (const auto &o : manifest.training().param_origins())
    if (o.kind() == "renamed")
      renamed.insert(o.name());
  for (const auto &o : manifest.training().param_origins())
    if ((o.kind() == "folded" || o.kind() == "folded-rows" ||
         o.kind() == "tied-block") &&
        !renamed.count(o.name()))
      names += (count++ < 3 ? std::string(names.empty() ? "" : ", ") + o.name()
                            : std::string(count == 4 ? ", ..." : ""));
  if (count)
    std::fprintf(stderr,
                 "smp-checkpoint: warning: %zu tensor(s) (%s) hold parameters "
                 "the ONNX exporter's optimiser folded into constants (the "
                 "file has no PyTorch name for them): written under these "
                 "names, which load_state_dict(..., strict=False) skips; "
                 "--format onnx writes the folded initializers back, or "
                 "re-export the model with torch.onnx.export(..., "
                 "optimize=False)\n",
                 count, names.c_str());
}

/// How PyTorch holds the tensors of a checkpoint: names for those the
/// artifact trained under an exporter's name ("renamed" origins: the folded
/// transpose `val_37` of a Linear weight: name -> (PyTorch name,
/// transposed; a GroupNorm's weight folded as [C, 1, 1]: PyTorch's shape
/// [C])), and the frozen buffers under names an exporter made up
/// (an FX fold `unsqueeze_14`, `val_220`: no module path), which no
/// state_dict has. Empty where the artifact cannot be read.
struct PytorchView {
  struct Renamed {
    std::string name; // PyTorch's
    bool transposed = false;
    std::vector<int64_t> shape; // PyTorch's, where the tensor's differs
  };
  std::map<std::string, Renamed> renamed;
  std::set<std::string> madeUp;
  std::multimap<std::string, std::string> aliases; // tensor -> tied name
};

PytorchView pytorchView(const smprt::CheckpointSummary *c) {
  PytorchView view;
  smp::artifact::Manifest manifest;
  if (!c || c->record.artifact.empty() ||
      !smprt::loadManifest(c->record.artifact, manifest).ok() ||
      !manifest.has_training())
    return view;
  for (const auto &o : manifest.training().param_origins()) {
    if (o.kind() == "renamed")
      view.renamed[o.name()] = {
          o.from(), o.transposed(), {o.shape().begin(), o.shape().end()}};
    if (o.kind() == "alias")
      view.aliases.insert({o.name(), o.from()});
    if (o.kind() == "buffer" && o.name().find('.') == std::string::npos)
      view.madeUp.insert(o.name());
  }
  return view;
}

/// Renames (and transposes back) the tensors `view` renames, and their
/// optimizer state ("NAME.exp_avg", ...), as PyTorch holds them, and
/// leaves out its made-up buffers (said once, for the parameters).
void applyPytorchView(const PytorchView &view,
                      std::map<std::string, smprt::GlobalTensor> &tensors,
                      bool say) {
  std::map<std::string, smprt::GlobalTensor> out;
  std::string dropped;
  for (auto &[name, t] : tensors) {
    if (view.madeUp.count(name)) {
      dropped += (dropped.empty() ? "" : ", ") + name;
      continue;
    }
    std::string key = name;
    for (const auto &[from, to] : view.renamed) {
      if (name != from && name.rfind(from + ".", 0) != 0)
        continue;
      key = to.name + name.substr(from.size());
      if (!to.shape.empty() &&
          smp::base::elementCount(to.shape) == smp::base::elementCount(t.shape))
        t.shape = to.shape; // the same elements in the same order
      if (to.transposed && t.shape.size() == 2 && t.shape[0] * t.shape[1] > 0) {
        size_t es =
            t.bytes.size() / static_cast<size_t>(t.shape[0] * t.shape[1]);
        std::string moved(t.bytes.size(), '\0');
        for (int64_t i = 0; i < t.shape[0]; ++i)
          for (int64_t j = 0; j < t.shape[1]; ++j)
            std::memcpy(&moved[(j * t.shape[0] + i) * es],
                        &t.bytes[(i * t.shape[1] + j) * es], es);
        t.bytes = std::move(moved);
        std::swap(t.shape[0], t.shape[1]);
      }
      break;
    }
    out[key] = std::move(t);
  }
  // A tied parameter under each of its names, as PyTorch's state_dict
  // holds it (the parameters only: the optimizer state is one).
  if (say)
    for (const auto &[name, alias] : view.aliases)
      if (auto it = out.find(name); it != out.end() && !out.count(alias))
        out[alias] = it->second;
  tensors = std::move(out);
  if (say && !dropped.empty())
    std::fprintf(stderr,
                 "smp-checkpoint: note: left out frozen buffer(s) %s: their "
                 "names are no module path (an exporter made them up, "
                 "folding constants), so no PyTorch state_dict holds them\n",
                 dropped.c_str());
}

/// The files an earlier export's index.json lists (its values: this
/// tool's own JSON, one `"name": "file"` a line); none without one.
std::set<std::string> indexedFiles(const std::string &indexPath) {
  std::set<std::string> files;
  FILE *f = std::fopen(indexPath.c_str(), "r");
  if (!f)
    return files;
  char line[8192];
  while (std::fgets(line, sizeof(line), f)) {
    std::string l(line);
    size_t at = l.rfind("\": \"");
    size_t end = l.find_last_of('"');
    if (at == std::string::npos || end <= at + 3)
      continue;
    std::string file;
    for (size_t i = at + 4; i < end; ++i)
      file += l[i] == '\\' && i + 1 < end ? l[++i] : l[i];
    if (file.find('/') == std::string::npos && file != "index.json")
      files.insert(file);
  }
  std::fclose(f);
  return files;
}

int exportNpy(const Args &args, const smprt::CheckpointSummary *c) {
  if (::mkdir(args.out.c_str(), 0755) != 0 && errno != EEXIST)
    return fail(args.out + ": cannot create (" + std::strerror(errno) + ")");
  // index.json is what readers trust (smp.load_checkpoint): an earlier
  // export's goes first and the new one is renamed into place last, so an
  // export that fails part way (a full disk) leaves no index naming a mix
  // of two checkpoints' files.
  const std::string indexPath = args.out + "/index.json";
  // The earlier export's files this one does not write again go once the
  // new index is in place (a tensor of another model, the state).
  std::set<std::string> earlier = indexedFiles(indexPath), files;
  if (::unlink(indexPath.c_str()) != 0 && errno != ENOENT)
    return fail(indexPath + ": cannot replace (" + std::strerror(errno) + ")");
  std::string index = "{";
  size_t bf16 = 0;
  PytorchView view = pytorchView(c); // the artifact's manifest, read once
  for (const char *role : {"param", "state"}) {
    if (std::strcmp(role, "state") == 0 && !args.state)
      continue;
    std::map<std::string, smprt::GlobalTensor> tensors;
    smprt::Status s = smprt::readGlobalTensors(args.dir, role, tensors);
    if (!s.ok())
      return fail(s.error);
    applyPytorchView(view, tensors, std::strcmp(role, "param") == 0);
    for (auto &[name, g] : tensors) {
      std::string file =
          std::string(role) + "." + smprt::fileNameFor(name) + ".npy";
      smprt::TensorRef ref;
      ref.data = g.bytes.data();
      ref.dtype = static_cast<smprt::DType>(g.dtype);
      ref.shape = g.shape;
      bf16 += ref.dtype == smprt::DType::BF16; // widened by writeNpy
      if (!(s = smprt::writeNpy(args.out + "/" + file, ref)).ok())
        return fail(s.error);
      files.insert(file);
      index +=
          std::string(index.size() > 1 ? ",\n " : "\n ") +
          jsonString(std::string(role) == "param" ? name : "state:" + name) +
          ": " + jsonString(file);
    }
  }
  index += "\n}\n";
  const std::string tmp = indexPath + ".tmp";
  FILE *f = std::fopen(tmp.c_str(), "w");
  bool written = f && std::fputs(index.c_str(), f) >= 0;
  if (f && std::fclose(f) != 0)
    written = false;
  if (!written || std::rename(tmp.c_str(), indexPath.c_str()) != 0) {
    std::remove(tmp.c_str());
    return fail(indexPath + ": cannot write");
  }
  size_t removed = 0;
  for (const std::string &file : earlier)
    if (!files.count(file) && ::unlink((args.out + "/" + file).c_str()) == 0)
      ++removed;
  if (removed)
    std::fprintf(stderr,
                 "smp-checkpoint: note: removed %zu file(s) of the earlier "
                 "export in %s that this one does not hold\n",
                 removed, args.out.c_str());
  if (bf16)
    std::fprintf(stderr,
                 "smp-checkpoint: note: %zu bf16 tensor(s) written widened to "
                 "float32 (exact; numpy has no bf16): .to(torch.bfloat16) "
                 "gives them back; --format safetensors keeps bf16\n",
                 bf16);
  return 0;
}

int exportSafetensors(const Args &args, const smprt::CheckpointSummary &c) {
  smprt::Status s;
  std::map<std::string, smprt::GlobalTensor> tensors;
  if (!(s = smprt::readGlobalTensors(args.dir, "param", tensors)).ok() ||
      (args.state &&
       !(s = smprt::readGlobalTensors(args.dir, "state", tensors)).ok()))
    return fail(s.error);
  applyPytorchView(pytorchView(&c), tensors, true);
  std::map<std::string, std::string> meta = {
      {"format", "pt"},
      {"smp.checkpoint", c.checkpoint},
      {"smp.step", std::to_string(c.step)}};
  if (!c.record.optimizer.empty())
    meta["smp.optimizer"] = c.record.optimizer;
  if (!c.record.plan.empty())
    meta["smp.plan"] = c.record.plan;
  if (!(s = smprt::writeSafetensors(args.out, tensors, meta)).ok())
    return fail(s.error);
  std::printf("wrote %s (%zu tensors of step %lld)\n", args.out.c_str(),
              tensors.size(), (long long)c.step);
  return 0;
}

int exportOnnx(const Args &args) {
  if (args.state)
    return fail("--state is for --format npy or safetensors (an ONNX model "
                "holds no optimizer state)");
  smprt::CheckpointSummary c;
  smprt::Status s = smprt::summarizeCheckpoint(args.dir, c);
  if (!s.ok())
    return fail(s.error);
  std::string model = args.model.empty() ? c.record.artifact : args.model;
  if (model.empty())
    return fail(c.checkpoint + " records no artifact (written by an older "
                "smprun); give --model MODEL.smpx, the artifact that wrote it");
  smprt::Artifact artifact;
  if (!(s = smprt::loadArtifact(model, 0, artifact)).ok())
    return fail(s.error + (args.model.empty()
                               ? " (the artifact the checkpoint records; "
                                 "give --model MODEL.smpx)"
                               : ""));
  if (!artifact.manifest.has_training())
    return fail(model + ": not a training artifact; --model needs the "
                        "artifact smprun trained (compiled with --train)");
  if (!args.onnx.empty() &&
      !(s = smprt::findSourceModel(artifact, args.onnx)).ok())
    return fail(s.error);
  std::vector<smprt::ParamSpec> params, mine = smprt::artifactParameters(artifact);
  for (const auto &t : c.tensors)
    if (t.role == "param")
      params.push_back({t.name, t.dtype, t.shape});
  size_t count = 0;
  std::string diff = smprt::modelDifference(params, mine, model, count);
  if (!mine.empty() && !diff.empty())
    return fail(c.checkpoint + ": written for another model: " + diff +
                (count > 1 ? " (and " + std::to_string(count - 1) + " more)"
                           : "") +
                "; give --model the artifact that wrote it");
  std::map<std::string, smprt::GlobalTensor> whole;
  if (!(s = smprt::readGlobalTensors(args.dir, "param", whole)).ok())
    return fail(s.error);
  std::map<std::string, smprt::TrainedTensor> views;
  for (const auto &[name, g] : whole)
    views[name] = smprt::TrainedTensor{g.dtype, g.shape, g.bytes.data(),
                                       g.bytes.size()};
  if (!(s = smprt::saveTrainedOnnx(artifact, views, args.out)).ok())
    return fail(s.error);
  std::printf("wrote %s (the trained parameters of step %lld)\n",
              args.out.c_str(), (long long)c.step);
  return 0;
}

int exportCommand(const Args &args) {
  if (args.format.empty())
    return fail("export needs --format npy, safetensors or onnx (see "
                "smp-checkpoint export --help)");
  if (args.out.empty())
    return fail("export needs -o OUT (see smp-checkpoint export --help)");
  if (args.format != "onnx" && (!args.model.empty() || !args.onnx.empty()))
    return fail(std::string(args.model.empty() ? "--onnx" : "--model") +
                " is for --format onnx");
  if (args.format == "npy" || args.format == "safetensors") {
    // The summary names the artifact (and the safetensors metadata); npy
    // needs neither, so a checkpoint it cannot summarize still exports.
    smprt::CheckpointSummary c;
    smprt::Status s = smprt::summarizeCheckpoint(args.dir, c);
    if (s.ok())
      warnFolded(c);
    if (args.format == "npy")
      return exportNpy(args, s.ok() ? &c : nullptr);
    return s.ok() ? exportSafetensors(args, c) : fail(s.error);
  }
  if (args.format == "onnx")
    return exportOnnx(args);
  return fail("unknown --format '" + args.format +
              "' (expected npy, safetensors or onnx)" +
              smp::base::didYouMean(args.format, {"npy", "safetensors", "onnx"}));
}

} // namespace

int main(int argc, char **argv) {
  std::string command = argc > 1 ? argv[1] : "";
  if (command.empty()) {
    std::fputs(kUsage, stderr);
    return 1;
  }
  if (command == "-h" || command == "--help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const std::vector<std::string> commands = {"list", "gather", "export"};
  struct Command {
    const char *help;
    std::vector<std::string> flags;
    int (*run)(const Args &);
  };
  const std::map<std::string, Command> table = {
      {"list", {kListHelp, {"--json"}, list}},
      {"gather", {kGatherHelp, {"-o"}, gather}},
      {"export",
       {kExportHelp,
        {"--format", "-o", "--state", "--model", "--onnx"},
        exportCommand}}};
  auto it = table.find(command);
  if (it == table.end()) {
    struct stat st;
    if (command[0] != '-' && ::stat(command.c_str(), &st) == 0)
      return fail("'smp-checkpoint DIR -o OUT' is now 'smp-checkpoint export "
                  "DIR --format npy -o OUT' (and list, gather: see "
                  "smp-checkpoint --help)");
    return fail("unknown command '" + command + "'" +
                smp::base::didYouMean(command, commands) +
                " (expected list, gather or export; see smp-checkpoint "
                "--help)");
  }
  Args args;
  if (int rc = parseArgs(command, argc, argv, it->second.flags, args))
    return rc;
  if (args.help) {
    std::fputs(it->second.help, stdout);
    return 0;
  }
  return it->second.run(args);
}
