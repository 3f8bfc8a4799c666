//===- KernelTable.cpp - Instruction -> CPU kernel call -------------------===//
//
// One entry per smp op: checks the instruction's arity and attributes once,
// at load time, and returns a closure over arena views that calls the
// kernel. Adding an op to the compiler means adding its line here.
//
//===----------------------------------------------------------------------===//

#include "smp/kernels/cpu/Kernels.h"
#include "smp/kernels/cpu/Training.h"
#include "smprt/Executor.h"

#include <cstring>
#include <map>

namespace smprt {
namespace {

namespace k = smp::kernels::cpu;
using Inst = smp::artifact::Instruction;

/// Decoding context: operands, results and attributes of one instruction.
struct Decoder {
  const Inst &inst;
  const std::vector<TensorRef> &buffers;
  Communicator &comm; // for the communication steps
  std::string error;

  bool arity(int minIn, int maxIn, int numOut) {
    int in = inst.inputs_size(), out = inst.outputs_size();
    if (in < minIn || in > maxIn || (numOut >= 0 && out != numOut)) {
      error = "has " + std::to_string(in) + " inputs and " +
              std::to_string(out) + " outputs";
      return false;
    }
    return true;
  }
  TensorRef in(int i) const { return buffers[inst.inputs(i)]; }
  TensorRef out(int i = 0) const { return buffers[inst.outputs(i)]; }
  const smp::artifact::Attribute *attr(const char *name) const {
    auto it = inst.attrs().find(name);
    return it == inst.attrs().end() ? nullptr : &it->second;
  }
  int64_t i(const char *name, int64_t def) const {
    const auto *a = attr(name);
    return a && a->has_i() ? a->i() : def;
  }
  double f(const char *name, double def) const {
    const auto *a = attr(name);
    return a && a->has_f() ? a->f() : def;
  }
  std::string s(const char *name, const char *def) const {
    const auto *a = attr(name);
    return a && a->has_s() ? a->s() : def;
  }
  std::vector<int64_t> ints(const char *name) const {
    const auto *a = attr(name);
    if (!a || !a->has_ints())
      return {};
    return {a->ints().values().begin(), a->ints().values().end()};
  }
  bool require(const char *name) {
    if (attr(name))
      return true;
    error = std::string("misses attribute '") + name + "'";
    return false;
  }
};

using Builder = bool (*)(Decoder &, Step &);

template <k::UnaryOp Op> bool unaryStep(Decoder &d, Step &s) {
  if (!d.arity(1, 1, 1))
    return false;
  s.run = [in = d.in(0), out = d.out()] { return k::unary(Op, in, out); };
  return true;
}

template <k::BinaryOp Op> bool binaryStep(Decoder &d, Step &s) {
  if (!d.arity(2, 2, 1))
    return false;
  s.run = [a = d.in(0), b = d.in(1), out = d.out()] {
    return k::binary(Op, a, b, out);
  };
  return true;
}

template <k::ReduceOp Op> bool reduceStep(Decoder &d, Step &s) {
  if (!d.arity(1, 1, 1) || !d.require("axes"))
    return false;
  s.run = [in = d.in(0), out = d.out(), axes = d.ints("axes")] {
    return k::reduce(Op, in, axes, out);
  };
  return true;
}

template <bool Log> bool softmaxStep(Decoder &d, Step &s) {
  if (!d.arity(1, 1, 1) || !d.require("axis"))
    return false;
  s.run = [in = d.in(0), out = d.out(), axis = d.i("axis", -1)] {
    return Log ? k::logSoftmax(in, axis, out) : k::softmax(in, axis, out);
  };
  return true;
}

bool geluStep(Decoder &d, Step &s) {
  if (!d.arity(1, 1, 1))
    return false;
  bool tanh = d.s("approximate", "none") == "tanh";
  s.run = [in = d.in(0), out = d.out(), tanh] {
    return k::gelu(in, tanh, out);
  };
  return true;
}

bool leakyReluStep(Decoder &d, Step &s) {
  if (!d.arity(1, 1, 1) || !d.require("alpha"))
    return false;
  s.run = [in = d.in(0), out = d.out(), alpha = float(d.f("alpha", 0.01))] {
    return k::leakyRelu(in, alpha, out);
  };
  return true;
}

bool castStep(Decoder &d, Step &s) {
  if (!d.arity(1, 1, 1))
    return false;
  s.run = [in = d.in(0), out = d.out()] { return k::cast(in, out); };
  return true;
}

bool whereStep(Decoder &d, Step &s) {
  if (!d.arity(3, 3, 1))
    return false;
  s.run = [c = d.in(0), a = d.in(1), b = d.in(2), out = d.out()] {
    return k::where(c, a, b, out);
  };
  return true;
}

bool matmulStep(Decoder &d, Step &s) {
  if (!d.arity(2, 2, 1))
    return false;
  s.run = [a = d.in(0), b = d.in(1), out = d.out(),
           ta = d.i("transpose_lhs", 0) != 0,
           tb = d.i("transpose_rhs", 0) != 0] {
    return k::matmul(a, b, out, ta, tb);
  };
  return true;
}

bool layerNormStep(Decoder &d, Step &s) {
  if (!d.arity(2, 3, 1) || !d.require("axis") || !d.require("epsilon"))
    return false;
  bool hasBias = d.inst.inputs_size() == 3;
  s.run = [x = d.in(0), scale = d.in(1),
           bias = hasBias ? d.in(2) : TensorRef(), hasBias, out = d.out(),
           axis = d.i("axis", -1), eps = float(d.f("epsilon", 1e-5))] {
    return k::layerNorm(x, scale, hasBias ? &bias : nullptr, axis, eps, out);
  };
  return true;
}

bool rmsNormStep(Decoder &d, Step &s) {
  if (!d.arity(2, 2, 1) || !d.require("epsilon"))
    return false;
  s.run = [x = d.in(0), scale = d.in(1), out = d.out(),
           eps = float(d.f("epsilon", 1e-6))] {
    return k::rmsNorm(x, scale, eps, out);
  };
  return true;
}

bool batchNormStep(Decoder &d, Step &s) {
  if (!d.arity(5, 5, 1) || !d.require("epsilon"))
    return false;
  s.run = [x = d.in(0), sc = d.in(1), b = d.in(2), m = d.in(3), v = d.in(4),
           out = d.out(), eps = float(d.f("epsilon", 1e-5))] {
    return k::batchNorm(x, sc, b, m, v, eps, out);
  };
  return true;
}

bool crossEntropyStep(Decoder &d, Step &s) {
  if (!d.arity(2, 3, 1))
    return false;
  bool hasWeights = d.inst.inputs_size() == 3;
  std::string red = d.s("reduction", "mean");
  k::Reduction r = red == "none"  ? k::Reduction::None
                   : red == "sum" ? k::Reduction::Sum
                                  : k::Reduction::Mean;
  if (red != "none" && red != "sum" && red != "mean") {
    d.error = "unknown reduction '" + red + "'";
    return false;
  }
  s.run = [l = d.in(0), y = d.in(1), out = d.out(),
           w = hasWeights ? d.in(2) : TensorRef(), hasWeights,
           ignore = d.i("ignore_index", -100), r] {
    return k::crossEntropy(l, y, ignore, r, out, hasWeights ? &w : nullptr);
  };
  return true;
}

bool transposeStep(Decoder &d, Step &s) {
  if (!d.arity(1, 1, 1) || !d.require("perm"))
    return false;
  s.run = [in = d.in(0), out = d.out(), perm = d.ints("perm")] {
    return k::transpose(in, perm, out);
  };
  return true;
}

bool expandStep(Decoder &d, Step &s) {
  if (!d.arity(1, 1, 1))
    return false;
  s.run = [in = d.in(0), out = d.out()] { return k::expand(in, out); };
  return true;
}

bool sliceStep(Decoder &d, Step &s) {
  if (!d.arity(1, 1, 1) || !d.require("starts") || !d.require("steps"))
    return false;
  s.run = [in = d.in(0), out = d.out(), starts = d.ints("starts"),
           steps = d.ints("steps")] {
    return k::slice(in, starts, steps, out);
  };
  return true;
}

bool concatStep(Decoder &d, Step &s) {
  if (!d.arity(1, 1 << 20, 1) || !d.require("axis"))
    return false;
  std::vector<TensorRef> inputs;
  for (int i = 0; i < d.inst.inputs_size(); ++i)
    inputs.push_back(d.in(i));
  s.run = [inputs, out = d.out(), axis = d.i("axis", 0)] {
    return k::concat(inputs, axis, out);
  };
  return true;
}

bool splitStep(Decoder &d, Step &s) {
  if (!d.arity(1, 1, -1) || !d.require("axis"))
    return false;
  std::vector<TensorRef> outputs;
  for (int i = 0; i < d.inst.outputs_size(); ++i)
    outputs.push_back(d.out(i));
  s.run = [in = d.in(0), outputs, axis = d.i("axis", 0)] {
    return k::split(in, axis, outputs);
  };
  return true;
}

bool gatherStep(Decoder &d, Step &s) {
  if (!d.arity(2, 2, 1) || !d.require("axis"))
    return false;
  s.run = [data = d.in(0), idx = d.in(1), out = d.out(),
           axis = d.i("axis", 0)] { return k::gather(data, idx, axis, out); };
  return true;
}

bool triluStep(Decoder &d, Step &s) {
  if (!d.arity(1, 1, 1) || !d.require("upper"))
    return false;
  s.run = [in = d.in(0), out = d.out(), upper = d.i("upper", 1) != 0,
           kk = d.i("k", 0)] { return k::trilu(in, upper, kk, out); };
  return true;
}

bool convStep(Decoder &d, Step &s) {
  if (!d.arity(2, 3, 1) || !d.require("group"))
    return false;
  bool hasBias = d.inst.inputs_size() == 3;
  s.run = [x = d.in(0), w = d.in(1), bias = hasBias ? d.in(2) : TensorRef(),
           hasBias, out = d.out(), strides = d.ints("strides"),
           pads = d.ints("pads"), dil = d.ints("dilations"),
           group = d.i("group", 1)] {
    return k::conv(x, w, hasBias ? &bias : nullptr, strides, pads, dil, group,
                   out);
  };
  return true;
}

template <bool Max> bool poolStep(Decoder &d, Step &s) {
  if (!d.arity(1, 1, 1) || !d.require("kernel"))
    return false;
  s.run = [x = d.in(0), out = d.out(), kernel = d.ints("kernel"),
           strides = d.ints("strides"), pads = d.ints("pads"),
           dil = d.ints("dilations"), ceil = d.i("ceil_mode", 0) != 0,
           countPad = d.i("count_include_pad", 0) != 0] {
    return Max ? k::maxPool(x, kernel, strides, pads, dil, ceil, out)
               : k::avgPool(x, kernel, strides, pads, dil, ceil, countPad,
                            out);
  };
  return true;
}

//===--- Backward and optimizer ops ---------------------------------------===//

/// Reads a rank-0 f32/f64 hyperparameter (lr, step) at run time.
double scalarAt(const TensorRef &t) {
  return t.dtype == DType::F64 ? *t.as<double>()
         : t.dtype == DType::F32 ? static_cast<double>(*t.as<float>())
         : t.dtype == DType::BF16 ? static_cast<double>(bf16ToFloat(*t.as<uint16_t>()))
         : static_cast<double>(halfToFloat(*t.as<uint16_t>()));
}

bool geluGradStep(Decoder &d, Step &s) {
  if (!d.arity(2, 2, 1))
    return false;
  bool tanh = d.s("approximate", "none") == "tanh";
  s.run = [x = d.in(0), g = d.in(1), out = d.out(), tanh] {
    return k::geluGrad(x, g, tanh, out);
  };
  return true;
}

bool layerNormGradStep(Decoder &d, Step &s) {
  if (!d.arity(3, 3, 3) || !d.require("axis") || !d.require("epsilon"))
    return false;
  s.run = [x = d.in(0), w = d.in(1), g = d.in(2), dx = d.out(0),
           dw = d.out(1), db = d.out(2), axis = d.i("axis", -1),
           eps = float(d.f("epsilon", 1e-5))] {
    return k::layerNormGrad(x, w, g, axis, eps, dx, dw, db);
  };
  return true;
}

bool rmsNormGradStep(Decoder &d, Step &s) {
  if (!d.arity(3, 3, 2) || !d.require("epsilon"))
    return false;
  s.run = [x = d.in(0), w = d.in(1), g = d.in(2), dx = d.out(0),
           dw = d.out(1), eps = float(d.f("epsilon", 1e-6))] {
    return k::rmsNormGrad(x, w, g, eps, dx, dw);
  };
  return true;
}

bool crossEntropyGradStep(Decoder &d, Step &s) {
  if (!d.arity(3, 4, 1))
    return false;
  bool hasWeights = d.inst.inputs_size() == 4;
  std::string red = d.s("reduction", "mean");
  k::Reduction r = red == "none"  ? k::Reduction::None
                   : red == "sum" ? k::Reduction::Sum
                                  : k::Reduction::Mean;
  s.run = [l = d.in(0), y = d.in(1), w = hasWeights ? d.in(2) : TensorRef(),
           g = d.in(hasWeights ? 3 : 2), hasWeights, out = d.out(),
           ignore = d.i("ignore_index", -100), r] {
    return k::crossEntropyGrad(l, y, hasWeights ? &w : nullptr, g, ignore, r,
                               out);
  };
  return true;
}

bool gatherGradStep(Decoder &d, Step &s) {
  if (!d.arity(2, 2, 1) || !d.require("axis"))
    return false;
  s.run = [idx = d.in(0), g = d.in(1), out = d.out(), axis = d.i("axis", 0)] {
    return k::gatherGrad(idx, g, axis, out);
  };
  return true;
}

bool sliceGradStep(Decoder &d, Step &s) {
  if (!d.arity(1, 1, 1) || !d.require("starts") || !d.require("steps"))
    return false;
  s.run = [g = d.in(0), out = d.out(), starts = d.ints("starts"),
           steps = d.ints("steps")] {
    return k::sliceGrad(g, starts, steps, out);
  };
  return true;
}

//===--- Communication ------------------------------------------------------===//

/// all_reduce over the instruction's rank group (its "ranks"; the world
/// when absent).
bool allReduceStep(Decoder &d, Step &s) {
  if (!d.arity(1, 1, 1) || !d.require("reduction"))
    return false;
  ReduceOp op;
  std::string kind = d.s("reduction", "sum");
  if (kind == "average")
    kind = "mean";
  if (!parseReduceOp(kind, op)) {
    d.error = "unknown reduction '" + kind + "'";
    return false;
  }
  std::string what = "all_reduce of '" + d.inst.loc() + "'";
  s.run = [in = d.in(0), out = d.out(), op, what, comm = &d.comm] {
    if (out.data != in.data)
      std::memcpy(out.data, in.data, out.bytes());
    return comm->allReduce(out.data, static_cast<size_t>(out.numel()),
                           out.dtype, op, what);
  };
  return true;
}

/// reduce_scatter / all_gather / all_slice split or join dim 0 in equal
/// chunks, one per rank.
bool reduceScatterStep(Decoder &d, Step &s) {
  if (!d.arity(1, 1, 1))
    return false;
  std::string what = "reduce_scatter of '" + d.inst.loc() + "'";
  s.run = [in = d.in(0), out = d.out(), what, comm = &d.comm] {
    if (in.numel() != out.numel() * comm->size())
      return Status::failure(what + ": input is not size x output");
    return comm->reduceScatter(in.data, out.data,
                               static_cast<size_t>(out.numel()), out.dtype,
                               ReduceOp::Sum, what);
  };
  return true;
}

bool allGatherStep(Decoder &d, Step &s) {
  if (!d.arity(1, 1, 1))
    return false;
  std::string what = "all_gather of '" + d.inst.loc() + "'";
  s.run = [in = d.in(0), out = d.out(), what, comm = &d.comm] {
    if (out.numel() != in.numel() * comm->size())
      return Status::failure(what + ": output is not size x input");
    return comm->allGather(in.data, out.data, static_cast<size_t>(in.numel()),
                           in.dtype, what);
  };
  return true;
}

bool allSliceStep(Decoder &d, Step &s) {
  if (!d.arity(1, 1, 1))
    return false;
  s.run = [in = d.in(0), out = d.out(), comm = &d.comm,
           loc = d.inst.loc()] {
    if (in.numel() != out.numel() * comm->size())
      return Status::failure("all_slice of '" + loc +
                             "': input is not size x output");
    std::memcpy(out.data,
                static_cast<const char *>(in.data) + out.bytes() * comm->rank(),
                out.bytes());
    return Status::success();
  };
  return true;
}

/// Point-to-point between pipeline ranks: `peer` is a world rank. Sends are
/// eager (the bytes are copied and the send posted), receives wait.
bool sendStep(Decoder &d, Step &s) {
  if (!d.arity(1, 1, 0) || !d.require("peer") || !d.require("tag"))
    return false;
  int peer = static_cast<int>(d.i("peer", -1)), tag = static_cast<int>(d.i("tag", 0));
  std::string what = "send of '" + d.inst.loc() + "' to rank " +
                     std::to_string(peer) + " (tag " + std::to_string(tag) + ")";
  s.run = [in = d.in(0), peer, tag, what, comm = &d.comm] {
    return comm->postSend(in.data, in.bytes(), peer, tag, what);
  };
  return true;
}

bool recvStep(Decoder &d, Step &s) {
  if (!d.arity(0, 0, 1) || !d.require("peer") || !d.require("tag"))
    return false;
  int peer = static_cast<int>(d.i("peer", -1)), tag = static_cast<int>(d.i("tag", 0));
  std::string what = "receive of '" + d.inst.loc() + "' from rank " +
                     std::to_string(peer) + " (tag " + std::to_string(tag) + ")";
  s.run = [out = d.out(), peer, tag, what, comm = &d.comm] {
    return comm->recv(out.data, out.bytes(), peer, tag, what);
  };
  return true;
}

/// Activation offloading: copies between the device arena and the host
/// pool (memcpy on the CPU backend).
bool copyStep(Decoder &d, Step &s) {
  if (!d.arity(1, 1, 1))
    return false;
  s.run = [in = d.in(0), out = d.out()] {
    if (in.bytes() != out.bytes())
      return Status::failure("copy between buffers of different sizes");
    std::memcpy(out.data, in.data, out.bytes());
    return Status::success();
  };
  return true;
}

bool convGradStep(Decoder &d, Step &s) {
  if (!d.arity(3, 3, 2) || !d.require("group"))
    return false;
  s.run = [x = d.in(0), w = d.in(1), g = d.in(2), dx = d.out(0),
           dw = d.out(1), strides = d.ints("strides"), pads = d.ints("pads"),
           dil = d.ints("dilations"), group = d.i("group", 1)] {
    return k::convGrad(x, w, g, strides, pads, dil, group, dx, dw);
  };
  return true;
}

bool poolGradStep(Decoder &d, Step &s) {
  if (!d.arity(2, 2, 1) || !d.require("kernel") || !d.require("mode"))
    return false;
  std::string mode = d.s("mode", "");
  if (mode != "max" && mode != "avg") {
    d.error = "unknown pool mode '" + mode + "'";
    return false;
  }
  s.run = [x = d.in(0), g = d.in(1), out = d.out(), max = mode == "max",
           kernel = d.ints("kernel"), strides = d.ints("strides"),
           pads = d.ints("pads"), dil = d.ints("dilations"),
           countPad = d.i("count_include_pad", 0) != 0] {
    return k::poolGrad(max, x, g, kernel, strides, pads, dil, countPad, out);
  };
  return true;
}

/// True when an optimizer update's optional `skip` flag is set: then the
/// outputs keep the inputs' values (copied unless written in place).
bool skipUpdate(const std::vector<TensorRef> &in, size_t first,
                const TensorRef *skip, const std::vector<TensorRef> &out) {
  if (!skip || *skip->as<uint8_t>() == 0)
    return false;
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].data != in[first + i].data)
      std::memcpy(out[i].data, in[first + i].data, out[i].bytes());
  return true;
}

