//===- OnnxExport.cpp - Write the trained model as ONNX -------------------===//

#include "smprt/train/OnnxExport.h"
#include "smprt/train/Checkpoint.h"

#include "smp/base/FileFormat.h"

#include "onnx/onnx_pb.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

namespace smprt {
namespace {

/// The runtime dtype of an ONNX TensorProto data type.
bool sameType(int32_t onnxType, uint32_t dtype) {
  using TP = onnx::TensorProto;
  switch (static_cast<DType>(dtype)) {
  case DType::F32:
    return onnxType == TP::FLOAT;
  case DType::F64:
    return onnxType == TP::DOUBLE;
  case DType::F16:
    return onnxType == TP::FLOAT16;
  case DType::BF16:
    return onnxType == TP::BFLOAT16;
  case DType::Bool:
    return onnxType == TP::BOOL;
  case DType::I8:
    return onnxType == TP::INT8;
  case DType::I16:
    return onnxType == TP::INT16;
  case DType::I32:
    return onnxType == TP::INT32;
  case DType::I64:
    return onnxType == TP::INT64;
  case DType::U8:
    return onnxType == TP::UINT8;
  case DType::U16:
    return onnxType == TP::UINT16;
  case DType::U32:
    return onnxType == TP::UINT32;
  case DType::U64:
    return onnxType == TP::UINT64;
  }
  return false;
}

/// Replays the importer's copy of a node shared between the calls of
/// several parameters (kind "cloned": lib/Frontend/ONNX/MergedReaders.cpp):
/// appended, its outputs renamed, the recorded readers rewired to them.
/// `at` maps the index the copy had when compiling (uses[1]; the compiler
/// appends other nodes too) to the one it gets here.
Status applyClonedNode(const std::string &source,
                       const smp::artifact::ParamOrigin &o, onnx::GraphProto &g,
                       std::map<int64_t, int64_t> &at) {
  auto fail = [&] {
    return Status::failure(source + ": cannot copy node '" + o.from() +
                           "' again (the model changed after compiling)");
  };
  if (o.uses_size() < 2 || o.uses_size() % 2 != 0 || o.uses(0) < 0 ||
      o.uses(0) >= g.node_size() || o.name().size() <= o.from().size() ||
      o.name().compare(0, o.from().size(), o.from()) != 0)
    return fail();
  std::string suffix = o.name().substr(o.from().size());
  onnx::NodeProto copy = g.node(static_cast<int>(o.uses(0)));
  std::set<std::string> outputs(copy.output().begin(), copy.output().end());
  copy.set_name(o.name());
  for (int k = 0; k < copy.output_size(); ++k)
    if (!copy.output(k).empty())
      copy.set_output(k, copy.output(k) + suffix);
  for (int u = 2; u + 1 < o.uses_size(); u += 2) {
    int64_t node = o.uses(u), input = o.uses(u + 1);
    if (node < 0 || node >= g.node_size() || input < 0 ||
        input >= g.node(static_cast<int>(node)).input_size() ||
        !outputs.count(
            g.node(static_cast<int>(node)).input(static_cast<int>(input))))
      return fail();
    onnx::NodeProto *reader = g.mutable_node(static_cast<int>(node));
    reader->set_input(static_cast<int>(input),
                      reader->input(static_cast<int>(input)) + suffix);
  }
  at[o.uses(1)] = g.node_size();
  *g.add_node() = std::move(copy);
  return Status::success();
}

/// Puts the nodes in an order where each comes after the nodes whose
/// outputs it reads (copies are appended at the end), keeping the file's
/// order among nodes that are ready (Kahn's algorithm).
void sortTopologically(onnx::GraphProto &g) {
  std::map<std::string, int> producer;
  for (int i = 0; i < g.node_size(); ++i)
    for (const auto &o : g.node(i).output())
      if (!o.empty())
        producer[o] = i;
  std::vector<std::vector<int>> readers(g.node_size());
  std::vector<int> waiting(g.node_size(), 0);
  for (int i = 0; i < g.node_size(); ++i)
    for (const auto &in : g.node(i).input())
      if (auto it = producer.find(in);
          it != producer.end() && it->second != i) {
        readers[it->second].push_back(i);
        ++waiting[i];
      }
  std::set<int> ready;
  for (int i = 0; i < g.node_size(); ++i)
    if (waiting[i] == 0)
      ready.insert(i);
  std::vector<int> order;
  while (!ready.empty()) {
    int n = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(n);
    for (int r : readers[n])
      if (--waiting[r] == 0)
        ready.insert(r);
  }
  if (order.size() != static_cast<size_t>(g.node_size()))
    return; // a cycle: left as it is (the file's own)
  google::protobuf::RepeatedPtrField<onnx::NodeProto> sorted;
  for (int n : order)
    *sorted.Add() = g.node(n);
  g.mutable_node()->Swap(&sorted);
}

/// The bytes of a trained matrix's transpose.
std::string transposedBytes(const TrainedTensor &t) {
  size_t es = t.bytes / static_cast<size_t>(t.shape[0] * t.shape[1]);
  std::string out(t.bytes, '\0');
  for (int64_t i = 0; i < t.shape[0]; ++i)
    for (int64_t j = 0; j < t.shape[1]; ++j)
      std::memcpy(&out[(j * t.shape[0] + i) * es],
                  t.data + (i * t.shape[1] + j) * es, es);
  return out;
}

/// A fold the importer split into a tied weight's block and a parameter
/// of its other rows (lib/Frontend/ONNX/TiedBlocks.cpp): written back as
/// the fold, from the trained weight (transposed where the block is) and
/// the trained rows.
Status writeTiedBlock(const std::string &source,
                      const smp::artifact::ParamOrigin &o,
                      std::map<std::string, TrainedTensor> &params,
                      std::vector<std::string> &copies) {
  auto rest = params.find(o.name());
  auto tied = params.find(o.source());
  if (rest == params.end() || tied == params.end() || o.uses_size() != 2 ||
      rest->second.shape.size() != 2 || tied->second.shape.size() != 2 ||
      rest->second.dtype != tied->second.dtype)
    return Status::failure(source + ": cannot write back the fold '" +
                           o.from() + "' of the tied weight '" + o.source() +
                           "'");
  const TrainedTensor &r = rest->second, &t = tied->second;
  int64_t cols = r.shape[1], rows = o.uses(1);
  int64_t tRows = t.shape[0], tCols = t.shape[1];
  if ((o.transposed() ? tRows : tCols) != cols ||
      (o.transposed() ? tCols : tRows) != rows)
    return Status::failure(source + ": the fold '" + o.from() +
                           "' no longer matches '" + o.source() + "'");
  std::string block =
      o.transposed() ? transposedBytes(t) : std::string(t.data, t.bytes);
  std::string out = o.uses(0) == 0 ? block + std::string(r.data, r.bytes)
                                   : std::string(r.data, r.bytes) + block;
  copies.push_back(std::move(out));
  TrainedTensor whole = r;
  whole.data = copies.back().data();
  whole.bytes = copies.back().size();
  whole.shape = {r.shape[0] + rows, cols};
  params.erase(rest);
  params[o.from()] = whole;
  return Status::success();
}

/// Undoes in `model` what the importer did to shared initializers (see
/// lib/Frontend/ONNX/SharedInitializers.cpp): untied parameters get their own
/// initializers where the file read the merged one, and tied copies are
/// written from their trained source. `transposedCopies` keeps the bytes.
Status applyParamOrigins(const Artifact &artifact, onnx::ModelProto &model,
                         std::map<std::string, TrainedTensor> &params,
                         std::vector<std::string> &transposedCopies) {
  onnx::GraphProto &g = *model.mutable_graph();
  const std::string &source = artifact.manifest.training().source_model();
  auto findInit = [&](const std::string &name) -> onnx::TensorProto * {
    for (auto &t : *g.mutable_initializer())
      if (t.name() == name)
        return &t;
    return nullptr;
  };
  std::vector<std::string> dropIdentity;
  std::map<int64_t, int64_t> clonedAt; // compile-time index -> here
  for (const auto &o : artifact.manifest.training().param_origins()) {
    if (o.kind() == "cloned") {
      if (Status s = applyClonedNode(source, o, g, clonedAt); !s.ok())
        return s;
      continue;
    }
    if (o.kind() == "restored") {
      // A bias the exporter removed: a new initializer (its values come
      // below) read again as the node's bias input.
      auto it = params.find(o.name());
      if (it == params.end() || o.uses_size() != 2 || o.uses(0) < 0 ||
          o.uses(0) >= g.node_size())
        return Status::failure(source +
                               ": cannot write back the restored "
                               "bias '" +
                               o.name() + "'");
      onnx::TensorProto *t = g.add_initializer();
      t->set_name(o.name());
      t->set_data_type(onnx::TensorProto::FLOAT);
      if (static_cast<DType>(it->second.dtype) != DType::F32)
        return Status::failure(source + ": the restored bias '" + o.name() +
                               "' is not float32");
      for (int64_t d : it->second.shape)
        t->add_dims(d);
      onnx::NodeProto *node = g.mutable_node(static_cast<int>(o.uses(0)));
      while (node->input_size() <= o.uses(1))
        node->add_input("");
      node->set_input(static_cast<int>(o.uses(1)), o.name());
      continue;
    }
    if (o.kind() == "buffer" && o.from() != o.name() && o.uses_size() == 0) {
      // A frozen copy of a buffer (the file's `name = Identity(from)`,
      // which stays): never trained, nothing to write. One with uses (the
      // exporter's constant a norm without weight reads, merged with an
      // equal parameter) is written below as its readers' own initializer.
      params.erase(o.name());
      continue;
    }
    if (o.kind() == "tied" || (o.kind() == "buffer" && o.uses_size() == 0) ||
        o.kind() == "folded" || o.kind() == "renamed" ||
        o.kind() == "alias" ||    // for checkpoints
        o.kind() == "tied-block") // below, once its source is final
      continue;
    if (o.kind() == "folded-rows") {
      // A folded embedding trained as its distinct rows: written back as
      // the folded initializer (row r = distinct row uses[2r]).
      const onnx::TensorProto *from = findInit(o.from());
      auto it = params.find(o.name());
      if (!from || it == params.end() || it->second.shape.size() != 2)
        return Status::failure(source +
                               ": cannot write back the folded "
                               "embedding '" +
                               o.from() + "'");
      TrainedTensor t = it->second;
      size_t rowBytes = t.bytes / static_cast<size_t>(t.shape[0]);
      std::string out;
      for (int u = 0; u + 1 < o.uses_size(); u += 2) {
        if (o.uses(u) < 0 || o.uses(u) >= t.shape[0])
          return Status::failure(source + ": the folded embedding '" +
                                 o.from() + "' has a bad row index");
        out.append(t.data + o.uses(u) * rowBytes, rowBytes);
      }
      transposedCopies.push_back(std::move(out));
      t.data = transposedCopies.back().data();
      t.bytes = transposedCopies.back().size();
      t.shape.assign(from->dims().begin(), from->dims().end());
      params.erase(it);
      params[o.from()] = t;
      continue;
    }
    const onnx::TensorProto *from = findInit(o.from());
    if (!from)
      return Status::failure(source + ": initializer '" + o.from() +
                             "' is gone (the model changed after compiling)");
    onnx::TensorProto copy = *from;
    copy.set_name(o.name());
    *g.add_initializer() = copy;
    if (o.kind() == "identity")
      dropIdentity.push_back(o.name());
    for (int u = 0; u + 1 < o.uses_size(); u += 2) {
      int64_t node = o.uses(u), input = o.uses(u + 1);
      if (auto copy = clonedAt.find(node); copy != clonedAt.end())
        node = copy->second; // a node copy's input
      if (node < 0 || node >= g.node_size() || input < 0 ||
          input >= g.node(static_cast<int>(node)).input_size() ||
          g.node(static_cast<int>(node)).input(static_cast<int>(input)) !=
              o.from())
        return Status::failure(source + ": node #" + std::to_string(node) +
                               " no longer reads '" + o.from() +
                               "' (the model changed after compiling)");
      g.mutable_node(static_cast<int>(node))
          ->set_input(static_cast<int>(input), o.name());
    }
  }
  auto *nodes = g.mutable_node();
  nodes->erase(std::remove_if(
                   nodes->begin(), nodes->end(),
                   [&](const onnx::NodeProto &n) {
                     return n.op_type() == "Identity" && n.output_size() == 1 &&
                            std::find(dropIdentity.begin(), dropIdentity.end(),
                                      n.output(0)) != dropIdentity.end();
                   }),
               nodes->end());
  for (const auto &o : artifact.manifest.training().param_origins()) {
    if (o.kind() != "tied")
      continue;
    auto it = params.find(o.from());
    if (it == params.end())
      continue; // the source did not train: the copy keeps its value
    TrainedTensor t = it->second;
    if (o.transposed()) {
      if (t.shape.size() != 2)
        return Status::failure(source + ": tied copy '" + o.name() +
                               "' of a tensor that is not a matrix");
      transposedCopies.push_back(transposedBytes(t));
      t.data = transposedCopies.back().data();
      t.shape = {t.shape[1], t.shape[0]};
    }
    params[o.name()] = t;
  }
  for (const auto &o : artifact.manifest.training().param_origins())
    if (o.kind() == "tied-block")
      if (Status s = writeTiedBlock(source, o, params, transposedCopies);
          !s.ok())
        return s;
  return Status::success();
}

/// The trained model runs in eval mode: a training-mode BatchNormalization
/// (training_mode=1, a TorchScript TrainingMode.TRAINING export) becomes an
/// inference one reading the trained running statistics, unless a node or
/// the graph's outputs read its running-statistics outputs.
void batchNormsToEvalMode(onnx::GraphProto &g) {
  std::set<std::string> read;
  for (const auto &n : g.node())
    for (const auto &in : n.input())
      read.insert(in);
  for (const auto &o : g.output())
    read.insert(o.name());
  for (auto &n : *g.mutable_node()) {
    if (n.op_type() != "BatchNormalization" || n.output_size() < 1 ||
        std::any_of(n.output().begin() + 1, n.output().end(),
                    [&](const std::string &o) { return read.count(o) > 0; }))
      continue;
    while (n.output_size() > 1)
      n.mutable_output()->RemoveLast();
    auto *attrs = n.mutable_attribute();
    attrs->erase(std::remove_if(attrs->begin(), attrs->end(),
                                [](const onnx::AttributeProto &a) {
                                  return a.name() == "training_mode";
                                }),
                 attrs->end());
  }
}

constexpr uint64_t kExternalThreshold = uint64_t(1) << 31; // protobuf's 2 GB

} // namespace

Status saveTrainedOnnx(const Executor &exec, const std::string &path) {
  std::map<std::string, TrainedTensor> params;
  std::vector<std::string> bytes; // host copies (the arena may be a GPU's)
  const auto &program = exec.artifact().program;
  for (int i = 0; i < program.buffers_size(); ++i)
    if (program.buffers(i).role() == "param")
      bytes.emplace_back();
  for (int i = 0, k = 0; i < program.buffers_size(); ++i) {
    const auto &b = program.buffers(i);
    if (b.role() != "param")
      continue;
    std::string &host = bytes[static_cast<size_t>(k++)];
    host.resize(exec.buffers()[i].bytes());
    if (Status s = exec.readBuffer(static_cast<uint32_t>(i), host.data());
        !s.ok())
      return Status::failure(path + ": " + s.error);
    params[b.name()] = TrainedTensor{
        b.dtype(), std::vector<int64_t>(b.shape().begin(), b.shape().end()),
        host.data(), host.size()};
  }
  return saveTrainedOnnx(exec.artifact(), params, path);
}

Status saveTrainedOnnx(const Artifact &artifact,
                       const std::map<std::string, TrainedTensor> &params,
                       const std::string &path) {
  const std::string &source = artifact.manifest.training().source_model();
  if (source.empty())
    return Status::failure(artifact.dir +
                           ": the artifact does not name the ONNX model it "
                           "was compiled from");
  std::ifstream in(source, std::ios::binary);
  if (!in)
    return Status::failure(source + ": cannot read the model the artifact was "
                                    "compiled from (needed by --save-onnx)");
  onnx::ModelProto model;
  if (!model.ParseFromIstream(&in))
    return Status::failure(source + ": not a valid ONNX model");
  std::map<std::string, TrainedTensor> all = params;
  std::vector<std::string> transposedCopies;
  transposedCopies.reserve(artifact.manifest.training().param_origins_size());
  if (Status s = applyParamOrigins(artifact, model, all, transposedCopies);
      !s.ok())
    return s;
  sortTopologically(*model.mutable_graph());
  batchNormsToEvalMode(*model.mutable_graph());
  uint64_t total = 0;
  for (const auto &init : model.graph().initializer())
    if (auto it = all.find(init.name()); it != all.end())
      total += it->second.bytes;
  bool external = total >= kExternalThreshold;
  std::string dataName = path.substr(path.find_last_of('/') + 1) + ".data";
  std::ofstream data;
  if (external) {
    data.open(path + ".data", std::ios::binary | std::ios::trunc);
    if (!data)
      return Status::failure(path + ".data: cannot write");
  }
  uint64_t offset = 0;
  size_t replaced = 0;
  for (auto &init : *model.mutable_graph()->mutable_initializer()) {
    auto it = all.find(init.name());
    if (it == all.end())
      continue; // constants and frozen tables keep their values
    const TrainedTensor &t = it->second;
    // An fp32 master copy of a bf16/f16 initializer (smpc --master-weights
    // fp32): rounded back to the file's type (to nearest even).
    bool narrow = static_cast<DType>(t.dtype) == DType::F32 &&
                  (init.data_type() == onnx::TensorProto::BFLOAT16 ||
                   init.data_type() == onnx::TensorProto::FLOAT16);
    if ((!narrow && !sameType(init.data_type(), t.dtype)) ||
        !std::equal(init.dims().begin(), init.dims().end(), t.shape.begin(),
                    t.shape.end()))
      return Status::failure(source + ": initializer '" + init.name() +
                             "' no longer matches the trained parameter");
    const char *bytesOut = t.data;
    size_t size = t.bytes;
    std::string rounded;
    if (narrow) {
      bool bf16 = init.data_type() == onnx::TensorProto::BFLOAT16;
      rounded.resize(t.bytes / 2);
      for (size_t i = 0; i < t.bytes / 4; ++i) {
        float f;
        std::memcpy(&f, t.data + 4 * i, 4);
        uint16_t h = bf16 ? floatToBf16(f) : floatToHalf(f);
        std::memcpy(rounded.data() + 2 * i, &h, 2);
      }
      bytesOut = rounded.data();
      size = rounded.size();
    }
    init.clear_float_data();
    init.clear_double_data();
    init.clear_int32_data();
    init.clear_int64_data();
    init.clear_uint64_data();
    init.clear_external_data();
    if (external) {
      data.write(bytesOut, static_cast<std::streamsize>(size));
      init.clear_raw_data();
      init.set_data_location(onnx::TensorProto::EXTERNAL);
      auto add = [&](const char *k, const std::string &v) {
        auto *kv = init.add_external_data();
        kv->set_key(k);
        kv->set_value(v);
      };
      add("location", dataName);
      add("offset", std::to_string(offset));
      add("length", std::to_string(size));
      offset += size;
    } else {
      init.set_data_location(onnx::TensorProto::DEFAULT);
      init.set_raw_data(bytesOut, size);
    }
    ++replaced;
  }
  if (replaced != all.size())
    return Status::failure(source + ": " +
                           std::to_string(all.size() - replaced) +
                           " trained parameters have no initializer to hold "
                           "them");
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out || !model.SerializeToOstream(&out))
      return Status::failure(path + ": cannot write");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return Status::failure(path + ": cannot rename the written file");
  return Status::success();
}

