//===- OnnxWriter.cpp - GraphBuilder producing an ONNX graph --------------===//
//
// Writes what torch.onnx.export writes for the same modules at opset 17:
// LayerNormalization, nn.Linear as Transpose + MatMul (GPT) or MatMul of an
// [in, out] weight (LLaMA), GELU(tanh) and RMSNorm decomposed as PyTorch
// decomposes them (the importer raises both back), SiLU as x * Sigmoid(x),
// shape operands as Constant nodes (the batch dim as 0, "copy", in Reshape).
//
//===----------------------------------------------------------------------===//

#include "OnnxWriter.h"

#include "smp/Version.h"
#include "smp/base/Npy.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"

#include "onnx/checker.h"
#include "onnx/onnx_pb.h"

#include <cmath>
#include <cstring>
#include <map>
#include <set>

namespace smp::modelgen {

double NormalRng::next() {
  if (hasSpare) {
    hasSpare = false;
    return spare;
  }
  // u1 in (0, 1], u2 in [0, 1), from the top 53 bits.
  double u1 = (static_cast<double>(gen() >> 11) + 1.0) * 0x1.0p-53;
  double u2 = static_cast<double>(gen() >> 11) * 0x1.0p-53;
  double r = std::sqrt(-2.0 * std::log(u1));
  constexpr double twoPi = 6.283185307179586476925286766559;
  spare = r * std::sin(twoPi * u2);
  hasSpare = true;
  return r * std::cos(twoPi * u2);
}

static llvm::Error error(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

namespace {

class OnnxWriter : public GraphBuilder {
public:
  OnnxWriter(onnx::GraphProto &graph, bool symbolicBatch, uint64_t seed)
      : g(graph), symbolicBatch(symbolicBatch), rng(seed) {}

  V inputIds(const std::string &name, const Shape &shape) override {
    valueInfo(*g.add_input(), name, onnx::TensorProto::INT64, shape);
    return push(name);
  }
  V param(const std::string &name, const Shape &shape, Init init) override {
    onnx::TensorProto *t = g.add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : shape) {
      t->add_dims(d);
      n *= d;
    }
    std::vector<float> data(n, init == Init::Ones ? 1.0f : 0.0f);
    if (init == Init::Normal)
      for (float &x : data)
        x = static_cast<float>(rng.next() * 0.02);
    setRaw(*t, data.data(), data.size() * sizeof(float));
    return push(name);
  }
  void output(const std::string &name, V v, const Shape &shape) override {
    // Rename the producer's output, so the graph output is the tensor itself.
    auto [nodeIndex, outIndex] = producer.at(v);
    g.mutable_node(nodeIndex)->set_output(outIndex, name);
    values[v] = name;
    valueInfo(*g.add_output(), name, onnx::TensorProto::FLOAT, shape);
  }

  V constI64(const std::string &node, const Shape &shape,
             const std::vector<int64_t> &v) override {
    return constant(node, tensor(onnx::TensorProto::INT64, shape, v.data(),
                                 v.size() * sizeof(int64_t)));
  }
  V constF32(const std::string &node, const Shape &shape,
             const std::vector<float> &v) override {
    return constant(node, tensor(onnx::TensorProto::FLOAT, shape, v.data(),
                                 v.size() * sizeof(float)));
  }
  V fillF32(const std::string &node, const Shape &shape, float v) override {
    return fill(node, shape, tensor(onnx::TensorProto::FLOAT, {1}, &v, 4));
  }
  V fillBool(const std::string &node, const Shape &shape, bool v) override {
    uint8_t byte = v ? 1 : 0;
    return fill(node, shape, tensor(onnx::TensorProto::BOOL, {1}, &byte, 1));
  }

  V gather(const std::string &node, V table, V indices) override {
    auto *n = add("Gather", node, {values[table], values[indices]});
    intAttr(*n, "axis", 0);
    return result(*n);
  }
  V binary(Binary kind, const std::string &node, V x, V y) override {
    static const char *ops[] = {"Add", "Sub", "Mul", "Div"};
    return result(*add(ops[static_cast<int>(kind)], node,
                       {values[x], values[y]}));
  }
  V unary(Unary kind, const std::string &node, V x) override {
    static const char *ops[] = {"Neg", "Cos", "Sin"};
    return result(*add(ops[static_cast<int>(kind)], node, {values[x]}));
  }
  V matmul(const std::string &node, V x, V y) override {
    return result(*add("MatMul", node, {values[x], values[y]}));
  }
  V transpose(const std::string &node, V x, const Shape &perm) override {
    auto *n = add("Transpose", node, {values[x]});
    intsAttr(*n, "perm", perm);
    return result(*n);
  }
  V reshape(const std::string &node, V x, const Shape &shape) override {
    Shape s = shape;
    s[0] = 0; // copy the (possibly symbolic) batch dim
    V target = constI64(node + "/shape", {int64_t(s.size())}, s);
    return result(*add("Reshape", node, {values[x], values[target]}));
  }
  V expand(const std::string &node, V x, const Shape &shape) override {
    Shape s = shape;
    s[0] = 1; // broadcasts to the input's batch dim
    V target = constI64(node + "/shape", {int64_t(s.size())}, s);
    return result(*add("Expand", node, {values[x], values[target]}));
  }
  std::vector<V> split(const std::string &node, V x, int64_t axis,
                       const Shape &sizes) override {
    V sizesV = constI64(node + "/split", {int64_t(sizes.size())}, sizes);
    auto *n = add("Split", node, {values[x], values[sizesV]}, sizes.size());
    intAttr(*n, "axis", axis);
    std::vector<V> out;
    for (size_t i = 0; i < sizes.size(); ++i)
      out.push_back(result(*n, i));
    return out;
  }
  V slice(const std::string &node, V x, int64_t, int64_t axis, int64_t start,
          int64_t end) override {
    V starts = constI64(node + "/starts", {1}, {start});
    V ends = constI64(node + "/ends", {1}, {end});
    V axes = constI64(node + "/axes", {1}, {axis});
    V steps = constI64(node + "/steps", {1}, {1});
    return result(*add("Slice", node,
                       {values[x], values[starts], values[ends], values[axes],
                        values[steps]}));
  }
  V concat(const std::string &node, const std::vector<V> &xs,
           int64_t axis) override {
    std::vector<std::string> in;
    for (V x : xs)
      in.push_back(values[x]);
    auto *n = add("Concat", node, in);
    intAttr(*n, "axis", axis);
    return result(*n);
  }
  V trilu(const std::string &node, V x, bool upper, int64_t k) override {
    V kV = constI64(node + "/k", {}, {k});
    auto *n = add("Trilu", node, {values[x], values[kV]});
    intAttr(*n, "upper", upper ? 1 : 0);
    return result(*n);
  }
  V where(const std::string &node, V c, V x, V y) override {
    return result(*add("Where", node, {values[c], values[x], values[y]}));
  }
  V softmax(const std::string &node, V x, int64_t axis) override {
    auto *n = add("Softmax", node, {values[x]});
    intAttr(*n, "axis", axis);
    return result(*n);
  }
  V layerNorm(const std::string &node, V x, V scale, V bias, int64_t axis,
              float eps) override {
    auto *n = add("LayerNormalization", node,
                  {values[x], values[scale], values[bias]});
    intAttr(*n, "axis", axis);
    floatAttr(*n, "epsilon", eps);
    return result(*n);
  }
  /// PyTorch's spelling: x * (1 / sqrt(mean(x^2) + eps)) * scale.
  V rmsNorm(const std::string &node, V x, V scale, int64_t axis,
            float eps) override {
    V two = constF32(node + "/Constant", {}, {2.0f});
    V pow = result(*add("Pow", node + "/Pow", {values[x], values[two]}));
    auto *mean = add("ReduceMean", node + "/ReduceMean", {values[pow]});
    intsAttr(*mean, "axes", {axis});
    intAttr(*mean, "keepdims", 1);
    V ms = result(*mean);
    V e = constF32(node + "/Constant_1", {}, {eps});
    V sum = binary(Binary::Add, node + "/Add", ms, e);
    V root = result(*add("Sqrt", node + "/Sqrt", {values[sum]}));
    V one = constF32(node + "/Constant_2", {}, {1.0f});
    V inv = binary(Binary::Div, node + "/Div", one, root);
    V normed = binary(Binary::Mul, node + "/Mul", x, inv);
    return binary(Binary::Mul, node + "/Mul_1", normed, scale);
  }
  /// 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))), as exported.
  V geluTanh(const std::string &node, V x) override {
    V x2 = binary(Binary::Mul, node + "/Mul", x, x);
    V x3 = binary(Binary::Mul, node + "/Mul_1", x, x2);
    V c = constF32(node + "/Constant", {}, {0.044715f});
    V inner = binary(Binary::Add, node + "/Add", x,
                     binary(Binary::Mul, node + "/Mul_2", c, x3));
    V k = constF32(node + "/Constant_1", {},
                   {static_cast<float>(std::sqrt(2.0 / M_PI))});
    V arg = binary(Binary::Mul, node + "/Mul_3", k, inner);
    V t = result(*add("Tanh", node + "/Tanh", {values[arg]}));
    V one = constF32(node + "/Constant_2", {}, {1.0f});
    V onePlus = binary(Binary::Add, node + "/Add_1", one, t);
    V prod = binary(Binary::Mul, node + "/Mul_4", x, onePlus);
    V half = constF32(node + "/Constant_3", {}, {0.5f});
    return binary(Binary::Mul, node + "/Mul_5", half, prod);
  }
  V silu(const std::string &node, V x) override {
    V sig = result(*add("Sigmoid", node + "/Sigmoid", {values[x]}));
    return binary(Binary::Mul, node + "/Mul", x, sig);
  }

private:
  V push(const std::string &name) {
    values.push_back(name);
    return static_cast<V>(values.size() - 1);
  }
  std::string unique(const std::string &name) {
    std::string n = name;
    for (int i = 1; !names.insert(n).second; ++i)
      n = name + "_" + std::to_string(i);
    return n;
  }
  onnx::NodeProto *add(const std::string &op, const std::string &name,
                       const std::vector<std::string> &inputs,
                       size_t outputs = 1) {
    onnx::NodeProto *n = g.add_node();
    n->set_op_type(op);
    n->set_name(unique(name.empty() ? "/" + op : name));
    for (const auto &in : inputs)
      n->add_input(in);
    for (size_t i = 0; i < outputs; ++i)
      n->add_output(n->name() + "_output_" + std::to_string(i));
    return n;
  }
  V result(const onnx::NodeProto &n, size_t i = 0) {
    V v = push(n.output(static_cast<int>(i)));
    producer[v] = {g.node_size() - 1, static_cast<int>(i)};
    return v;
  }
  static void intAttr(onnx::NodeProto &n, const char *name, int64_t v) {
    auto *a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void floatAttr(onnx::NodeProto &n, const char *name, float v) {
    auto *a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void intsAttr(onnx::NodeProto &n, const char *name, const Shape &v) {
    auto *a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v)
      a->add_ints(x);
  }
  static void setRaw(onnx::TensorProto &t, const void *data, size_t bytes) {
    // ONNX raw data is little-endian, as every host smp runs on.
    t.set_raw_data(std::string(static_cast<const char *>(data), bytes));
  }
  static onnx::TensorProto tensor(int dtype, const Shape &shape,
                                  const void *data, size_t bytes) {
    onnx::TensorProto t;
    t.set_data_type(dtype);
    for (int64_t d : shape)
      t.add_dims(d);
    setRaw(t, data, bytes);
    return t;
  }
  V constant(const std::string &node, onnx::TensorProto value) {
    auto *n = add("Constant", node, {});
    auto *a = n->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    *a->mutable_t() = std::move(value);
    return result(*n);
  }
  V fill(const std::string &node, const Shape &shape, onnx::TensorProto value) {
    V s = constI64(node + "/shape", {int64_t(shape.size())}, shape);
    auto *n = add("ConstantOfShape", node, {values[s]});
    auto *a = n->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    *a->mutable_t() = std::move(value);
    return result(*n);
  }
  void valueInfo(onnx::ValueInfoProto &info, const std::string &name,
                 int dtype, const Shape &shape) {
    info.set_name(name);
    auto *tt = info.mutable_type()->mutable_tensor_type();
    tt->set_elem_type(dtype);
    auto *s = tt->mutable_shape();
    for (size_t i = 0; i < shape.size(); ++i) {
      auto *d = s->add_dim();
      if (i == 0 && symbolicBatch)
        d->set_dim_param("batch");
      else
        d->set_dim_value(shape[i]);
    }
  }

  onnx::GraphProto &g;
  bool symbolicBatch;
  NormalRng rng;
  std::vector<std::string> values;
  std::set<std::string> names;
  std::map<V, std::pair<int, int>> producer;
};

} // namespace

llvm::Error writeOnnxModel(const ModelConfig &c, uint64_t seed,
                           const std::string &path) {
  int64_t params = parameterCount(c);
  if (params > kMaxOnnxParameters)
    return error("the model has " + llvm::Twine(params) +
                 " parameters; .onnx output holds every weight and is "
                 "limited to " +
                 llvm::Twine(kMaxOnnxParameters) +
                 " (write .mlir for a shape-only model)");
  // Open the output first: a bad path fails before any weight is drawn.
  std::error_code ec;
  llvm::ToolOutputFile out(path, ec, llvm::sys::fs::OF_None);
  if (ec)
    return error(path + ": " + ec.message());
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.set_producer_name("smp-modelgen");
  model.set_producer_version(SMP_VERSION);
  auto *opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(17);
  auto meta = [&](const std::string &k, const std::string &v) {
    auto *p = model.add_metadata_props();
    p->set_key(k);
    p->set_value(v);
  };
  meta("smp.model", c.kind);
  std::string config = "layers=" + std::to_string(c.layers) +
                       " hidden=" + std::to_string(c.hidden) +
                       " heads=" + std::to_string(c.heads) +
                       " ffn=" + std::to_string(c.ffn) +
                       " seq=" + std::to_string(c.seq) +
                       " vocab=" + std::to_string(c.vocab) +
                       " seed=" + std::to_string(seed);
  if (c.kind == "llama")
    config += " kv_heads=" + std::to_string(c.kvHeads);
  meta("smp.model_config", config);
  onnx::GraphProto *graph = model.mutable_graph();
  graph->set_name(c.kind);
  OnnxWriter writer(*graph, /*symbolicBatch=*/c.batch == 0, seed);
  buildModel(c, c.batch ? c.batch : 1, writer);

  try {
    onnx::checker::check_model(model);
  } catch (const std::exception &e) {
    std::string msg = e.what();
    if (auto nl = msg.find('\n'); nl != std::string::npos)
      msg.resize(nl);
    return error("internal error: the generated ONNX model fails "
                 "onnx::checker: " +
                 msg);
  }
  std::string bytes;
  if (!model.SerializeToString(&bytes))
    return error(path + ": cannot serialize the model");
  out.os() << bytes;
  out.os().flush();
  if (out.os().has_error())
    return error(path + ": " + out.os().error().message());
  out.keep();
  return llvm::Error::success();
}

llvm::Error writeTrainingData(const ModelConfig &c, uint64_t seed,
                              const std::string &dir, int64_t samples) {
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return error(dir + ": " + ec.message());
  // A stream of its own, so the data does not depend on the weights.
  std::mt19937_64 gen(seed ^ 0x9e3779b97f4a7c15ull);
  int64_t T = c.seq;
  std::vector<int64_t> idx(samples * T), labels(samples * T);
  std::vector<int64_t> tokens(T + 1);
  for (int64_t s = 0; s < samples; ++s) {
    for (auto &t : tokens)
      t = static_cast<int64_t>(gen() % static_cast<uint64_t>(c.vocab));
    std::copy(tokens.begin(), tokens.end() - 1, idx.begin() + s * T);
    std::copy(tokens.begin() + 1, tokens.end(), labels.begin() + s * T);
  }
  std::vector<int64_t> shape{samples, T};
  for (auto [name, data] : {std::pair<const char *, std::vector<int64_t> *>{
                                "idx.npy", &idx},
                            {"labels.npy", &labels}}) {
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, name);
    smp::base::TensorRef ref{data->data(), smp::base::DType::I64, shape};
    smp::base::Status st = smp::base::writeNpy(path.str().str(), ref);
    if (!st.ok())
      return error(st.error);
  }
  return llvm::Error::success();
}

} // namespace smp::modelgen