bool sgdUpdateStep(Decoder &d, Step &s) {
  if (!d.arity(5, 6, 2))
    return false;
  bool hasSkip = d.inst.inputs_size() == 6;
  k::SgdOptions o;
  o.momentum = d.f("momentum", 0);
  o.dampening = d.f("dampening", 0);
  o.weightDecay = d.f("weight_decay", 0);
  o.nesterov = d.i("nesterov", 0) != 0;
  s.run = [p = d.in(0), g = d.in(1), buf = d.in(2), lr = d.in(3),
           step = d.in(4), skip = hasSkip ? d.in(5) : TensorRef(), hasSkip,
           np = d.out(0), nb = d.out(1), o] {
    if (skipUpdate({p, buf}, 0, hasSkip ? &skip : nullptr, {np, nb}))
      return Status::success();
    return k::sgdUpdate(p, g, buf, scalarAt(lr), scalarAt(step), o, np, nb);
  };
  return true;
}

bool adamUpdateStep(Decoder &d, Step &s) {
  if (!d.arity(6, 7, 3))
    return false;
  bool hasSkip = d.inst.inputs_size() == 7;
  k::AdamOptions o;
  o.beta1 = d.f("beta1", 0.9);
  o.beta2 = d.f("beta2", 0.999);
  o.epsilon = d.f("epsilon", 1e-8);
  o.weightDecay = d.f("weight_decay", 0);
  o.decoupled = d.i("decoupled", 1) != 0;
  s.run = [p = d.in(0), g = d.in(1), m = d.in(2), v = d.in(3), lr = d.in(4),
           step = d.in(5), skip = hasSkip ? d.in(6) : TensorRef(), hasSkip,
           np = d.out(0), nm = d.out(1), nv = d.out(2), o] {
    if (skipUpdate({p, m, v}, 0, hasSkip ? &skip : nullptr, {np, nm, nv}))
      return Status::success();
    return k::adamUpdate(p, g, m, v, scalarAt(lr), scalarAt(step), o, np, nm,
                         nv);
  };
  return true;
}

