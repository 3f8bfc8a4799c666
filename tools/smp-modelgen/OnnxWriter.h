//===- OnnxWriter.h - The model as an ONNX file with random weights -*- C++ -*-===//

#ifndef SMP_TOOLS_MODELGEN_ONNXWRITER_H
#define SMP_TOOLS_MODELGEN_ONNXWRITER_H

#include "Models.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <random>
#include <string>

namespace smp::modelgen {

/// Models with more parameters than this are refused for .onnx (every
/// weight is written into the file: 1.6 GB of f32, under protobuf's 2 GiB
/// message limit).
constexpr int64_t kMaxOnnxParameters = 400'000'000;

/// Deterministic normal samples: std::mt19937_64 (whose output the
/// standard fixes) and Box-Muller, so a seed gives the same weights with any
/// standard library.
class NormalRng {
public:
  explicit NormalRng(uint64_t seed) : gen(seed) {}
  double next();
  uint64_t bits() { return gen(); }

private:
  std::mt19937_64 gen;
  bool hasSpare = false;
  double spare = 0;
};

/// Writes the model as ONNX (opset 17, IR version 8): input `idx` int64
/// [batch, seq] (batch symbolic unless config.batch is set), output
/// `logits` float [batch, seq, vocab], initializers drawn from N(0, 0.02)
/// (weights and embeddings; norm scales 1, biases 0) with `seed`. The graph
/// is checked with onnx::checker before it is written.
llvm::Error writeOnnxModel(const ModelConfig &config, uint64_t seed,
                           const std::string &path);

/// Writes DIR/idx.npy and DIR/labels.npy: `samples` random token sequences
/// of seq + 1 tokens (seeded), idx the first seq, labels the last seq (the
/// next token), both int64 [samples, seq].
llvm::Error writeTrainingData(const ModelConfig &config, uint64_t seed,
                              const std::string &dir, int64_t samples);

} // namespace smp::modelgen

#endif // SMP_TOOLS_MODELGEN_ONNXWRITER_H
