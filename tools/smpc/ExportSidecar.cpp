//===- ExportSidecar.cpp - What smp.export records beside the ONNX file ---===//

#include "ExportSidecar.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Regex.h"

#include <cstdio>

std::string exportSidecarPath(const std::string &model) {
  llvm::StringRef m = model;
  if (m.ends_with(".onnx"))
    m = m.drop_back(5);
  return m.str() + ".smp-export.json";
}

namespace {

/// `v` in %g form (0.1, not 0.10).
std::string shortNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

/// The model's dropout that the file does not hold (smp.export wrote it as
/// the identity): channel or alpha dropout modules, a module the trace did
/// not call, a Hugging Face config's functional dropout, or "forward" (p
/// null) for another random op of the train() forward. Training without it
/// needs --no-dropout (nn.Dropout modules are Dropout nodes in the file).
std::optional<int> checkDropout(const llvm::json::Object &root,
                                const std::string &path, Options &opts) {
  const llvm::json::Array *list = root.getArray("dropout");
  if (!list || list->empty())
    return std::nullopt;
  std::string names;
  for (const llvm::json::Value &d : *list) {
    const llvm::json::Object *o = d.getAsObject();
    auto module = o ? o->getString("module") : std::nullopt;
    const llvm::json::Value *pv = o ? o->get("p") : nullptr;
    auto p = pv ? pv->getAsNumber() : std::nullopt;
    if (!module || !pv || (!p && pv->kind() != llvm::json::Value::Null))
      return fail(path + ": \"dropout\" entries need \"module\" (a name) "
                         "and \"p\" (a number, or null when unknown)");
    if (&d - &list->front() < 3)
      names += (names.empty() ? "" : ", ") + module->str() +
               (p ? " p=" + shortNumber(*p) : " (a random op)");
  }
  if (list->size() > 3)
    names += ", ...";
  opts.import.dropoutListed = true;
  if (opts.import.noDropout)
    return std::nullopt;
  return fail(path + ": the model has " + std::to_string(list->size()) +
              " dropout(s) (" + names +
              ") that the file does not hold (smp.export wrote them as the "
              "identity: only nn.Dropout becomes a Dropout node smp trains); "
              "pass --no-dropout to train without any dropout (as "
              "model.eval() drops nothing), or set their p to 0 in the model");
}

} // namespace

std::optional<int> applyExportSidecar(Options &opts) {
  if (opts.command != "compile" || !opts.train ||
      !llvm::StringRef(opts.input).ends_with(".onnx"))
    return std::nullopt;
  std::string path = exportSidecarPath(opts.input);
  if (!llvm::sys::fs::exists(path))
    return std::nullopt;
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return fail(path + ": cannot read (" + buffer.getError().message() + ")");
  auto parsed = llvm::json::parse((*buffer)->getBuffer());
  if (!parsed)
    return fail(path +
                ": not valid JSON: " + llvm::toString(parsed.takeError()));
  const llvm::json::Object *root = parsed->getAsObject();
  if (!root || root->getString("format") != "smp-export/1")
    return fail(path + ": not an smp.export sidecar (\"format\": "
                       "\"smp-export/1\"); remove it or export again");
  if (std::optional<int> r = checkDropout(*root, path, opts))
    return r;
  if (const llvm::json::Array *rows = root->getArray("padding_rows"))
    for (const llvm::json::Value &r : *rows) {
      const llvm::json::Object *o = r.getAsObject();
      auto name = o ? o->getString("initializer") : std::nullopt;
      const llvm::json::Array *list = o ? o->getArray("rows") : nullptr;
      std::optional<int64_t> row;
      if (list && list->size() == 1)
        row = (*list)[0].getAsInteger();
      if (!name || !row || *row < 0)
        return fail(path + ": \"padding_rows\" entries need \"initializer\" "
                           "and \"rows\" (one row index >= 0)");
      // The importer keeps the row out of the lookup's gradient, as
      // nn.Embedding(padding_idx=row) does.
      opts.import.paddingRows[*name] = *row;
    }
  // Which initializers hold PyTorch state (one-element ones too: nn.PReLU's
  // slope is a parameter, a scalar buffer is not).
  if (const llvm::json::Object *params = root->getObject("parameters")) {
    opts.import.exportedStateKeys.emplace();
    for (const auto &kv : *params)
      opts.import.exportedStateKeys->insert(kv.first.str());
  }
  const llvm::json::Array *frozen = root->getArray("frozen");
  if (!frozen || frozen->empty())
    return std::nullopt;
  // One anchored alternation of the exact names; name#N are the per-reader
  // copies the importer makes of a merged initializer.
  std::string regex;
  for (const llvm::json::Value &v : *frozen) {
    auto name = v.getAsString();
    if (!name)
      return fail(path + ": \"frozen\" must list initializer names");
    regex += (regex.empty() ? "" : "|") + llvm::Regex::escape(*name);
  }
  regex = "^(" + regex + ")(#[0-9]+)?$";
  opts.plan.freeze = opts.plan.freeze.empty() ? regex : "(" + opts.plan.freeze + ")|" + regex;
  return std::nullopt;
}
