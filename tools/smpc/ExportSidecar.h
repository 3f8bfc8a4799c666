//===- ExportSidecar.h - smp.export's sidecar file ------------*- C++ -*-===//
//
// `smp.export` (python/smp) writes MODEL.smp-export.json beside MODEL.onnx
// with what ONNX cannot say about the PyTorch module:
//   {"format": "smp-export/1",
//    "frozen": ["initializer", ...],       requires_grad=False parameters
//                                          and float buffers: no gradient
//    "padding_rows": [{"initializer": "wte", "rows": [0]}, ...]
//                                          nn.Embedding padding_idx rows
//    "dropout": [{"module": "drop", "p": 0.1}, ...]
//                                          dropout the file does not hold
//                                          (channel or alpha dropout,
//                                          functional dropout, "forward"
//                                          with p null: a random op),
//                                          exported as the identity:
//                                          --train needs --no-dropout
//    "dropout_nodes": [...]                the file's random Dropout nodes
//                                          and what wrote each (an
//                                          nn.Dropout, a functional call);
//                                          not read: the file holds them
//    "parameters": {"initializer": "state_dict key", ...}}
// smpc compile reads it when it is there.
//
//===----------------------------------------------------------------------===//

#ifndef SMPC_EXPORTSIDECAR_H
#define SMPC_EXPORTSIDECAR_H

#include "Options.h"

#include <optional>
#include <string>

/// MODEL.onnx -> MODEL.smp-export.json.
std::string exportSidecarPath(const std::string &model);

/// Applies the sidecar of opts.input, if any, to a compile: frozen tensors
/// join --freeze. Returns an exit code when the sidecar is malformed or asks
/// for what smp cannot do (dropout without --no-dropout).
std::optional<int> applyExportSidecar(Options &opts);

#endif // SMPC_EXPORTSIDECAR_H
