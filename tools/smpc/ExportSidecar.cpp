//===- ExportSidecar.cpp - What smp.export records beside the ONNX file ---===//

#include "ExportSidecar.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Regex.h"

std::string exportSidecarPath(const std::string &model) {
  llvm::StringRef m = model;
  if (m.ends_with(".onnx"))
    m = m.drop_back(5);
  return m.str() + ".smp-export.json";
}

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