const std::map<std::string, Builder> &table() {
  using U = k::UnaryOp;
  using B = k::BinaryOp;
  static const std::map<std::string, Builder> t = {
      {"neg", unaryStep<U::Neg>},
      {"abs", unaryStep<U::Abs>},
      {"exp", unaryStep<U::Exp>},
      {"log", unaryStep<U::Log>},
      {"sqrt", unaryStep<U::Sqrt>},
      {"rsqrt", unaryStep<U::Rsqrt>},
      {"reciprocal", unaryStep<U::Reciprocal>},
      {"tanh", unaryStep<U::Tanh>},
      {"erf", unaryStep<U::Erf>},
      {"sigmoid", unaryStep<U::Sigmoid>},
      {"silu", unaryStep<U::Silu>},
      {"relu", unaryStep<U::Relu>},
      {"sin", unaryStep<U::Sin>},
      {"cos", unaryStep<U::Cos>},
      {"not", unaryStep<U::Not>},
      {"gelu", geluStep},
      {"leaky_relu", leakyReluStep},
      {"cast", castStep},
      {"add", binaryStep<B::Add>},
      {"sub", binaryStep<B::Sub>},
      {"mul", binaryStep<B::Mul>},
      {"div", binaryStep<B::Div>},
      {"pow", binaryStep<B::Pow>},
      {"max", binaryStep<B::Max>},
      {"min", binaryStep<B::Min>},
      {"equal", binaryStep<B::Equal>},
      {"less", binaryStep<B::Less>},
      {"greater", binaryStep<B::Greater>},
      {"and", binaryStep<B::And>},
      {"or", binaryStep<B::Or>},
      {"where", whereStep},
      {"matmul", matmulStep},
      {"reduce_sum", reduceStep<k::ReduceOp::Sum>},
      {"reduce_mean", reduceStep<k::ReduceOp::Mean>},
      {"reduce_max", reduceStep<k::ReduceOp::Max>},
      {"softmax", softmaxStep<false>},
      {"log_softmax", softmaxStep<true>},
      {"layer_norm", layerNormStep},
      {"rms_norm", rmsNormStep},
      {"batch_norm", batchNormStep},
      {"cross_entropy", crossEntropyStep},
      {"transpose", transposeStep},
      {"expand", expandStep},
      {"slice", sliceStep},
      {"concat", concatStep},
      {"split", splitStep},
      {"gather", gatherStep},
      {"trilu", triluStep},
      {"conv", convStep},
      {"max_pool", poolStep<true>},
      {"avg_pool", poolStep<false>},
      {"gelu_grad", geluGradStep},
      {"layer_norm_grad", layerNormGradStep},
      {"rms_norm_grad", rmsNormGradStep},
      {"cross_entropy_grad", crossEntropyGradStep},
      {"gather_grad", gatherGradStep},
      {"slice_grad", sliceGradStep},
      {"all_reduce", allReduceStep},
      {"reduce_scatter", reduceScatterStep},
      {"all_gather", allGatherStep},
      {"all_slice", allSliceStep},
      {"send", sendStep},
      {"offload", copyStep},
      {"prefetch", copyStep},
      {"recv", recvStep},
      {"conv_grad", convGradStep},
      {"pool_grad", poolGradStep},
      {"sgd_update", sgdUpdateStep},
      {"adam_update", adamUpdateStep},
  };
  return t;
}

} // namespace

Status decodeInstruction(const Inst &inst, const std::vector<TensorRef> &buffers,
                         Communicator &comm, Step &step) {
  auto it = table().find(inst.op());
  if (it == table().end())
    return Status::failure("this smprun has no kernel for op '" + inst.op() +
                           "'");
  Decoder d{inst, buffers, comm, ""};
  step.op = inst.op();
  step.loc = inst.loc();
  step.outputs.assign(inst.outputs().begin(), inst.outputs().end());
  if (!it->second(d, step))
    return Status::failure(d.error);
  return Status::success();
}

} // namespace smprt
