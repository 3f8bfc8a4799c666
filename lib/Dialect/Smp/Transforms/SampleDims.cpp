//===- SampleDims.cpp - Where a forward's values hold the samples ---------===//
//
// See SampleDims.h. Each op's rule maps its operands' sample dims to its
// results'; a value's samples along dim d means: its index along d divided
// by (that dim's size / the micro-batch) is the sample. A reshape keeps that
// when the dims before d hold as many elements before and after it and the
// new dim is a multiple of the micro-batch (the samples are its outermost
// factor); anything the rules do not know ends in Unknown.
//
//===----------------------------------------------------------------------===//

#include "SampleDims.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Matchers.h"
#include "smp/Dialect/Smp/IR/ShapeUtils.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/IR/SmpTraits.h"

#include <optional>

using namespace mlir;

namespace smp {
namespace {

using State = SampleDims::State;

State none() { return {}; }
State at(int64_t d, int64_t inner = 1) {
  return {State::Dim, d, nullptr, "", inner};
}
State mixed(Operation *op, const char *why) {
  return {State::Mixed, 0, op, why};
}
State unknown(Operation *op) { return {State::Unknown, 0, op, ""}; }

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}
int64_t rankOf(Value v) { return shapeOf(v).size(); }

int64_t product(ArrayRef<int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims)
    p *= d;
  return p;
}

/// The dim of `out`, and its inner run, holding the samples that `in`
/// holds along dim `d` with inner run `inner`: a reshape keeps the
/// row-major order, so the samples keep their stride in it (inner times the
/// size of the dims after d), and must fall within one dim of `out`.
std::pair<int64_t, int64_t> reshapedDim(ArrayRef<int64_t> in, int64_t d,
                                        int64_t inner, ArrayRef<int64_t> out,
                                        int64_t samples) {
  int64_t stride = inner * product(in.drop_front(d + 1));
  // The outermost dim that can hold them (with one sample a dim of size 1
  // before the others can).
  for (int64_t r = 0, n = out.size(); r < n; ++r) {
    int64_t after = product(out.drop_front(r + 1));
    if (stride % after != 0 || out[r] % (stride / after * samples) != 0)
      continue;
    // One sample fits any dim with its stride: a dim of size 1 among the
    // dims of that stride is the batch's (its heads' dim, outermost,
    // would lose it: Funnel's relative shift reshapes [heads, 1, q, k]).
    if (samples == 1 && out[r] != 1 && stride == after && r + 1 < n &&
        out[r + 1] == 1)
      return {r + 1, 1};
    return {r, stride / after};
  }
  return {-1, 0};
}

/// The result dim of a matmul for operand `which` (0: lhs, 1: rhs) holding
/// its samples along `d`; -2 when `d` is the contracted dim.
int64_t matmulDim(Operation *op, unsigned which, int64_t d) {
  Value v = op->getOperand(which);
  int64_t r = rankOf(v), resultRank = rankOf(op->getResult(0));
  if (r < 2)
    return -1;
  auto flag = [&](StringRef name) {
    auto a = op->getAttrOfType<BoolAttr>(name);
    return a && a.getValue();
  };
  bool transposed = flag(which == 0 ? "transpose_lhs" : "transpose_rhs");
  if (d < r - 2)
    return d + resultRank - r; // a batch dim, aligned to the result's
  // lhs [M, K] (or [K, M]); rhs [K, N] (or [N, K]).
  bool outer =
      which == 0 ? (d == r - 2) != transposed : (d == r - 1) != transposed;
  if (!outer)
    return -2;
  return which == 0 ? resultRank - 2 : resultRank - 1;
}

} // namespace

SampleDims::SampleDims(func::FuncOp f) {
  Block &body = f.getBody().front();
  for (BlockArgument arg : body.getArguments()) {
    auto name = f.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                               SmpDialect::kInputAttr);
    if (!name || name.getValue().starts_with("@") || rankOf(arg) == 0)
      continue;
    states[arg] = at(0);
    if (!samples)
      samples = shapeOf(arg)[0];
  }
  if (samples <= 0)
    return; // no input: nothing holds samples
  for (Operation &op : body.without_terminator())
    visit(&op);
}

State SampleDims::of(Value v) const {
  auto it = states.find(v);
  return it == states.end() ? none() : it->second;
}

