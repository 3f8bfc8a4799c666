//===- ConvertRecurrent.cpp - LSTM, GRU and RNN, unrolled over time -------===//
//
// smp compiles static shapes, so a recurrent layer is unrolled over its
// sequence: the input projection of every step is one matmul ([seq, batch,
// input] x W^T) plus the biases, then each step adds H R^T and applies the
// gates with elementwise ops. The gradients are those of the ops (backprop
// through time), so nn.LSTM, nn.GRU and nn.RNN train as PyTorch trains them
// (torch.onnx.export writes them as these nodes, its weights reordered to
// ONNX's gate order and folded: trained as they are, the same values).
// Directions forward, reverse and bidirectional; layout 0 and 1; initial
// states; LSTM peepholes; GRU linear_before_reset 0 and 1. Refused: other
// activations than Sigmoid/Tanh/Relu, activation_alpha/beta, clip,
// input_forget and sequence_lens that are not the whole sequence (packed
// sequences).
//
//===----------------------------------------------------------------------===//

#include "Chain.h"
#include "smp/Dialect/Smp/IR/ShapeUtils.h"

using namespace mlir;

namespace smp::onnx_frontend {
namespace {

enum class Cell { LSTM, GRU, RNN };

struct Recurrent {
  Cell cell;
  int64_t gates;      // 4, 3, 1
  int64_t hidden = 0; // H
  int64_t seq = 0, batch = 0;
  bool batchFirst = false;
  bool linearBeforeReset = false;
  SmallVector<std::string> activations; // per direction: f, g, h
};

class RecurrentChain : public Chain {
public:
  RecurrentChain(NodeContext &nc, const Recurrent &r) : Chain(nc), r(r) {}

  Value act(llvm::StringRef name, Value x) {
    if (name == "Sigmoid")
      return unary<smp::SigmoidOp>(x);
    if (name == "Tanh")
      return unary<smp::TanhOp>(x);
    return unary<smp::ReluOp>(x);
  }
  Value add(Value a, Value b) { return binary<smp::AddOp>(a, b); }
  Value mul(Value a, Value b) { return binary<smp::MulOp>(a, b); }
  Value sub(Value a, Value b) { return binary<smp::SubOp>(a, b); }
  /// a [.., k] x b [n, k]^T.
  Value matmulT(Value a, Value b) {
    return make<smp::MatMulOp>(a, b, false, true);
  }
  /// Rows [g H, (g + 1) H) of the last dim: gate g.
  Value gate(Value x, int64_t g) {
    int64_t axis = shapeOf(x).size() - 1;
    return slice(x, axis, g * r.hidden, (g + 1) * r.hidden);
  }
  /// Direction d's slice [..] of a [num_dir, ..] tensor.
  Value direction(Value x, int64_t d) {
    SmallVector<int64_t> shape = shapeOf(x);
    shape.erase(shape.begin());
    return reshape(slice(x, 0, d, d + 1), shape);
  }

