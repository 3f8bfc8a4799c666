//===- ConvertEinsum.cpp - Einsum as transposes, reshapes and matmuls -----===//
//
// Einsum(equation, operands...) contracts its operands pairwise, left to
// right. For a pair, the indices that appear in one operand only and are
// needed nowhere later are summed out first; then the shared indices still
// needed later are batch dims, the other shared ones are contracted, and
// each operand's own indices are kept: A is viewed as [batch, M, K], B as
// [batch, K, N], one smp.matmul, and the result viewed back. A single
// operand is summed over the indices the output lacks and transposed into
// its order. An ellipsis stands for the same dims in every operand (aligned
// from the right). Gradients are those of the ops. Refused: an index
// repeated within one operand (diagonals, traces) and an index whose sizes
// differ between operands (broadcasting of size 1).
//
//===----------------------------------------------------------------------===//

#include "Chain.h"

#include "llvm/ADT/StringExtras.h"

#include <map>

using namespace mlir;

namespace smp::onnx_frontend {
namespace {

/// One operand: its value and one index (a char) per dim.
struct Term {
  Value value;
  std::string idx;
};

/// The index letters of `spec` with its ellipsis (if any) expanded to the
/// last `ellipsisDims` of `ellipsis` (a string of fresh letters).
llvm::Expected<std::string> expandTerm(NodeContext &nc, llvm::StringRef spec,
                                       int64_t rank, llvm::StringRef ellipsis) {
  size_t dots = spec.find("...");
  std::string out;
  if (dots == llvm::StringRef::npos) {
    out = spec.str();
  } else {
    int64_t named = spec.size() - 3;
    int64_t e = rank - named;
    if (e < 0 || e > static_cast<int64_t>(ellipsis.size()))
      return nc.error("'" + spec + "' does not fit an operand of rank " +
                      llvm::Twine(rank));
    out = spec.take_front(dots).str() + ellipsis.take_back(e).str() +
          spec.drop_front(dots + 3).str();
  }
  if (static_cast<int64_t>(out.size()) != rank)
    return nc.error("'" + spec + "' names " + llvm::Twine(out.size()) +
                    " dims of an operand of rank " + llvm::Twine(rank));
  for (size_t i = 0; i < out.size(); ++i)
    if (out.find(out[i], i + 1) != std::string::npos)
      return nc.error("index '" + llvm::Twine(out[i]) + "' repeats in '" +
                      spec + "' (diagonals and traces are not supported)");
  return out;
}

class EinsumChain : public Chain {
public:
  EinsumChain(NodeContext &nc, std::map<char, int64_t> &sizes)
      : Chain(nc), sizes(sizes) {}