/// Sequence parallelism (smp-sequence-parallel) scatters a value's rows
/// (tokens) over the tensor-parallel ranks and works on them row by row
/// until it gathers them back whole: the gather of `v` along `axis` gives
/// the scattered value's rows again. The value scattered (along `axis`;
/// -1: any), or null.
static Value scatteredRows(const SampleDims::State &s, int64_t axis) {
  if (s.kind != SampleDims::State::Unknown || !s.op)
    return {};
  auto along = [&](const APInt &a) {
    return axis < 0 || a.getSExtValue() == axis;
  };
  if (auto scatter = dyn_cast<shard::ReduceScatterOp>(s.op);
      scatter && scatter.getGrid() == "tp" && along(scatter.getScatterAxis()))
    return scatter.getInput();
  if (auto slice = dyn_cast<shard::AllSliceOp>(s.op);
      slice && slice.getGrid() == "tp" && along(slice.getSliceAxis()))
    return slice.getInput();
  return {};
}

void SampleDims::visit(Operation *op) {
  if (auto gather = dyn_cast<shard::AllGatherOp>(op);
      gather && gather.getGrid() == "tp")
    if (Value rows = scatteredRows(of(gather.getInput()),
                                   gather.getGatherAxis().getSExtValue())) {
      if (State s = of(rows); s.kind != State::None)
        states[gather.getResult()] = s;
      return;
    }
  bool fromBatch = false;
  // The first op that mixed or lost the samples, a mix before a loss and a
  // loss before sequence parallelism's scattered rows (which its gather
  // gives back).
  std::optional<State> lost;
  auto rank = [](const State &s) {
    return s.kind == State::Mixed ? 0 : scatteredRows(s, -1) ? 2 : 1;
  };
  for (Value v : op->getOperands()) {
    State s = of(v);
    if (s.kind == State::Mixed || s.kind == State::Unknown) {
      if (!lost || rank(s) < rank(*lost))
        lost = s;
      continue;
    }
    fromBatch |= s.kind == State::Dim;
  }
  if (lost) {
    for (Value r : op->getResults())
      states[r] = *lost;
    return;
  }
  if (!fromBatch)
    return;
  for (unsigned i = 0; i < op->getNumResults(); ++i)
    states[op->getResult(i)] = transfer(op, i);
}

namespace {

/// The rules, given the operands' sample dims (some operand holds samples,
/// none has mixed or lost them). `at` = the state "samples along dim d".
class Rules {
public:
  Rules(const SampleDims &dims, Operation *op, unsigned result, int64_t samples)
      : dims(dims), op(op), res(op->getResult(result)), result(result),
        samples(samples), resultRank(rankOf(res)) {
    inner = 0;
    for (Value v : op->getOperands())
      if (State s = dims.of(v); s.kind == State::Dim) {
        sameInner &= inner == 0 || inner == s.inner;
        inner = s.inner;
      }
  }

  State apply() {
    if (!sameInner)
      return unknown(op);
    if (op->hasTrait<OpTrait::Elementwise>() ||
        op->hasTrait<OpTrait::smp::BroadcastingElementwise>() ||
        isa<TpCopyOp, ExpandOp>(op))
      return dimOr(aligned(op->getOperands()));
    // The sum of the tensor-parallel ranks' parts of the same samples
    // (after smp-tensor-parallel: a row-parallel matmul's output).
    if (auto sum = dyn_cast<shard::AllReduceOp>(op);
        sum && sum.getGrid() == "tp")
      return dimOr(aligned(op->getOperands()));
    // Sequence parallelism's scatter and gather of a dim beside the
    // samples' over the tensor-parallel ranks.
    if (auto scatter = dyn_cast<shard::ReduceScatterOp>(op);
        scatter && scatter.getGrid() == "tp")
      return besideSamples(scatter.getScatterAxis().getSExtValue());
    if (auto gather = dyn_cast<shard::AllGatherOp>(op);
        gather && gather.getGrid() == "tp")
      return besideSamples(gather.getGatherAxis().getSExtValue());
    if (isa<CastMultiOp>(op))
      return dimOr(aligned(op->getOperand(result)));
    if (auto sum = dyn_cast<AddMultiOp>(op))
      return dimOr(aligned(ValueRange{sum.getLhs(result), sum.getRhs(result)}));
    if (isa<ReshapeOp, TransposeOp, SliceOp, ConcatOp, SplitOp, TileOp,
            TriluOp>(op))
      return movement();
    if (isa<ReduceSumOp, ReduceMeanOp, ReduceMaxOp, SoftmaxOp, LogSoftmaxOp,
            CumSumOp, LayerNormOp, RmsNormOp, CrossEntropyOp>(op))
      return reduction();
    if (isa<GatherOp, GatherElementsOp, GatherElementsGradOp, GatherNdOp>(op))
      return gather();
    if (isa<BatchNormOp, ConvOp, MaxPoolOp, AvgPoolOp>(op)) {
      auto d = only(0);
      return d && *d == 0 ? at(0) : unknown(op);
    }
    if (isa<ConvGradOp>(op))
      return convGrad();
    if (isa<MatMulOp, MatMulAddOp, MatMulBiasOp, MatMulBiasAddOp,
            MatMulBiasGeluOp>(op))
      return matmul();
    if (isa<AttentionOp, PackedAttentionOp>(op)) {
      for (Value v : op->getOperands())
        if (State s = dims.of(v); s.kind == State::Dim && s.dim != 0)
          return unknown(op);
      return at(0);
    }
    return unknown(op);
  }

private:
  const SampleDims &dims;
  Operation *op;
  Value res;
  unsigned result;
  int64_t samples, resultRank;
  /// The operands' inner run (State::inner), and whether they agree on it.
  int64_t inner;
  bool sameInner = true;

