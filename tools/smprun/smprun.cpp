//===- smprun.cpp - Runs an smp artifact ----------------------------------===//
//
// smprun MODEL.smpx --data DIR --output-dir DIR [--threads N]
//
// Links no MLIR: it reads the protobuf artifact written by `smpc compile`.
//
//===----------------------------------------------------------------------===//

#include "smp/kernels/cpu/Kernels.h"
#include "smprt/Artifact.h"
#include "smprt/Executor.h"
#include "smprt/Npy.h"
#include "smprt/OnnxExport.h"
#include "smprt/Trainer.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <algorithm>
#include <sched.h>
#include <string>
#include <sys/resource.h>
#include <sys/stat.h>
#include <vector>

namespace {

const char *kUsage = R"(smprun - runs a model compiled by smpc.

USAGE
  smprun MODEL.smpx --data DIR --output-dir DIR [--threads N]
  smprun MODEL.smpx --data DIR --steps N [--metrics FILE] [--threads N]
  smprun --help | --version

OPTIONS
  --data DIR         One .npy file per graph input, named after the input
                     (DIR/<input>.npy); dtype and shape must be exactly the
                     compiled ones (see MODEL.smpx/plan.txt).
  --output-dir DIR   Where to write one .npy per graph output
                     (DIR/<output>.npy). Created if missing.
  --steps N          Train N steps (artifacts compiled with --train). Each
                     step takes the next batch of samples: the leading dim
                     of each DIR/<input>.npy holds the samples, wrapping
                     around. Prints the loss of every step.
  --metrics FILE     With --steps: one JSON object per step (step, loss, lr,
                     grad_norm, samples_per_s, peak_bytes).
  --checkpoint-dir D With --steps: where checkpoints go (parameters and
                     optimizer state by name, written atomically).
  --checkpoint-every K  Save a checkpoint every K steps.
  --resume           Continue from the newest checkpoint in D (the data
                     position and the step count come from it).
  --save-onnx FILE   After training, write the original ONNX model with the
                     trained parameter values (external data beyond 2 GB).
  --threads N        Threads for the CPU kernels and OpenBLAS (default: the
                     cores this process may run on).
  --profile FILE     Write each instruction's wall time as JSON to FILE and
                     print the time per op.
  -h, --help         Show this help.
  --version          Show the version.

EXAMPLE
  smpc compile gpt.onnx --batch-size 2 --dim seq=16 -o gpt.smpx
  smprun gpt.smpx --data inputs/ --output-dir outputs/
  smpc compile mlp.onnx --train --loss cross_entropy:logits:labels \
       --optimizer sgd --lr 0.1 --batch-size 8 -o mlp.smpx
  smprun mlp.smpx --data samples/ --steps 5 --metrics m.jsonl
)";

int fail(const std::string &msg) {
  std::cerr << "smprun: error: " << msg << "\n";
  return 1;
}

std::string jsonEscape(const std::string &s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (static_cast<unsigned char>(c) < 0x20)
      continue;
    out += c;
  }
  return out;
}

int availableCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    return std::max(1, CPU_COUNT(&set));
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  std::string model, dataDir, outDir, profilePath, metricsPath, ckptDir,
      saveOnnx;
  int64_t steps = 0, ckptEvery = 0, threads = 0;
  bool resume = false;
  // Flags that take a value: where it goes, and the smallest integer allowed
  // (for integer flags).
  struct Flag {
    std::string *text = nullptr;
    int64_t *number = nullptr;
    int64_t min = 1, max = INT64_MAX;
  };
  const std::map<std::string, Flag> flags = {
      {"--data", {&dataDir}},
      {"--output-dir", {&outDir}},
      {"--metrics", {&metricsPath}},
      {"--profile", {&profilePath}},
      {"--checkpoint-dir", {&ckptDir}},
      {"--save-onnx", {&saveOnnx}},
      {"--steps", {nullptr, &steps}},
      {"--checkpoint-every", {nullptr, &ckptEvery}},
      {"--threads", {nullptr, &threads, 1, 1024}},
  };
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::cerr << kUsage;
    return 1;
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    }
    if (a == "--version") {
      std::cout << "smprun 0.1.0\n";
      return 0;
    }
    if (a == "--resume") {
      resume = true;
      continue;
    }
    auto flag = flags.find(a);
    if (flag != flags.end()) {
      if (i + 1 >= args.size())
        return fail(a + " needs a value");
      const std::string &v = args[++i];
      if (flag->second.text) {
        *flag->second.text = v;
        continue;
      }
      char *end;
      long long n = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end || n < flag->second.min || n > flag->second.max)
        return fail(a + " expects a positive integer, got '" + v + "'");
      *flag->second.number = n;
    } else if (!a.empty() && a[0] == '-') {
      return fail("unknown option '" + a + "' (see smprun --help)");
    } else if (model.empty()) {
      model = a;
    } else {
      return fail("unexpected argument '" + a + "'");
    }
  }
  if (model.empty())
    return fail("no MODEL.smpx given (see smprun --help)");
  if (dataDir.empty())
    return fail("--data DIR is required: one .npy per graph input");
  if (outDir.empty() && steps == 0)
    return fail("--output-dir DIR is required (or --steps N to train)");

  smp::kernels::cpu::setNumThreads(threads > 0 ? static_cast<int>(threads)
                                              : availableCores());
  smprt::Artifact artifact;
  smprt::Status s = smprt::loadArtifact(model, 0, artifact);
  if (!s.ok())
    return fail(s.error);
  if (artifact.manifest.target() != "cpu")
    return fail(model + ": compiled for target '" +
                artifact.manifest.target() +
                "', but this smprun runs the cpu backend only; recompile "
                "with --target cpu");
  smprt::Executor exec;
  if (!(s = exec.init(artifact)).ok())
    return fail(s.error);
  if (artifact.manifest.has_training() != (steps > 0))
    return fail(artifact.manifest.has_training()
                    ? model + ": a training artifact; give --steps N"
                    : model + ": not a training artifact (compile with "
                              "--train) but --steps was given");
  if (steps > 0) {
    smprt::TrainOptions topts;
    topts.steps = steps;
    topts.dataDir = dataDir;
    topts.metricsPath = metricsPath;
    topts.progress = isatty(2);
    topts.checkpointDir = ckptDir;
    topts.checkpointEvery = ckptEvery;
    topts.resume = resume;
    if ((ckptEvery > 0 || resume) && ckptDir.empty())
      return fail("--checkpoint-every and --resume need --checkpoint-dir");
    std::vector<smprt::StepRecord> records;
    if (!profilePath.empty())
      exec.enableProfiling();
    auto start = std::chrono::steady_clock::now();
    s = smprt::train(exec, topts, records);
    for (const auto &r : records) {
      std::printf("step %lld loss %.6f lr %.6g grad_norm %.6f",
                  static_cast<long long>(r.step), r.loss, r.lr, r.gradNorm);
      if (r.lossScale > 0)
        std::printf(" loss_scale %g%s", r.lossScale,
                    r.skipped ? " (skipped: gradients overflowed)" : "");
      std::printf("\n");
    }
    if (!s.ok())
      return fail(model + ": " + s.error);
    if (!saveOnnx.empty()) {
      if (!(s = smprt::saveTrainedOnnx(exec, saveOnnx)).ok())
        return fail(s.error);
      std::printf("wrote the trained model to %s\n", saveOnnx.c_str());
    }
    double seconds = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - start)
                         .count();
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    std::printf("trained %lld steps in %.3f s; arena %llu bytes planned, "
                "%llu bytes high-water; peak RSS %ld KiB\n",
                static_cast<long long>(steps), seconds,
                static_cast<unsigned long long>(exec.arenaBytes()),
                static_cast<unsigned long long>(exec.highWaterBytes()),
                usage.ru_maxrss);
    return 0;
  }
  std::vector<smprt::NpyArray> inputs(artifact.manifest.inputs_size());
  for (int i = 0; i < artifact.manifest.inputs_size(); ++i) {
    const std::string &name = artifact.manifest.inputs(i).name();
    std::string path = dataDir + "/" + name + ".npy";
    struct stat st;
    if (::stat(path.c_str(), &st) != 0)
      return fail(path + ": missing; the model needs input '" + name +
                  "' as a .npy file");
    if (!(s = smprt::readNpy(path, inputs[i])).ok())
      return fail(s.error);
    if (!(s = exec.setInput(name, inputs[i].ref(), path)).ok())
      return fail(s.error);
  }
  if (!profilePath.empty())
    exec.enableProfiling();
  auto start = std::chrono::steady_clock::now();
  if (!(s = exec.run()).ok())
    return fail(model + ": " + s.error);
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count();
  ::mkdir(outDir.c_str(), 0755);
  for (const auto &[name, ref] : exec.outputs()) {
    std::string path = outDir + "/" + name + ".npy";
    if (!(s = smprt::writeNpy(path, ref)).ok())
      return fail(s.error);
    std::cout << "wrote " << path << " (" << smprt::describe(ref) << ")\n";
  }
  if (!profilePath.empty()) {
    FILE *f = std::fopen(profilePath.c_str(), "w");
    if (!f)
      return fail(profilePath + ": cannot write");
    std::map<std::string, double> byOp;
    std::fprintf(f, "[\n");
    auto entries = exec.profile();
    for (size_t i = 0; i < entries.size(); ++i) {
      byOp[entries[i].op] += entries[i].seconds;
      std::fprintf(f, "  {\"op\": \"%s\", \"node\": \"%s\", \"seconds\": %.9f}%s\n",
                   entries[i].op.c_str(), jsonEscape(entries[i].loc).c_str(),
                   entries[i].seconds, i + 1 < entries.size() ? "," : "");
    }
    std::fprintf(f, "]\n");
    std::fclose(f);
    std::vector<std::pair<double, std::string>> sorted;
    for (const auto &[op, t] : byOp)
      sorted.emplace_back(t, op);
    std::sort(sorted.rbegin(), sorted.rend());
    std::printf("time per op (profile in %s):\n", profilePath.c_str());
    for (const auto &[t, op] : sorted)
      std::printf("  %-14s %8.3f s  %5.1f%%\n", op.c_str(), t,
                  100.0 * t / std::max(seconds, 1e-12));
  }
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  std::printf("ran %d instructions in %.3f s; arena %llu bytes planned, "
              "%llu bytes high-water; peak RSS %ld KiB\n",
              artifact.program.instructions_size(), seconds,
              static_cast<unsigned long long>(exec.arenaBytes()),
              static_cast<unsigned long long>(exec.highWaterBytes()),
              usage.ru_maxrss);
  return 0;
}
