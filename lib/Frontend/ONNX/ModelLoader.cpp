//===- ModelLoader.cpp - Safe loading and validation of ONNX models -------===//

#include "ModelLoader.h"

#include "onnx/defs/parser.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/ConvertUTF.h"
#include "llvm/Support/MemoryBuffer.h"

#include <google/protobuf/io/coded_stream.h>

#include <deque>

using llvm::createStringError;
using llvm::inconvertibleErrorCode;

namespace smp::onnx_frontend {

static constexpr int64_t kMinOpset = 1;
static constexpr int64_t kMaxOpset = 26;

static llvm::Error fail(llvm::StringRef path, const llvm::Twine &msg) {
  return createStringError(inconvertibleErrorCode(), path + ": " + msg);
}

llvm::Error loadModel(llvm::StringRef path, onnx::ModelProto &model) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return fail(path, "cannot read file: " + buffer.getError().message());
  llvm::StringRef bytes = (*buffer)->getBuffer();
  if (bytes.empty())
    return fail(path, "file is empty, not an ONNX model");
  if (path.ends_with(".onnxtxt")) {
    // The ONNX text parser wants a NUL-terminated string.
    std::string text = bytes.str();
    try {
      onnx::OnnxParser parser(text.c_str());
      auto status = parser.Parse(model);
      if (!status.IsOK())
        return fail(path, "ONNX text syntax error: " +
                              llvm::StringRef(status.ErrorMessage()).trim());
    } catch (const std::exception &e) {
      return fail(path, llvm::Twine("ONNX text syntax error: ") + e.what());
    }
    return llvm::Error::success();
  }
  if (bytes.size() > static_cast<size_t>(INT32_MAX))
    return fail(path, "file is larger than 2 GB; store the weights as ONNX "
                      "external data");
  google::protobuf::io::CodedInputStream stream(
      reinterpret_cast<const uint8_t *>(bytes.data()),
      static_cast<int>(bytes.size()));
  stream.SetTotalBytesLimit(INT32_MAX);
  stream.SetRecursionLimit(64);
  if (!model.ParseFromCodedStream(&stream) ||
      !stream.ConsumedEntireMessage())
    return fail(path, "not a valid ONNX model (protobuf parse failed: the "
                      "file is truncated, corrupt or not ONNX)");
  if (!model.has_graph())
    return fail(path, "model has no graph");
  return llvm::Error::success();
}

llvm::Expected<int64_t> defaultOpset(const onnx::ModelProto &model,
                                     llvm::StringRef path) {
  std::optional<int64_t> opset;
  for (const auto &imp : model.opset_import())
    if (imp.domain().empty() || imp.domain() == "ai.onnx")
      opset = imp.version();
  if (!opset)
    return fail(path, "model has no opset import for the default ONNX "
                      "domain (opset_import is missing)");
  if (*opset < kMinOpset || *opset > kMaxOpset)
    return fail(path, "opset " + llvm::Twine(*opset) +
                          " is not supported (supported: " +
                          llvm::Twine(kMinOpset) + " to " +
                          llvm::Twine(kMaxOpset) + ")");
  return *opset;
}

std::string describeNode(const onnx::NodeProto &node, int index) {
  std::string name = node.name().empty()
                         ? "#" + std::to_string(index)
                         : "'" + node.name() + "'";
  return "node " + name + " (" + node.op_type() + ")";
}