  /// Samples along `d` with the operands' inner run.
  State at(int64_t d) { return smp::at(d, inner); }
  State dimOr(int64_t d) { return d >= 0 ? at(d) : unknown(op); }
  /// A collective along `axis` of the one operand: its samples (or none)
  /// stay where they are unless it splits or joins their dim.
  State besideSamples(int64_t axis) {
    State s = dims.of(op->getOperand(0));
    return s.kind == State::Dim && s.dim == axis ? unknown(op) : s;
  }
  int64_t dimOf(unsigned i) { return dims.of(op->getOperand(i)).dim; }
  /// `axis` as a dim of operand `i` (ONNX's negative axes, which the
  /// importer keeps, count from the end: a sample dim is never negative, so
  /// comparing the raw attribute would miss it).
  int64_t dimAt(int64_t axis, unsigned i = 0) {
    return normalizeAxis(axis, rankOf(op->getOperand(i))).value_or(axis);
  }
  /// `op`'s axis attribute `name` as a dim of operand `i`.
  int64_t axisAttr(StringRef name, unsigned i = 0) {
    return dimAt(op->getAttrOfType<IntegerAttr>(name).getInt(), i);
  }

  /// The one sample dim of the operands that hold samples, aligned to the
  /// result's rank (trailing dims align, as broadcasting does); -1 when
  /// they disagree or a broadcast stretches it.
  int64_t aligned(ValueRange operands) {
    int64_t dim = -2;
    for (Value v : operands) {
      State s = dims.of(v);
      if (s.kind != State::Dim)
        continue;
      int64_t a = s.dim + resultRank - rankOf(v);
      if (a < 0 || (dim != -2 && a != dim) ||
          shapeOf(v)[s.dim] != shapeOf(res)[a])
        return -1;
      dim = a;
    }
    return dim;
  }
  /// Operand `i`'s sample dim when it is the only operand holding samples.
  std::optional<int64_t> only(unsigned i) {
    for (unsigned j = 0; j < op->getNumOperands(); ++j)
      if (j != i && dims.of(op->getOperand(j)).kind == State::Dim)
        return std::nullopt;
    State s = dims.of(op->getOperand(i));
    if (s.kind != State::Dim)
      return std::nullopt;
    return s.dim;
  }

  /// A ConvTranspose (smp.conv_grad's input gradient: `grad` is its input,
  /// `input` only gives the output's shape): sample by sample along dim 0
  /// of both; the weight gradient sums over the samples.
  State convGrad() {
    if (dims.of(op->getOperand(1)).kind == State::Dim)
      return unknown(op);
    for (unsigned i : {0u, 2u})
      if (State s = dims.of(op->getOperand(i));
          s.kind == State::Dim && s.dim != 0)
        return unknown(op);
    return result == 0 ? at(0) : mixed(op, "reduces over the batch");
  }

