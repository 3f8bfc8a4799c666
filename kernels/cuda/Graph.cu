//===- Graph.cu - A step captured as a CUDA graph -------------------------===//
//
// Kernels.h's Graph: stream capture on the context's stream, in the
// thread-local mode (a call that would wait for the device, from the
// capturing thread, fails the capture instead of running), instantiated
// with cudaGraphInstantiateFlagAutoFreeOnLaunch (a scratch a kernel left
// to a later free is the graph's and freed before the next launch), and
// launched on the same stream.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

namespace smp::kernels::cuda {
using namespace detail;

struct Graph {
  cudaGraphExec_t exec = nullptr;
};

Status beginCapture(Context &ctx) {
  return cudaStatus(
      "cuda_graph_capture",
      cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeThreadLocal));
}

Status endCapture(Context &ctx, Graph *&out) {
  const char *op = "cuda_graph_capture";
  out = nullptr;
  cudaGraph_t graph = nullptr;
  cudaError_t e = cudaStreamEndCapture(ctx.stream, &graph);
  if (e != cudaSuccess) {
    cudaGetLastError(); // the capture's refusal is not the device's fault
    return cudaStatus(op, e);
  }
  cudaGraphExec_t exec = nullptr;
  e = cudaGraphInstantiateWithFlags(&exec, graph,
                                    cudaGraphInstantiateFlagAutoFreeOnLaunch);
  cudaGraphDestroy(graph); // the instantiation keeps what it needs
  if (e != cudaSuccess)
    return cudaStatus("cuda_graph_instantiate", e);
  out = new Graph{exec};
  return Status::success();
}

Status launchGraph(Context &ctx, Graph &graph) {
  return cudaStatus("cuda_graph_launch",
                    cudaGraphLaunch(graph.exec, ctx.stream));
}

void destroyGraph(Graph *graph) {
  if (!graph)
    return;
  cudaGraphExecDestroy(graph->exec);
  delete graph;
}

} // namespace smp::kernels::cuda
