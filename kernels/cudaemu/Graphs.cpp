//===- Graphs.cpp - CUDA graphs of the emulator ---------------------------===//
//
// The graphs a stream capture makes (Streams.cpp captures the work of the
// streams that join it, in issue order) and their launches: an
// instantiation shares its graph's body, and a launch issues the body's
// work on the launch stream in the order it was captured, each item as it
// was issued then (a kernel with the arguments of its capture, a copy of
// the same addresses), as a GPU replays a graph's nodes. The memory a
// capture's stream-ordered allocations took is the graph's own (the same
// addresses on every launch, counted by cudaDeviceGetGraphMemAttribute)
// until the last graph or instantiation holding it is destroyed.
//
//===----------------------------------------------------------------------===//

#include "State.h"
#include "Streams.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <mutex>

using namespace smp::cudaemu;

namespace {

std::mutex graphMemoryMutex;
uint64_t graphMemoryUsed = 0, graphMemoryHigh = 0;

EmuGraph *graphOf(const void *handle) {
  return static_cast<EmuGraph *>(const_cast<void *>(handle));
}

} // namespace

namespace smp::cudaemu {

void graphMemoryChanged(int64_t bytes) {
  std::lock_guard<std::mutex> lock(graphMemoryMutex);
  graphMemoryUsed += static_cast<uint64_t>(bytes);
  graphMemoryHigh = std::max(graphMemoryHigh, graphMemoryUsed);
}

GraphBody::~GraphBody() {
  for (const auto &[p, bytes] : memory)
    release(p, MemoryKind::Device);
  graphMemoryChanged(-static_cast<int64_t>(memoryBytes));
}

} // namespace smp::cudaemu

extern "C" {

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                 unsigned long long) {
  if (!pGraphExec || !graph)
    return cudaErrorInvalidValue;
  *pGraphExec =
      reinterpret_cast<cudaGraphExec_t>(new EmuGraph{graphOf(graph)->body});
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *pGraphExec,
                                          cudaGraph_t graph,
                                          unsigned long long flags) {
  return cudaGraphInstantiate(pGraphExec, graph, flags);
}

/// Issues the graph's work on `stream` in its captured order: after the
/// stream's work before the launch, before its work after; its Lazy items
/// (sends' waits for their receives) last, since on one stream each would
/// hold the work captured on other streams behind it, where on a GPU it
/// holds only its own branch of the graph (the pipeline's sends to one
/// peer on their own stream, beside the receives from another). So a
/// launch finds no hang that a send's wait causes; the same work issued
/// outside a graph (smprun's first step, before the record) does.
cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream) {
  if (!graphExec)
    return cudaErrorInvalidValue;
  if (capturedBody(stream)) {
    report("cudaGraphLaunch into a captured stream (a child graph) is not "
           "emulated");
    return cudaErrorStreamCaptureUnsupported;
  }
  if (cudaError_t e = stickyError())
    return e; // a faulted context runs nothing more
  const std::vector<CapturedWork> &work = graphOf(graphExec)->body->work;
  for (bool lazy : {false, true})
    for (const CapturedWork &w : work)
      if ((w.kind == WorkKind::Lazy) == lazy)
        enqueueWork(stream, w.work, w.kind, w.order);
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec) {
  delete graphOf(graphExec);
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graphOf(graph);
  return cudaSuccess;
}

cudaError_t cudaDeviceGetGraphMemAttribute(int device,
                                           enum cudaGraphMemAttributeType attr,
                                           void *value) {
  int count = 0;
  cudaGetDeviceCount(&count);
  if (!value || device < 0 || device >= count)
    return cudaErrorInvalidValue;
  std::lock_guard<std::mutex> lock(graphMemoryMutex);
  bool high = attr == cudaGraphMemAttrUsedMemHigh ||
              attr == cudaGraphMemAttrReservedMemHigh;
  *static_cast<uint64_t *>(value) = high ? graphMemoryHigh : graphMemoryUsed;
  return cudaSuccess;
}

/// Only the high-water marks may be set, and only to 0: they start again
/// from the memory held now.
cudaError_t cudaDeviceSetGraphMemAttribute(int device,
                                           enum cudaGraphMemAttributeType attr,
                                           void *value) {
  int count = 0;
  cudaGetDeviceCount(&count);
  if (!value || device < 0 || device >= count ||
      *static_cast<uint64_t *>(value) != 0 ||
      (attr != cudaGraphMemAttrUsedMemHigh &&
       attr != cudaGraphMemAttrReservedMemHigh))
    return cudaErrorInvalidValue;
  std::lock_guard<std::mutex> lock(graphMemoryMutex);
  graphMemoryHigh = graphMemoryUsed;
  return cudaSuccess;
}

cudaError_t cudaDeviceGraphMemTrim(int) { return cudaSuccess; }

} // extern "C"
