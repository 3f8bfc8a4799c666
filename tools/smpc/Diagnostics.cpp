//===- Diagnostics.cpp - smpc's one-line diagnostics ----------------------===//

#include "Diagnostics.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace {
unsigned gErrors = 0;

/// One line: newlines become "; ".
std::string oneLine(std::string text) {
  std::string out;
  for (char c : text) {
    if (c == '\n')
      out += "; ";
    else
      out += c;
  }
  return out;
}
} // namespace

std::string describeLocation(Location loc) {
  // Fused and call-site locations: the first (innermost) one that says
  // something.
  for (int depth = 0; depth < 16; ++depth) {
    if (auto name = dyn_cast<NameLoc>(loc)) {
      std::string inner = describeLocation(name.getChildLoc());
      return (inner.empty() ? "" : inner + ": ") + "node '" +
             name.getName().str() + "'";
    }
    if (auto file = dyn_cast<FileLineColLoc>(loc)) {
      std::string text = file.getFilename().str();
      if (file.getLine() > 0)
        text += ":" + std::to_string(file.getLine()) + ":" +
                std::to_string(file.getColumn());
      return text;
    }
    if (auto fused = dyn_cast<FusedLoc>(loc)) {
      if (fused.getLocations().empty())
        return "";
      loc = fused.getLocations().front();
      continue;
    }
    if (auto call = dyn_cast<CallSiteLoc>(loc)) {
      loc = call.getCallee();
      continue;
    }
    return "";
  }
  return "";
}

OneLineDiagnostics::OneLineDiagnostics(MLIRContext *ctx)
    : handler(ctx, [](Diagnostic &d) {
        bool error = d.getSeverity() == DiagnosticSeverity::Error;
        if (!error && d.getSeverity() != DiagnosticSeverity::Warning)
          return failure(); // remarks: the default handler
        std::string where = describeLocation(d.getLocation());
        std::string text = d.str();
        for (const Diagnostic &note : d.getNotes()) {
          std::string at = describeLocation(note.getLocation());
          text += " (note: " + (at.empty() ? "" : at + ": ") + note.str() + ")";
        }
        llvm::errs() << (error ? "smpc: error: " : "smpc: warning: ")
                     << (where.empty() ? "" : where + ": ") << oneLine(text)
                     << "\n";
        gErrors += error;
        return success();
      }) {
  // The op a pass failed on, printed whole, is no user-facing note.
  ctx->printOpOnDiagnostic(false);
}

unsigned OneLineDiagnostics::errorCount() { return gErrors; }