/// `s` with every byte outside printable ASCII written as \xNN.
static std::string escapeBytes(llvm::StringRef s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

/// Names become protobuf `string` fields of the artifact, which must be
/// valid UTF-8 (smprun refuses to parse a program holding anything else):
/// every name in the graph is checked here, before anything is built.
static llvm::Error checkNamesUtf8(const onnx::GraphProto &graph,
                                  llvm::StringRef path) {
  auto bad = [&](const std::string &name) {
    const auto *begin = reinterpret_cast<const llvm::UTF8 *>(name.data());
    return !llvm::isLegalUTF8String(&begin, begin + name.size());
  };
  auto refuse = [&](const llvm::Twine &what, const std::string &name) {
    return fail(path, what + " '" + escapeBytes(name) +
                          "' is not valid UTF-8; rename it in the model");
  };
  if (bad(graph.name()))
    return refuse("graph name", graph.name());
  for (const auto &init : graph.initializer())
    if (bad(init.name()))
      return refuse("initializer", init.name());
  for (const auto &input : graph.input())
    if (bad(input.name()))
      return refuse("graph input", input.name());
  for (const auto &output : graph.output())
    if (bad(output.name()))
      return refuse("graph output", output.name());
  for (int i = 0; i < graph.node_size(); ++i) {
    const auto &node = graph.node(i);
    std::string where = "node #" + std::to_string(i);
    if (bad(node.name()))
      return refuse(where + ": name", node.name());
    if (bad(node.op_type()))
      return refuse(where + ": op type", node.op_type());
    for (const auto &in : node.input())
      if (bad(in))
        return refuse(where + ": input", in);
    for (const auto &out : node.output())
      if (bad(out))
        return refuse(where + ": output", out);
  }
  return llvm::Error::success();
}

llvm::Expected<std::vector<int>> checkGraph(const onnx::GraphProto &graph,
                                            llvm::StringRef path) {
  if (auto err = checkNamesUtf8(graph, path))
    return std::move(err);
  // Where each tensor name comes from: -1 for graph inputs/initializers.
  llvm::StringMap<int> producer;
  for (const auto &init : graph.initializer()) {
    if (init.name().empty())
      return fail(path, "an initializer has an empty name");
    if (!producer.try_emplace(init.name(), -1).second)
      return fail(path, "initializer '" + init.name() + "' is defined twice");
  }
  llvm::StringSet<> inputNames;
  for (const auto &input : graph.input()) {
    if (input.name().empty())
      return fail(path, "a graph input has an empty name");
    if (!inputNames.insert(input.name()).second)
      return fail(path, "graph input '" + input.name() + "' is listed twice");
    producer.try_emplace(input.name(), -1); // may also be an initializer
  }
  int numNodes = graph.node_size();
  for (int i = 0; i < numNodes; ++i) {
    const auto &node = graph.node(i);
    for (const auto &out : node.output()) {
      if (out.empty())
        continue;
      auto [it, inserted] = producer.try_emplace(out, i);
      if (!inserted) {
        std::string other =
            it->second < 0 ? std::string("a graph input or initializer")
                           : describeNode(graph.node(it->second), it->second);
        return fail(path, describeNode(node, i) + ": output '" + out +
                              "' is already produced by " + other);
      }
    }
  }
  // Dependencies and dangling inputs.
  std::vector<int> pending(numNodes, 0);
  std::vector<std::vector<int>> users(numNodes);
  for (int i = 0; i < numNodes; ++i) {
    const auto &node = graph.node(i);
    for (const auto &in : node.input()) {
      if (in.empty())
        continue; // an omitted optional input
      auto it = producer.find(in);
      if (it == producer.end())
        return fail(path, describeNode(node, i) + ": input '" + in +
                              "' is not a graph input, an initializer or "
                              "the output of any node");
      if (it->second >= 0) {
        ++pending[i];
        users[it->second].push_back(i);
      }
    }
    for (const auto &attr : node.attribute())
      if (attr.has_g() || attr.graphs_size() > 0)
        return fail(path, describeNode(node, i) +
                              ": subgraphs (control flow) are not supported");
  }
  llvm::StringSet<> outputNames;
  for (const auto &out : graph.output()) {
    if (!outputNames.insert(out.name()).second)
      return fail(path,
                  "graph output '" + out.name() + "' is listed twice");
    if (!producer.count(out.name()))
      return fail(path, "graph output '" + out.name() +
                            "' is not produced by any node");
  }
  if (graph.output_size() == 0)
    return fail(path, "graph has no outputs");
  // Kahn's algorithm; keeps the file order among ready nodes.
  std::vector<int> order;
  order.reserve(numNodes);
  std::deque<int> ready;
  for (int i = 0; i < numNodes; ++i)
    if (pending[i] == 0)
      ready.push_back(i);
  while (!ready.empty()) {
    int n = ready.front();
    ready.pop_front();
    order.push_back(n);
    for (int u : users[n])
      if (--pending[u] == 0)
        ready.push_back(u);
  }
  if (static_cast<int>(order.size()) != numNodes) {
    for (int i = 0; i < numNodes; ++i)
      if (pending[i] > 0)
        return fail(path, "graph has a cycle through " +
                              describeNode(graph.node(i), i));
  }
  return order;
}

} // namespace smp::onnx_frontend