Status findSourceModel(Artifact &artifact, const std::string &path) {
  auto *t = artifact.manifest.mutable_training();
  const std::string recorded = t->source_model();
  if (recorded.empty() && path.empty())
    return Status::failure(artifact.dir +
                           ": the artifact does not name the ONNX model it "
                           "was compiled from; --save-onnx needs it: pass "
                           "--source-model MODEL.onnx");
  const std::string &file = path.empty() ? recorded : path;
  std::ifstream in(file, std::ios::binary);
  if (!in)
    return Status::failure(
        file + ": cannot read the ONNX model " +
        (path.empty() ? "the artifact was compiled from" : "--source-model names") +
        " (--save-onnx writes it back with the trained values; checked "
        "before training)" +
        (path.empty() ? "; pass --source-model FILE, a copy of it" : ""));
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  uint64_t sum = smp::base::checksum64(bytes.data(), bytes.size());
  if (t->source_model_checksum() != 0 && sum != t->source_model_checksum())
    return Status::failure(
        file + " is not the model " + artifact.dir +
        " was compiled from (its bytes differ from " + recorded +
        " as smpc read it): --save-onnx would write another model's "
        "structure; pass " +
        (path.empty() ? "--source-model FILE, " : "") +
        "a copy of the file smpc compiled");
  // Parsed now, not after training: a model smpc read as ONNX text
  // (.onnxtxt) cannot be written back in place.
  if (onnx::ModelProto model; !model.ParseFromString(bytes))
    return Status::failure(
        file + ": not a binary ONNX model (smpc compiled it from " +
        (file.size() >= 8 && file.compare(file.size() - 8, 8, ".onnxtxt") == 0
             ? "ONNX text"
             : "another format") +
        "); --save-onnx writes the trained values into the binary model: "
        "convert it (python: onnx.save(onnx.parser.parse_model(text), "
        "'MODEL.onnx')) and compile that");
  t->set_source_model(file);
  return Status::success();
}

Status saveTrainedOnnxGathered(Executor &exec, Communicator &comm,
                               const std::string &path, int64_t steps) {
  std::string gather = path + ".shards", written;
  Status s = saveCheckpoint(exec, gather, steps, steps, written);
  if (!s.ok() || comm.rank() != 0)
    return s;
  std::map<std::string, GlobalTensor> whole;
  if (!(s = readGlobalTensors(gather, "param", whole)).ok())
    return s;
  std::map<std::string, TrainedTensor> views;
  for (const auto &[name, g] : whole)
    views[name] = TrainedTensor{g.dtype, g.shape, g.bytes.data(), g.bytes.size()};
  if (!(s = saveTrainedOnnx(exec.artifact(), views, path)).ok())
    return s;
  std::error_code ec;
  std::filesystem::remove_all(gather, ec);
  return Status::success();
}

} // namespace smprt