  /// Reshape, transpose, slice, concat, split, tile, trilu.
  State movement() {
    if (auto r = dyn_cast<ReshapeOp>(op)) {
      auto d = only(0);
      if (!d)
        return unknown(op);
      auto [dim, run] =
          reshapedDim(shapeOf(r.getInput()), *d, inner, shapeOf(res), samples);
      return dim >= 0 ? smp::at(dim, run) : unknown(op);
    }
    if (auto t = dyn_cast<TransposeOp>(op)) {
      auto perm = t.getPerm();
      for (int64_t i = 0; i < static_cast<int64_t>(perm.size()); ++i)
        if (perm[i] == dimOf(0))
          return at(i);
      return unknown(op);
    }
    if (auto s = dyn_cast<SliceOp>(op)) {
      int64_t d = dimOf(0);
      if (s.getStarts()[d] == 0 && s.getSteps()[d] == 1 &&
          s.getLimits()[d] == shapeOf(s.getInput())[d])
        return at(d);
      return mixed(op, "takes part of the batch dim");
    }
    if (auto t = dyn_cast<TileOp>(op)) {
      if (t.getRepeats()[dimOf(0)] != 1)
        return mixed(op, "repeats the batch dim");
      return at(dimOf(0));
    }
    if (isa<TriluOp>(op)) {
      if (dimOf(0) >= resultRank - 2)
        return mixed(op, "masks across the batch dim");
      return at(dimOf(0));
    }
    // Concat, split.
    int64_t axis = axisAttr("axis");
    int64_t d = aligned(op->getOperands());
    if (d < 0)
      return unknown(op);
    if (d == axis)
      return mixed(op, isa<ConcatOp>(op) ? "concatenates along the batch dim"
                                         : "splits the batch dim");
    return at(d);
  }

  /// Reductions, softmaxes, cumulative sums, norms, the cross-entropy.
  State reduction() {
    if (auto ce = dyn_cast<CrossEntropyOp>(op)) {
      if (ce.getReduction() != Reduction::none)
        return mixed(op, "reduces over the batch");
      return dimOr(aligned(ce.getLabels()));
    }
    auto d = only(0);
    if (!d)
      return unknown(op);
    if (isa<ReduceSumOp, ReduceMeanOp, ReduceMaxOp>(op)) {
      SmallVector<int64_t> axes;
      for (int64_t a :
           op->getAttrOfType<DenseI64ArrayAttr>("axes").asArrayRef())
        axes.push_back(dimAt(a));
      if (llvm::is_contained(axes, *d))
        return mixed(op, "reduces over the batch dim");
      auto keep = op->getAttrOfType<BoolAttr>("keepdims");
      if (keep && !keep.getValue())
        return at(*d - llvm::count_if(axes, [&](int64_t a) { return a < *d; }));
      return at(*d);
    }
    if (isa<SoftmaxOp, LogSoftmaxOp, CumSumOp>(op)) {
      if (axisAttr("axis") == *d)
        return mixed(op, isa<CumSumOp>(op) ? "sums along the batch dim"
                                           : "normalises along the batch dim");
      return at(*d);
    }
    // Layer norm (over the dims from `axis`), RMS norm (the last dim).
    int64_t axis = resultRank - 1;
    if (op->getAttrOfType<IntegerAttr>("axis"))
      axis = axisAttr("axis");
    if (*d >= axis)
      return mixed(op, "normalises over the batch dim");
    return at(*d);
  }

  /// Whether constant `indices` along `axis` (whose other side, the data
  /// or the scattered result, is `other` long there) pair each position
  /// with a row of its own sample.
  bool ownSamples(Value indices, int64_t axis, int64_t other) {
    DenseElementsAttr idx;
    if (!matchPattern(indices, m_Constant(&idx)))
      return false;
    auto shape = shapeOf(indices);
    int64_t n = shape[axis];
    // Both sides sample-major along the axis (the samples its outermost
    // factor).
    if (n != samples * inner || other % samples != 0)
      return false;
    int64_t after = product(shape.drop_front(axis + 1)), k = 0;
    for (const APInt &v : idx.getValues<APInt>()) {
      int64_t at = (k++ / after) % n, to = v.getSExtValue();
      if (to < 0)
        to += other;
      if (at / (n / samples) != to / (other / samples))
        return false;
    }
    return true;
  }

