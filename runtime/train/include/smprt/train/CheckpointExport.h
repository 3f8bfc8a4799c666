//===- CheckpointExport.h - Checkpoints in other formats --------*- C++ -*-===//
//
// What smp-checkpoint writes from a (sharded) checkpoint: one unsharded
// single-rank checkpoint, safetensors files. The ONNX export goes through
// OnnxExport.h with the artifact that wrote the checkpoint.
//
//===----------------------------------------------------------------------===//

#ifndef SMPRT_TRAIN_CHECKPOINTEXPORT_H
#define SMPRT_TRAIN_CHECKPOINTEXPORT_H

#include "smprt/train/Checkpoint.h"

#include <map>
#include <string>

namespace smprt {

/// `s` as a JSON string: quoted, with '"' and '\\' escaped and bytes below
/// 0x20 written as \u00XX.
std::string jsonString(const std::string &s);

/// Writes `tensors` to `path` in the safetensors format
/// (huggingface.co/docs/safetensors): an 8-byte little-endian header
/// length, a JSON header {name: {"dtype", "shape", "data_offsets"}, ...,
/// "__metadata__": {string: string}} padded with spaces to a multiple of 8,
/// then every tensor's little-endian bytes, in name order, back to back.
Status writeSafetensors(const std::string &path,
                        const std::map<std::string, GlobalTensor> &tensors,
                        const std::map<std::string, std::string> &metadata);

/// Writes the newest checkpoint of `srcDir` gathered into one unsharded
/// checkpoint of a single rank in `outDir` (outDir/latest and
/// outDir/step-<N>/{index.pb,tensors.bin}): every parameter and state
/// tensor whole, its record kept (the writer's plan, prefixed "gathered
/// from"). It resumes under a one-rank artifact of the same model.
Status writeGatheredCheckpoint(const std::string &srcDir,
                               const std::string &outDir,
                               std::string &written);

} // namespace smprt

#endif // SMPRT_TRAIN_CHECKPOINTEXPORT_H
