//===- Models.h - GPT and LLaMA decoder configurations ----------*- C++ -*-===//

#ifndef SMP_TOOLS_MODELGEN_MODELS_H
#define SMP_TOOLS_MODELGEN_MODELS_H

#include "GraphBuilder.h"

#include <cstdint>
#include <optional>
#include <string>

namespace smp::modelgen {

struct ModelConfig {
  std::string kind; ///< "gpt" or "llama"
  int64_t layers = 0, hidden = 0, heads = 0, seq = 0, vocab = 0;
  int64_t kvHeads = 0; ///< llama only; 0: = heads
  int64_t ffn = 0;     ///< 0: the kind's default (see completeDefaults)
  int64_t batch = 0;   ///< 0: unset (1 in .mlir, symbolic in .onnx)
  bool ffnDefaulted = false; ///< set by completeDefaults
  float eps = 1e-5f;
  double ropeTheta = 10000.0;

  int64_t headDim() const { return hidden / heads; }
};

/// The largest values the tool accepts (larger ones are refused with an
/// error, so no shape arithmetic can overflow).
constexpr int64_t kMaxLayers = 10000;
constexpr int64_t kMaxSeq = int64_t(1) << 20;
constexpr int64_t kMaxSize = int64_t(1) << 31;
/// No tensor and no total may exceed this many elements.
constexpr int64_t kMaxElements = int64_t(1) << 62;

/// Fills in the defaults: ffn (gpt: 4 x hidden; llama: Meta's rule, 2/3 of
/// 4 x hidden rounded up to a multiple of 256) and kv-heads (= heads).
void completeDefaults(ModelConfig &c);

/// Checks a completed config; returns a one-line error (without the tool
/// name) or nothing.
std::optional<std::string> validate(const ModelConfig &c);

/// The exact parameter count of a valid config, in closed form:
///   gpt:   V*H + S*H + L*(4H^2 + 2*F*H + 9H + F) + 2H
///          (= V*H + S*H + L*(12H^2 + 13H) + 2H for F = 4H)
///   llama: 2*V*H + L*(2H^2 + 2*H*Hkv + 3*H*F + 2H) + H, Hkv = kv_heads*H/heads
int64_t parameterCount(const ModelConfig &c);

/// Emits the model through `b`. `batch` is the batch dim the shapes use
/// (the ONNX writer replaces it by a symbolic dim when unset).
void buildModel(const ModelConfig &c, int64_t batch, GraphBuilder &b);

} // namespace smp::modelgen

#endif // SMP_TOOLS_MODELGEN_MODELS_H