  /// t summed over its indices not in `keep`.
  Term sumOut(Term t, llvm::StringRef keep) {
    SmallVector<int64_t> axes;
    std::string rest;
    for (auto [d, c] : llvm::enumerate(t.idx)) {
      if (keep.contains(c))
        rest += c;
      else
        axes.push_back(d);
    }
    if (axes.empty())
      return t;
    return {make<smp::ReduceSumOp>(
                t.value, nc.builder().getDenseI64ArrayAttr(axes), false),
            rest};
  }
  /// t with its dims in the order of `order` (a permutation of t.idx),
  /// viewed as `groups` (consecutive runs of it) multiplied out (none: not
  /// reshaped).
  Value arrange(const Term &t, llvm::StringRef order,
                ArrayRef<llvm::StringRef> groups) {
    SmallVector<int64_t> perm;
    bool identity = true;
    for (char c : order) {
      perm.push_back(t.idx.find(c));
      identity &= perm.back() == static_cast<int64_t>(perm.size()) - 1;
    }
    Value v = t.value;
    if (!identity)
      v = make<smp::TransposeOp>(v, nc.builder().getDenseI64ArrayAttr(perm));
    if (groups.empty())
      return v;
    SmallVector<int64_t> shape;
    for (llvm::StringRef g : groups) {
      int64_t n = 1;
      for (char c : g)
        n *= sizes[c];
      shape.push_back(n);
    }
    return reshape(v, shape);
  }
  /// a and b contracted, keeping the indices in `keep`.
  Term contract(Term a, Term b, llvm::StringRef keep) {
    std::string keepA = keep.str() + b.idx, keepB = keep.str() + a.idx;
    a = sumOut(a, keepA);
    b = sumOut(b, keepB);
    std::string batch, inner, onlyA, onlyB;
    for (char c : a.idx) {
      bool shared = b.idx.find(c) != std::string::npos;
      (shared ? (keep.contains(c) ? batch : inner) : onlyA) += c;
    }
    for (char c : b.idx)
      if (a.idx.find(c) == std::string::npos)
        onlyB += c;
    Value va = arrange(a, batch + onlyA + inner, {batch, onlyA, inner});
    Value vb = arrange(b, batch + inner + onlyB, {batch, inner, onlyB});
    Value y = make<smp::MatMulOp>(va, vb, false, false);
    SmallVector<int64_t> shape;
    std::string idx = batch + onlyA + onlyB;
    for (char c : idx)
      shape.push_back(sizes[c]);
    return {reshape(y, shape), idx};
  }

private:
  std::map<char, int64_t> &sizes;
};

llvm::Error convertEinsum(NodeContext &nc) {
  std::string eq = nc.attrString("equation", "");
  eq.erase(llvm::remove_if(eq, [](char c) { return c == ' '; }), eq.end());
  if (eq.empty())
    return nc.error("the equation attribute is required");
  llvm::StringRef lhs = eq, out;
  bool explicitOut = false;
  if (size_t arrow = eq.find("->"); arrow != std::string::npos) {
    lhs = llvm::StringRef(eq).take_front(arrow);
    out = llvm::StringRef(eq).drop_front(arrow + 2);
    explicitOut = true;
  }
  SmallVector<llvm::StringRef> specs;
  lhs.split(specs, ',');
  auto in = nc.inputs(specs.size());
  if (!in)
    return in.takeError();
  if (nc.node().input_size() != static_cast<int>(specs.size()))
    return nc.error("the equation names " + llvm::Twine(specs.size()) +
                    " operands, the node has " +
                    llvm::Twine(nc.node().input_size()));
  // Fresh letters for the ellipsis dims (not used by the equation).
  std::string ellipsis;
  for (char c = 'A'; c <= 'Z' && ellipsis.size() < 8; ++c)
    if (eq.find(c) == std::string::npos)
      ellipsis += c;
  std::map<char, int64_t> sizes;
  SmallVector<Term> terms;
  int64_t ellipsisDims = 0;
  for (auto [spec, v] : llvm::zip(specs, *in)) {
    SmallVector<int64_t> shape = shapeOf(v);
    auto idx = expandTerm(nc, spec, shape.size(), ellipsis);
    if (!idx)
      return idx.takeError();
    if (spec.contains("..."))
      ellipsisDims =
          std::max<int64_t>(ellipsisDims, shape.size() - (spec.size() - 3));
    for (auto [c, n] : llvm::zip(*idx, shape)) {
      if (!llvm::isAlpha(c))
        return nc.error("'" + spec + "' holds '" + llvm::Twine(c) +
                        "', not a letter");
      auto [it, fresh] = sizes.insert({c, n});
      if (!fresh && it->second != n)
        return nc.error("index '" + llvm::Twine(c) + "' has size " +
                        llvm::Twine(it->second) + " and " + llvm::Twine(n) +
                        " (broadcasting is not supported)");
    }
    terms.push_back({v, *idx});
  }
  std::string target;
  if (explicitOut) {
    int64_t rank = out.contains("...") ? out.size() - 3 + ellipsisDims
                                       : static_cast<int64_t>(out.size());
    auto t = expandTerm(nc, out, rank, ellipsis);
    if (!t)
      return t.takeError();
    target = *t;
  } else { // the ellipsis dims, then the indices seen once, sorted
    target = ellipsis.substr(ellipsis.size() - ellipsisDims);
    std::string once;
    for (auto &[c, n] : sizes) {
      int count = 0;
      for (const Term &t : terms)
        count += llvm::count(t.idx, c);
      if (count == 1 && ellipsis.find(c) == std::string::npos)
        once += c;
    }
    target += once;
  }
  for (char c : target)
    if (!sizes.count(c))
      return nc.error("output index '" + llvm::Twine(c) + "' is in no operand");
  EinsumChain ch(nc, sizes);
  Term acc = terms[0];
  for (size_t k = 1; k < terms.size(); ++k) {
    std::string later = target;
    for (size_t j = k + 1; j < terms.size(); ++j)
      later += terms[j].idx;
    acc = ch.contract(acc, terms[k], later);
  }
  acc = ch.sumOut(acc, target);
  Value y = acc.value;
  if (acc.idx != target && !ch.failed())
    y = ch.arrange(acc, target, {}); // a transpose
  return ch.finish(y);
}

} // namespace

void registerEinsumConverters(ConverterTable &t) {
  t["Einsum"] = convertEinsum;
}

} // namespace smp::onnx_frontend
