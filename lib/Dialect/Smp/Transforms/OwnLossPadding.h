//===- OwnLossPadding.h - Whether padding leaves a model's loss alone -*- C++
//-*-===//
//
// An evaluation pads a short last batch with samples whose labels (an
// input) are -100 (smp-mark-eval-padding). A model's own loss output (an
// export of a module that returns its loss, `--loss NAME`: a Hugging Face
// language model's `loss`) then equals the real samples' loss alone only
// for some forms, which OwnLossPadding reads: cross-entropies ignoring
// -100 whose labels are that input's values (sliced, reshaped, shifted by
// a concat with -100), sums of values that vanish where the labels are
// -100 (an NLL loss's weighted picks, the count of the labels kept), terms
// without the batch, and sums, products, quotients, negations and constant
// scalings of those. A mean over every element counts the padding, and a
// constant folded from the batch's shape (sum / x.size(0)) holds the
// global batch, not the short one. Nor can padding set labels the model
// also reads as data (an embedding's indices) to -100.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_LIB_TRANSFORMS_OWNLOSSPADDING_H
#define SMP_LIB_TRANSFORMS_OWNLOSSPADDING_H

#include "SampleDims.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <optional>
#include <string>

namespace smp {

class OwnLossPadding {
public:
  OwnLossPadding(mlir::func::FuncOp f, const SampleDims &dims)
      : f(f), dims(dims) {}

  /// Empty when padding samples whose `labels()` are -100 leave the scalar
  /// `loss` (the output named `name`) at the real samples' value; else why
  /// not, a sentence part after "a short last batch left out: ".
  std::string whyNot(mlir::Value loss, llvm::StringRef name);
  /// The input the padding's labels -100 go to (set by whyNot).
  const std::string &labels() const { return labelsInput; }
  /// Why padding samples cannot set the input `labels` to -100: the model
  /// reads it other than as labels (moved into a cross-entropy's labels,
  /// compared, or replaced where it is -100, as T5 makes its decoder's
  /// inputs): an embedding's indices, where -100 is out of range. Empty
  /// when it does not (or there is no such input).
  std::string readAsData(llvm::StringRef labels);

private:
  mlir::func::FuncOp f;
  const SampleDims &dims;
  std::string labelsInput;
  llvm::DenseMap<mlir::Value, bool> batchMemo;

  /// Why `v` (a part of the loss) changes with padding samples ("" if not).
  std::string padFree(mlir::Value v);
  std::string crossEntropy(mlir::Operation *op);
  /// Whether every element of a padding sample of `v` is -100.
  bool ignoredAtPadding(mlir::Value v);
  /// Whether every element of a padding sample of `v` is 0.
  bool vanishes(mlir::Value v);
  /// What the boolean `v` is at every element of a padding sample, when
  /// known.
  std::optional<bool> atPadding(mlir::Value v);
  bool fromBatch(mlir::Value v);
  /// The op that reads `v` (derived from the labels) other than as labels.
  mlir::Operation *dataReader(mlir::Value v, llvm::DenseSet<mlir::Value> &seen);
};

} // namespace smp

#endif // SMP_LIB_TRANSFORMS_OWNLOSSPADDING_H