  /// Whether constant GatherND `indices` [N, ..., K] pick, in component
  /// `c` (the data's samples dim, `other` long), a row of position p's own
  /// sample, p's sample given by its index along dim 0 (samples-major).
  bool ownSampleTuples(Value indices, int64_t c, int64_t other) {
    return ownSampleIndices(indices, c, other, shapeOf(indices).back());
  }
  /// The same for indices whose components are `width` long along the last
  /// dim (1: Gather's, each index a row of the data).
  bool ownSampleIndices(Value indices, int64_t c, int64_t other,
                        int64_t width) {
    DenseElementsAttr idx;
    if (!matchPattern(indices, m_Constant(&idx)))
      return false;
    auto shape = shapeOf(indices);
    if (shape.empty())
      return false;
    int64_t n = shape[0];
    if (n % samples != 0 || other % samples != 0)
      return false;
    int64_t perRow = product(shape.drop_front()), k = 0;
    for (const APInt &v : idx.getValues<APInt>()) {
      int64_t at = k / perRow;
      if (k++ % width != c)
        continue;
      int64_t to = v.getSExtValue();
      if (to < 0)
        to += other;
      if (at / (n / samples) != to / (other / samples))
        return false;
    }
    return true;
  }

  /// Whether component 0 of GatherND `indices` [N, K] (a concat along its
  /// last dim) is a constant piece picking, at each position, a row of its
  /// own sample of data `other` rows long.
  bool ownSampleComponent(Value indices, int64_t other) {
    auto cat = indices.getDefiningOp<ConcatOp>();
    int64_t last = rankOf(indices) - 1;
    if (!cat || (cat.getAxis() != last && cat.getAxis() != -1) ||
        cat.getNumOperands() < 2)
      return false;
    Value first = cat->getOperand(0);
    return shapeOf(first).back() == 1 && ownSampleTuples(first, 0, other);
  }

  State gather() {
    if (auto g = dyn_cast<GatherOp>(op)) {
      int64_t axis = axisAttr("axis");
      if (auto d = only(1))
        return at(*d + axis);
      auto d = only(0);
      if (!d)
        return unknown(op);
      if (*d != axis)
        return at(*d < axis ? *d : *d - 1 + rankOf(g.getIndices()));
      // Constant indices that pick, at each position, a row of the
      // position's own sample (along the indices' dim 0): an as_strided
      // view of the flattened samples (AdaptiveAvgPool1d's, Swin's pooler).
      if (ownSampleIndices(g.getIndices(), 0, shapeOf(g.getData())[axis], 1))
        return smp::at(axis, shapeOf(g.getIndices())[0] / samples);
      return mixed(op, "gathers along the batch dim");
    }
    if (auto g = dyn_cast<GatherNdOp>(op)) {
      State data = dims.of(g.getData()), idx = dims.of(g.getIndices());
      if (data.kind == State::Dim && idx.kind == State::Dim && data.dim == 0 &&
          idx.dim == 0 && g.getBatchDims() >= 1)
        return at(0);
      if (data.kind == State::None && idx.dim < rankOf(g.getIndices()) - 1)
        return at(idx.dim);
      // The samples in the slices gathered (aten.index on a later dim,
      // which the exporter moves first: data [S, ..., B, ...], indices the
      // same for every sample): out = indices[:-1] + data[batch_dims + k:].
      int64_t k = shapeOf(g.getIndices()).back(), first = g.getBatchDims() + k;
      if (data.kind == State::Dim && idx.kind == State::None &&
          k != ShapedType::kDynamic && data.dim >= first)
        return smp::at(rankOf(g.getIndices()) - 1 + data.dim - first,
                       data.inner);
      // A batch index in the tuple (HF's padding mask read as
      // mask[arange(B)[:, None, None, None], kv], folded to constants):
      // every position along the indices' dim 0 picks a row of its own
      // sample along the samples' dim of the data.
      if (data.kind == State::Dim && idx.kind == State::None &&
          g.getBatchDims() == 0 && data.inner == 1 &&
          k != ShapedType::kDynamic && data.dim < k &&
          ownSampleTuples(g.getIndices(), data.dim,
                          shapeOf(g.getData())[data.dim]))
        return smp::at(0, shapeOf(g.getIndices())[0] / samples);
      // Rows picked by the position's own sample in component 0, the rest
      // of the tuple computed from that sample (a decoder classifier's
      // pooled logits, logits[arange(B), last_token]: the arange folded to
      // a constant, concatenated with indices from the sample's ids).
      if (data.kind == State::Dim && idx.kind == State::Dim && data.dim == 0 &&
          idx.dim == 0 && data.inner == 1 && idx.inner == 1 &&
          g.getBatchDims() == 0 && k != ShapedType::kDynamic &&
          ownSampleComponent(g.getIndices(), shapeOf(g.getData())[0]))
        return at(0);
      return unknown(op);
    }
    // GatherElements (data, indices), its gradient (indices, updates):
    // along the sample dim only with constant indices within each sample
    // (an in-place assignment's ScatterND on rows [B * S, ...]).
    bool scatter = isa<GatherElementsGradOp>(op);
    int64_t axis = axisAttr("axis", scatter ? 1 : 0);
    Value indices = op->getOperand(scatter ? 0 : 1);
    Value other = scatter ? res : op->getOperand(0);
    State s = dims.of(op->getOperand(scatter ? 1 : 0));
    if (s.kind == State::Dim && s.dim == axis) {
      int64_t otherDim = shapeOf(other)[axis];
      if (ownSamples(indices, axis, otherDim))
        return scatter ? smp::at(axis, otherDim / samples) : at(axis);
      return mixed(op, "gathers along the batch dim");
    }
    return dimOr(aligned(op->getOperands()));
  }

