//===- ConvertSequence.cpp - ONNX sequences of tensors --------------------===//
//
// The dynamo exporter with optimize=False writes `torch.split` and
// `torch.chunk` (GPT-J's and CodeGen's rotary halves, MPT's and Phi-3's
// fused QKV, GPT-BigCode's key/value) as SplitToSequence and reads the parts
// with SequenceAt at constant positions; the optimiser rewrites them into a
// Split. A sequence is never a tensor here: the importer keeps its tensors
// (GraphImporter::sequences) and SequenceAt picks one, so the IR holds only
// the smp.split, which every backend runs and differentiates.
// SequenceConstruct, SequenceLength and ConcatFromSequence complete the
// forms a traced graph writes; ops that change a sequence at run time
// (SequenceInsert, SequenceErase, loops) are not supported.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"
#include "smp/Dialect/Smp/IR/ShapeUtils.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"

using namespace mlir;

namespace smp::onnx_frontend {
namespace {

/// The sizes SplitToSequence cuts a dim of `dim` into: input 1 a scalar
/// (chunks of that size, the last smaller), a 1-D list of sizes, or absent
/// (chunks of 1).
llvm::Expected<SmallVector<int64_t>> sequenceSplitSizes(NodeContext &nc,
                                                        int64_t dim) {
  SmallVector<int64_t> sizes;
  if (!nc.hasInput(1)) {
    sizes.assign(dim, 1);
    return sizes;
  }
  auto split = nc.constantInts(1, "split");
  if (!split)
    return split.takeError();
  DenseElementsAttr attr = nc.constantInput(1);
  if (attr.getType().getRank() == 0) {
    int64_t chunk = split->front();
    if (chunk <= 0)
      return nc.error("split size " + llvm::Twine(chunk) + " must be positive");
    for (int64_t at = 0; at < dim; at += chunk)
      sizes.push_back(std::min(chunk, dim - at));
    return sizes;
  }
  int64_t sum = 0;
  for (int64_t s : *split) {
    if (s < 0)
      return nc.error("split size " + llvm::Twine(s) + " is negative");
    sum += s;
  }
  if (sum != dim)
    return nc.error("split sizes sum to " + llvm::Twine(sum) +
                    ", not the dim's " + llvm::Twine(dim));
  sizes.assign(split->begin(), split->end());
  return sizes;
}

llvm::Error convertSplitToSequence(NodeContext &nc) {
  auto x = nc.input(0);
  if (!x)
    return x.takeError();
  SmallVector<int64_t> in = shapeOf(*x);
  auto axis = nc.attrAxis(0, in.size());
  if (!axis)
    return axis.takeError();
  auto sizes = sequenceSplitSizes(nc, in[*axis]);
  if (!sizes)
    return sizes.takeError();
  if (sizes->empty())
    return nc.error("splits a dim of 0 elements into no tensors");
  SmallVector<Type> types(sizes->size(), nc.placeholder());
  auto parts = nc.createMulti<smp::SplitOp>(
      TypeRange(types), *x, nc.builder().getI64IntegerAttr(*axis),
      nc.builder().getDenseI64ArrayAttr(*sizes));
  if (!parts)
    return parts.takeError();
  // Without `split`, keepdims=0 drops the split dim of each part.
  if (!nc.hasInput(1) && nc.attrInt("keepdims", 1) == 0) {
    SmallVector<int64_t> squeezed(in);
    squeezed.erase(squeezed.begin() + *axis);
    for (Value &part : *parts) {
      auto s = nc.reshape(part, squeezed);
      if (!s)
        return s.takeError();
      part = *s;
    }
  }
  nc.setSequenceOutput(0, *parts);
  return llvm::Error::success();
}

llvm::Error convertSequenceAt(NodeContext &nc) {
  auto seq = nc.sequenceInput(0);
  if (!seq)
    return seq.takeError();
  auto position = nc.constantInt(1, "position");
  if (!position)
    return position.takeError();
  int64_t n = seq->size(), at = *position < 0 ? *position + n : *position;
  if (at < 0 || at >= n)
    return nc.error("position " + llvm::Twine(*position) +
                    " is outside a sequence of " + llvm::Twine(n) + " tensors");
  nc.setOutput(0, (*seq)[at]);
  return llvm::Error::success();
}

llvm::Error convertSequenceConstruct(NodeContext &nc) {
  auto values = nc.inputs(nc.numInputs());
  if (!values)
    return values.takeError();
  for (Value v : *values)
    if (tensorType(v).getElementType() !=
        tensorType(values->front()).getElementType())
      return nc.error("the tensors of a sequence must have one element type");
  nc.setSequenceOutput(0, *values);
  return llvm::Error::success();
}

llvm::Error convertSequenceLength(NodeContext &nc) {
  auto seq = nc.sequenceInput(0);
  if (!seq)
    return seq.takeError();
  nc.setOutput(0, nc.constantOf(nc.builder().getI64Type(), {},
                                {static_cast<double>(seq->size())}));
  return llvm::Error::success();
}

/// ConcatFromSequence(seq) {axis, new_axis}: a Concat of the tensors, or
/// with new_axis=1 a stack (each unsqueezed at `axis` first).
llvm::Error convertConcatFromSequence(NodeContext &nc) {
  auto seq = nc.sequenceInput(0);
  if (!seq)
    return seq.takeError();
  if (seq->empty())
    return nc.error("concatenates an empty sequence");
  if (!nc.hasAttr("axis"))
    return nc.error("missing attribute 'axis'");
  bool stack = nc.attrInt("new_axis", 0) == 1;
  SmallVector<int64_t> shape = shapeOf(seq->front());
  int64_t rank = shape.size() + (stack ? 1 : 0);
  auto axis = nc.attrAxis(0, rank);
  if (!axis)
    return axis.takeError();
  SmallVector<Value> values(seq->begin(), seq->end());
  if (stack)
    for (Value &v : values) {
      SmallVector<int64_t> s = shapeOf(v);
      s.insert(s.begin() + *axis, 1);
      auto r = nc.reshape(v, s);
      if (!r)
        return r.takeError();
      v = *r;
    }
  return nc.output(nc.create<smp::ConcatOp>(
      nc.placeholder(), values, nc.builder().getI64IntegerAttr(*axis)));
}

} // namespace

void registerSequenceConverters(ConverterTable &t) {
  t["SplitToSequence"] = convertSplitToSequence;
  t["SequenceAt"] = convertSequenceAt;
  t["SequenceConstruct"] = convertSequenceConstruct;
  t["SequenceLength"] = convertSequenceLength;
  t["ConcatFromSequence"] = convertConcatFromSequence;
}

} // namespace smp::onnx_frontend
