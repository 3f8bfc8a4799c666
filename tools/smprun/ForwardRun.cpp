//===- ForwardRun.cpp - smprun --output-dir: a forward run ----------------===//
//
// A forward artifact is compiled for one batch (its inputs' leading dim).
// Data of exactly that shape runs once. Data of K times as many samples
// (every input alike) runs as K consecutive batches, each output
// concatenated along dim 0, when smpc found every output computed sample by
// sample (smp-mark-sample-outputs: the manifest's TensorSpec.samples), so
// that the result is the model's over all of them; otherwise it is refused
// with the output, the op that mixes the samples and the --batch-size to
// compile with.
//
//===----------------------------------------------------------------------===//

#include "ForwardRun.h"

#include "smprt/Base.h"
#include "smprt/train/DataChecks.h"

#include <sys/resource.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>

namespace smprun {
namespace {

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s;
  for (int64_t d : shape)
    s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

/// Reads DIR/<input>.npy for every input of the artifact, rounding float32
/// data for a bf16 or fp16 input (with a note on rank 0).
int readInputs(const Cli &cli, const smprt::Artifact &artifact, int rank,
               std::vector<smprt::NpyArray> &inputs,
               std::vector<std::string> &paths) {
  smprt::Status s;
  if (!cli.ignoreUnreadData &&
      !(s = smprt::checkUnreadInputs(artifact, cli.dataDir,
                                     "--ignore-unread-data"))
           .ok())
    return fail(s.error);
  inputs.resize(artifact.manifest.inputs_size());
  for (int i = 0; i < artifact.manifest.inputs_size(); ++i) {
    const std::string &name = artifact.manifest.inputs(i).name();
    std::string path = cli.dataDir + "/" + smprt::fileNameFor(name) + ".npy";
    paths.push_back(path);
    struct stat st;
    if (::stat(path.c_str(), &st) != 0)
      return fail(path + ": missing; the model needs input '" + name +
                  "' as a .npy file");
    if (!(s = smprt::readNpy(path, inputs[i])).ok())
      return fail(s.error);
    auto want = static_cast<smprt::DType>(artifact.manifest.inputs(i).dtype());
    // An image's pixels as bytes: as training's data check says (Data.cpp).
    if (inputs[i].dtype == smprt::DType::U8 && smprt::isFloat(want))
      return fail(path + ": input '" + name + "' holds 8-bit values where " +
                  "the model takes " + smprt::dtypeName(want) +
                  ": scale them as the model's preprocessing does " +
                  smprt::kPixelScaling + " and save them as float32");
    if (smprt::roundsTo(inputs[i].dtype, want)) {
      smprt::NpyArray &a = inputs[i];
      int64_t n = a.ref().numel();
      std::string rounded(n * smprt::dtypeSize(want), '\0');
      smprt::convertFloats(a.data(), a.dtype, rounded.data(), want, n);
      a.bytes = std::move(rounded);
      a.mapped.reset();
      a.dtype = want;
      if (rank == 0)
        std::printf("note: %s\n",
                    smprt::roundingNote(path + " (input '" + name + "')", want)
                        .c_str());
    }
  }
  return 0;
}

/// How many compiled batches the data holds: 1 when every input has the
/// compiled shape (or differs otherwise: the executor's check reports it),
/// K > 1 when every input holds K times the compiled leading dim (a scalar
/// input, which holds no samples, goes whole to every batch) and every
/// output is per sample. 0 after an error.
int64_t batchesOf(const smprt::Artifact &artifact,
                  const std::vector<smprt::NpyArray> &inputs,
                  const std::vector<std::string> &paths) {
  const auto &m = artifact.manifest;
  int64_t k = 0;
  int first = -1;
  for (int i = 0; i < m.inputs_size(); ++i) {
    const auto &want = m.inputs(i).shape();
    const std::vector<int64_t> &got = inputs[i].shape;
    if (want.empty() && got.empty())
      continue; // a scalar: the same in every batch
    if (want.empty() || got.size() != static_cast<size_t>(want.size()) ||
        !std::equal(got.begin() + 1, got.end(), want.begin() + 1) ||
        want[0] <= 0)
      return 1; // not a batch of the compiled shape: setInput says why
    if (got[0] % want[0] != 0) {
      fail(paths[i] + ": input '" + m.inputs(i).name() + "' holds " +
           std::to_string(got[0]) +
           " samples, not a multiple of the batch the model was compiled "
           "for (" +
           shapeText({want.begin(), want.end()}) +
           "); compile it with "
           "--batch-size " +
           std::to_string(got[0]) + " (or a batch that divides " +
           std::to_string(got[0]) + ": it then runs batch by batch)");
      return 0;
    }
    int64_t ki = got[0] / want[0];
    if (first >= 0 && ki != k) {
      fail(paths[i] + ": input '" + m.inputs(i).name() + "' holds " +
           std::to_string(got[0]) + " samples, " + paths[first] + " " +
           std::to_string(inputs[first].shape[0]) +
           "; every input needs the same number of samples");
      return 0;
    }
    k = ki, first = i;
  }
  if (k <= 1)
    return 1;
  int64_t batch = m.inputs(first).shape(0);
  for (const auto &out : m.outputs()) {
    if (out.samples() == "per-sample")
      continue;
    std::string why = out.samples().empty()
                          ? "the artifact does not say whether it is "
                            "computed sample by sample (compiled by an "
                            "older smpc: compile it again)"
                          : out.samples();
    fail("the data holds " + std::to_string(k) + " batches of " +
         std::to_string(batch) +
         " samples (the batch the model was compiled for), but output '" +
         out.name() + "' cannot be computed batch by batch: " + why +
         "; compile the model with --batch-size " + std::to_string(k * batch) +
         " to run all the samples as one batch");
    return 0;
  }
  return k;
}

/// Runs batch `b` of `k` (rows b/k of every input); with k > 1 appends each
/// output to `outputs` (created on the first batch). A single run's outputs
/// are written from the executor's buffers, not copied.
int runBatch(const smprt::Artifact &artifact, smprt::Executor &exec,
             std::vector<smprt::NpyArray> &inputs,
             const std::vector<std::string> &paths, int64_t b, int64_t k,
             std::map<std::string, smprt::NpyArray> &outputs,
             const std::string &model) {
  smprt::Status s;
  for (int i = 0; i < artifact.manifest.inputs_size(); ++i) {
    smprt::TensorRef ref = inputs[i].ref();
    if (!ref.shape.empty()) { // a scalar goes whole to every batch
      size_t bytes = ref.bytes() / k;
      ref.data = static_cast<char *>(ref.data) + b * bytes;
      ref.shape[0] /= k;
    }
    if (!(s = exec.setInput(artifact.manifest.inputs(i).name(), ref, paths[i]))
             .ok())
      return fail(s.error);
  }
  if (!(s = exec.run()).ok())
    return fail(model + ": " + s.error +
                (k > 1 ? " (batch " + std::to_string(b + 1) + " of " +
                             std::to_string(k) + ")"
                       : ""));
  if (k == 1)
    return 0;
  for (const auto &[name, ref] : exec.outputs()) {
    smprt::NpyArray &out = outputs[name];
    if (b == 0) {
      out.dtype = ref.dtype;
      out.shape = ref.shape;
      if (!out.shape.empty())
        out.shape[0] *= k;
      out.bytes.reserve(ref.bytes() * k);
    }
    out.bytes.append(static_cast<const char *>(ref.data), ref.bytes());
  }
  return 0;
}

} // namespace

int runForward(const Cli &cli, const smprt::Artifact &artifact,
               smprt::Executor &exec, smprt::Communicator &comm) {
  smprt::Status s;
  const int rank = comm.rank();
  std::vector<smprt::NpyArray> inputs;
  std::vector<std::string> paths;
  if (int rc = readInputs(cli, artifact, rank, inputs, paths))
    return rc;
  int64_t k = batchesOf(artifact, inputs, paths);
  if (k == 0)
    return 1;
  if (!cli.profilePath.empty() && rank == 0)
    if (smprt::Status s = exec.enableProfiling(); !s.ok())
      return fail(cli.model + ": " + s.error);
  std::map<std::string, smprt::NpyArray> outputs;
  auto start = std::chrono::steady_clock::now();
  for (int64_t b = 0; b < k; ++b)
    if (int rc =
            runBatch(artifact, exec, inputs, paths, b, k, outputs, cli.model))
      return rc;
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (!(s = comm.barrier("the end barrier")).ok())
    return fail(s.error);
  if (rank != 0)
    return 0; // rank 0 writes the outputs
  if (k > 1) {
    size_t i = 0; // batchesOf found a batched input
    while (inputs[i].shape.empty())
      ++i;
    std::printf("ran %lld batches of %lld samples (%lld in all), each "
                "output computed sample by sample\n",
                static_cast<long long>(k),
                static_cast<long long>(inputs[i].shape[0] / k),
                static_cast<long long>(inputs[i].shape[0]));
  }
  std::vector<std::pair<std::string, smprt::TensorRef>> results;
  if (k == 1)
    results = exec.outputs();
  else
    for (auto &[name, out] : outputs)
      results.emplace_back(name, out.ref());
  ::mkdir(cli.outDir.c_str(), 0755);
  for (const auto &[name, ref] : results) {
    std::string path = cli.outDir + "/" + smprt::fileNameFor(name) + ".npy";
    // A bf16 output is written widened to float32 (writeNpy), as PyTorch
    // users read one (out.float().numpy()).
    if (!(s = smprt::writeNpy(path, ref)).ok())
      return fail(s.error);
    std::cout << "wrote " << path << " (" << smprt::describe(ref)
              << (ref.dtype == smprt::DType::BF16
                      ? ", widened to float32: numpy has no bf16"
                      : "")
              << ")\n";
  }
  if (!cli.profilePath.empty()) {
    if (int rc = writeProfile(exec, cli.profilePath, seconds, true))
      return rc;
  }
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  std::printf("ran %d instructions in %.3f s; arena %llu bytes planned, "
              "%llu bytes high-water; peak RSS %ld KiB\n",
              artifact.program.instructions_size() * static_cast<int>(k),
              seconds, static_cast<unsigned long long>(exec.arenaBytes()),
              static_cast<unsigned long long>(exec.highWaterBytes()),
              usage.ru_maxrss);
  return 0;
}

} // namespace smprun