  State matmul() {
    int64_t dim = -2;
    for (unsigned i = 0; i < op->getNumOperands(); ++i) {
      State s = dims.of(op->getOperand(i));
      if (s.kind != State::Dim)
        continue;
      // matmul_add's and matmul_bias_add's addends have the result's dims.
      bool addend = (i == 2 && isa<MatMulAddOp>(op)) ||
                    (i == 3 && isa<MatMulBiasAddOp>(op));
      int64_t r = i < 2 ? matmulDim(op, i, s.dim) : addend ? s.dim : -1;
      if (r == -2)
        return mixed(op, "contracts over the batch dim");
      if (r >= 0 && dim != -2 && r != dim)
        return mixed(op, "pairs every sample with every other");
      if (r < 0)
        return unknown(op);
      dim = r;
    }
    return at(dim);
  }
};

} // namespace

State SampleDims::transfer(Operation *op, unsigned result) {
  return Rules(*this, op, result, samples).apply();
}

bool SampleDims::leading(Value v) const {
  State s = of(v);
  return s.kind == State::Dim && s.dim == 0 &&
         shapeOf(v)[0] == samples * s.inner;
}

std::string SampleDims::notLeading(Value v) const {
  if (leading(v))
    return "";
  State s = of(v);
  if (s.kind == State::Mixed || s.kind == State::Unknown)
    return lostSamples(s);
  if (s.kind == State::None)
    return "it holds no samples (computed from parameters and constants "
           "only)";
  return "it holds the batch's samples along dim " + std::to_string(s.dim) +
         (s.dim == 0 ? " interleaved with another dim" : "") +
         ", not sample-major along dim 0";
}

std::string SampleDims::lostSamples(const State &s) {
  std::string op = "'" + s.op->getName().getStringRef().str() + "'";
  return s.kind == State::Mixed
             ? op + " " + s.why + ", mixing the batch's samples"
             : "smp cannot follow the batch's samples through " + op;
}

LogicalResult SampleDims::check(Value v, StringRef what, int64_t wantDim,
                                int64_t dp, int64_t microbatches) const {
  State s = of(v);
  // Along dim `wantDim`, sample-major (the loss's own input is split there
  // in contiguous runs of samples).
  auto shape = cast<RankedTensorType>(v.getType()).getShape();
  if (s.kind == State::None ||
      (s.kind == State::Dim &&
       (wantDim < 0 ||
        (s.dim == wantDim && shape[s.dim] == samples * s.inner))))
    return success();
  std::string split = "--dp " + std::to_string(dp) + " x " +
                      std::to_string(microbatches) + " micro-batch(es)";
  const char *todo = "; compile this model with one replica and one "
                     "micro-batch (smp synchronises only BatchNorm's "
                     "statistics over the batch)";
  if (s.kind == State::Mixed)
    return s.op->emitError()
           << lostSamples(s) << ": under " << split
           << " each shard computes it from its own samples only, so " << what
           << " would not be the one-device value" << todo;
  if (s.kind == State::Unknown)
    return s.op->emitError()
           << lostSamples(s) << ", so it cannot tell that " << what
           << " is computed sample by sample under " << split << todo;
  Operation *def = v.getDefiningOp();
  return (def ? def->emitError() : emitError(v.getLoc()))
         << what << " holds the batch's samples along dim " << s.dim
         << (s.dim == wantDim ? " interleaved with another dim" : "")
         << ", but smp splits the batch along dim " << wantDim << " under "
         << split << todo;
}

} // namespace smp