  /// One direction over the sequence: Y [seq, batch, H], final H and C.
  std::tuple<Value, Value, Value> run(Value x, Value w, Value rw, Value bias,
                                      Value h, Value c, Value peep,
                                      bool reverse, ArrayRef<std::string> fgh) {
    int64_t G = r.gates, H = r.hidden;
    // Every step's input projection at once, with the biases that do not
    // depend on the state (GRU keeps R's bias for its candidate gate).
    Value xw = matmulT(x, w);
    Value rb;
    if (bias) {
      Value wb = slice(bias, 0, 0, G * H);
      rb = slice(bias, 0, G * H, 2 * G * H);
      xw = add(xw, r.cell == Cell::GRU ? wb : add(wb, rb));
    }
    SmallVector<Value> ys(r.seq);
    for (int64_t k = 0; k < r.seq; ++k) {
      int64_t t = reverse ? r.seq - 1 - k : k;
      Value xt = reshape(slice(xw, 0, t, t + 1), {r.batch, G * H});
      Value hr = matmulT(h, rw);
      if (r.cell == Cell::LSTM) { // gates i, o, f, c
        Value g = add(xt, hr);
        Value gi = gate(g, 0), go = gate(g, 1), gf = gate(g, 2);
        if (peep) {
          gi = add(gi, mul(slice(peep, 0, 0, H), c));
          gf = add(gf, mul(slice(peep, 0, 2 * H, 3 * H), c));
        }
        Value i = act(fgh[0], gi), f = act(fgh[0], gf);
        c = add(mul(f, c), mul(i, act(fgh[1], gate(g, 3))));
        if (peep)
          go = add(go, mul(slice(peep, 0, H, 2 * H), c));
        h = mul(act(fgh[0], go), act(fgh[2], c));
      } else if (r.cell == Cell::GRU) { // gates z, r, h
        if (rb)
          hr = add(hr, rb);
        Value z = act(fgh[0], add(gate(xt, 0), gate(hr, 0)));
        Value rg = act(fgh[0], add(gate(xt, 1), gate(hr, 1)));
        Value cand;
        if (r.linearBeforeReset) {
          cand = mul(rg, gate(hr, 2));
        } else {
          cand = matmulT(mul(rg, h), slice(rw, 0, 2 * H, 3 * H));
          if (rb)
            cand = add(cand, slice(rb, 0, 2 * H, 3 * H));
        }
        Value n = act(fgh[1], add(gate(xt, 2), cand));
        h = add(n, mul(z, sub(h, n))); // (1 - z) n + z h, as PyTorch
      } else {
        h = act(fgh[0], add(xt, hr));
      }
      ys[t] = reshape(h, {1, r.batch, H});
    }
    return {make<smp::ConcatOp>(ys, nc.builder().getI64IntegerAttr(0)), h, c};
  }

private:
  const Recurrent &r;
};

/// The activations attribute (per direction), checked.
llvm::Expected<SmallVector<std::string>> activations(NodeContext &nc, Cell cell,
                                                     int64_t dirs) {
  SmallVector<std::string> def =
      cell == Cell::LSTM  ? SmallVector<std::string>{"Sigmoid", "Tanh", "Tanh"}
      : cell == Cell::GRU ? SmallVector<std::string>{"Sigmoid", "Tanh"}
                          : SmallVector<std::string>{"Tanh"};
  SmallVector<std::string> out;
  const auto *a = nc.attr("activations");
  if (!a || a->strings_size() == 0) {
    for (int64_t d = 0; d < dirs; ++d)
      out.append(def);
    return out;
  }
  if (a->strings_size() != static_cast<int>(def.size() * dirs))
    return nc.error("activations lists " + llvm::Twine(a->strings_size()) +
                    " functions, expected " + llvm::Twine(def.size() * dirs));
  for (const std::string &s : a->strings()) {
    if (s != "Sigmoid" && s != "Tanh" && s != "Relu")
      return nc.error("activation '" + s +
                      "' is not supported (Sigmoid, Tanh and Relu are)");
    out.push_back(s);
  }
  if (nc.hasAttr("activation_alpha") || nc.hasAttr("activation_beta"))
    return nc.error("activation_alpha/activation_beta are not supported");
  return out;
}

/// Checks and reads the node's shapes and attributes into `r`.
llvm::Error readRecurrent(NodeContext &nc, Recurrent &r, Value x, Value w,
                          int64_t &dirs, bool &reverse) {
  std::string direction = nc.attrString("direction", "forward");
  if (direction != "forward" && direction != "reverse" &&
      direction != "bidirectional")
    return nc.error("unknown direction '" + direction + "'");
  dirs = direction == "bidirectional" ? 2 : 1;
  reverse = direction == "reverse";
  if (nc.hasAttr("clip"))
    return nc.error("clip is not supported");
  if (nc.attrInt("input_forget", 0) != 0)
    return nc.error("input_forget=1 is not supported");
  r.batchFirst = nc.attrInt("layout", 0) != 0;
  r.linearBeforeReset = nc.attrInt("linear_before_reset", 0) != 0;
  SmallVector<int64_t> xs = shapeOf(x), ws = shapeOf(w);
  if (xs.size() != 3)
    return nc.error("X must be rank 3, got rank " + llvm::Twine(xs.size()));
  r.seq = r.batchFirst ? xs[1] : xs[0];
  r.batch = r.batchFirst ? xs[0] : xs[1];
  r.hidden = nc.attrInt("hidden_size", 0);
  if (ws.size() != 3 || ws[0] != dirs || ws[2] != xs[2] ||
      (r.hidden > 0 && ws[1] != r.gates * r.hidden) || ws[1] % r.gates != 0)
    return nc.error("W " + shapeToString(ws) + " must be [" +
                    llvm::Twine(dirs) + ", " + llvm::Twine(r.gates) +
                    " x hidden_size, " + llvm::Twine(xs[2]) + "]");
  r.hidden = ws[1] / r.gates;
  if (nc.hasInput(4)) { // sequence_lens: all the whole sequence, or refused
    DenseElementsAttr lens = nc.constantInput(4);
    bool whole = lens && isa<IntegerType>(lens.getElementType());
    if (whole)
      for (const APInt &v : lens.getValues<APInt>())
        whole &= v.getSExtValue() == r.seq;
    if (!whole)
      return nc.error("sequence_lens other than the whole sequence (" +
                      llvm::Twine(r.seq) +
                      " steps for every sample: packed sequences) are not "
                      "supported");
  }
  return llvm::Error::success();
}

llvm::Error convertRecurrent(NodeContext &nc, Cell cell) {
  Recurrent r{cell, cell == Cell::LSTM ? 4 : cell == Cell::GRU ? 3 : 1};
  auto in = nc.inputs(3);
  if (!in)
    return in.takeError();
  Value x = (*in)[0], w = (*in)[1], rw = (*in)[2];
  int64_t dirs;
  bool reverse;
  if (auto err = readRecurrent(nc, r, x, w, dirs, reverse))
    return err;
  auto fgh = activations(nc, cell, dirs);
  if (!fgh)
    return fgh.takeError();
  SmallVector<Value, 8> opt(8);
  for (unsigned i : {3u, 5u, 6u, 7u}) {
    auto v = nc.optionalInput(i);
    if (!v)
      return v.takeError();
    opt[i] = *v;
  }
  if (cell != Cell::LSTM && opt[6])
    return nc.error("initial_c is an LSTM input");
  RecurrentChain ch(nc, r);
  int64_t H = r.hidden, per = fgh->size() / dirs;
  if (r.batchFirst) // [batch, seq, ...] -> [seq, batch, ...]
    x = ch.make<smp::TransposeOp>(x,
                                  nc.builder().getDenseI64ArrayAttr({1, 0, 2}));
  Type elt = tensorType(x).getElementType();
  Value zeros = nc.splat(elt, {r.batch, H}, 0.0);
  auto initial = [&](Value v, int64_t d) {
    if (!v)
      return zeros;
    if (r.batchFirst) // [batch, num_dir, H]
      return ch.reshape(ch.slice(v, 1, d, d + 1), {r.batch, H});
    return ch.direction(v, d);
  };
  SmallVector<Value> ys, hs, cs;
  for (int64_t d = 0; d < dirs; ++d) {
    Value bias = opt[3] ? ch.direction(opt[3], d) : Value();
    Value peep = opt[7] ? ch.direction(opt[7], d) : Value();
    auto [y, h, c] =
        ch.run(x, ch.direction(w, d), ch.direction(rw, d), bias,
               initial(opt[5], d), initial(opt[6], d), peep, reverse || d == 1,
               ArrayRef(*fgh).slice(d * per, per));
    ys.push_back(ch.reshape(y, {r.seq, 1, r.batch, H}));
    hs.push_back(ch.reshape(h, {1, r.batch, H}));
    cs.push_back(ch.reshape(c, {1, r.batch, H}));
  }
  auto &b = nc.builder();
  Value y = ch.make<smp::ConcatOp>(ys, b.getI64IntegerAttr(1));
  Value yh = ch.make<smp::ConcatOp>(hs, b.getI64IntegerAttr(0));
  Value yc = cell == Cell::LSTM
                 ? ch.make<smp::ConcatOp>(cs, b.getI64IntegerAttr(0))
                 : Value();
  if (r.batchFirst) { // Y [batch, seq, num_dir, H]; Y_h [batch, num_dir, H]
    y = ch.make<smp::TransposeOp>(y, b.getDenseI64ArrayAttr({2, 0, 1, 3}));
    yh = ch.make<smp::TransposeOp>(yh, b.getDenseI64ArrayAttr({1, 0, 2}));
    if (yc)
      yc = ch.make<smp::TransposeOp>(yc, b.getDenseI64ArrayAttr({1, 0, 2}));
  }
  SmallVector<Value, 3> outs{y, yh, yc};
  for (unsigned i = 1; i < 3; ++i)
    if (nc.hasOutput(i))
      if (auto err = ch.finish(outs[i], i))
        return err;
  return ch.finish(y, 0);
}

} // namespace

void registerRecurrentConverters(ConverterTable &t) {
  t["LSTM"] = [](NodeContext &nc) { return convertRecurrent(nc, Cell::LSTM); };
  t["GRU"] = [](NodeContext &nc) { return convertRecurrent(nc, Cell::GRU); };
  t["RNN"] = [](NodeContext &nc) { return convertRecurrent(nc, Cell::RNN); };
}

} // namespace smp::onnx_frontend
