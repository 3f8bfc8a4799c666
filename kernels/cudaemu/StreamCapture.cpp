//===- StreamCapture.cpp - Stream capture in the emulator -----------------===//
//
// cudaStreamBeginCapture to cudaStreamEndCapture: the work the captured
// streams issue is recorded into a graph's body (Graphs.cpp launches it),
// the streams that wait for an event of the capture join it, and what
// cudart refuses during a capture (a synchronization, the legacy null
// stream's implicit dependency, a wait for work outside the capture, a
// stream left unjoined) invalidates it, as on a GPU.
//
//===----------------------------------------------------------------------===//

#include "State.h"
#include "StreamsState.h"

#include <algorithm>
#include <string>

using namespace smp::cudaemu;

namespace smp::cudaemu::streams {

/// Marks capture `c` invalid (its end will fail) and says why, once.
void invalidate(Capture &c, const std::string &why) {
  if (!c.invalid.empty())
    return;
  c.invalid = why;
  report("stream capture invalidated: " + why);
}

/// Ends capture `c`: its streams are captured no more (under the lock).
void leave(Capture *c) {
  for (EmuStream *m : c->members)
    m->capture = nullptr;
  sched().captures.erase(c->id);
  --activeCaptures;
  delete c;
}

void orderAfter(CaptureClock &into, const CaptureClock &from) {
  for (const auto &[stream, n] : from)
    into[stream] = std::max(into[stream], n);
}

/// Work on the legacy null stream while a blocking stream of its device is
/// captured: cudart refuses the implicit dependency and invalidates the
/// capture (under the lock).
void implicitUse(EmuStream &null) {
  for (auto &[id, c] : sched().captures)
    for (EmuStream *m : c->members)
      if (m->device == null.device && !(m->flags & cudaStreamNonBlocking)) {
        invalidate(*c, "the legacy null stream was used while a blocking "
                       "stream of its device is captured");
        setError(cudaErrorStreamCaptureImplicit);
        break;
      }
}

/// Appends `work` to the capture of `s` when it has one.
bool captureWork(EmuStream &s, std::function<void()> &work, WorkKind kind,
                 WorkOrder &order) {
  Capture *c = s.capture;
  if (!c) {
    if (s.null)
      implicitUse(s);
    return false;
  }
  c->body->work.push_back({std::move(work), kind, std::move(order)});
  uint64_t n = ++c->issued[s.id];
  c->after[s.id][s.id] = n;
  return true;
}

/// cudaStreamSynchronize or cudaStreamQuery (`call`) of a captured stream,
/// or of the legacy null stream during a capture: refused, the capture
/// invalidated.
cudaError_t refuseCapturedStream(cudaStream_t h, const char *call) {
  if (activeCaptures.load() && isNull(h))
    return refuseDuringCapture(call);
  return refuseOnCapturedStream(h, std::string(call) + " of a captured stream");
}

/// A query or synchronization (`call`) of an event last recorded in a
/// capture: it stands for no work that runs.
cudaError_t capturedEvent(const char *call) {
  report(std::string(call) +
         " of an event last recorded in a captured stream: it stands for "
         "work of a graph, not of a stream");
  setError(cudaErrorCapturedEvent);
  return cudaErrorCapturedEvent;
}

/// An event recorded on a captured stream stands for what that stream is
/// ordered after in the capture.
bool recordInCapture(cudaStream_t h, EmuEvent &e) {
  e.capture = 0;
  if (!activeCaptures.load())
    return false;
  Lock lock(sched().mutex);
  EmuStream &s = resolve(h);
  if (!s.capture)
    return false;
  e.capture = s.capture->id;
  e.captured = s.capture->after[s.id];
  e.at = {};
  return true;
}

/// cudaStreamWaitEvent while a capture is in progress or of an event
/// recorded in one: a stream that waits for an event of a capture joins
/// it; a captured stream may not wait for work outside its capture.
cudaError_t waitInCapture(cudaStream_t h, EmuEvent &e) {
  Scheduler &k = sched();
  Lock lock(k.mutex);
  EmuStream &s = resolve(h);
  if (!e.capture) {
    if (s.capture && e.recorded) {
      invalidate(*s.capture, "a captured stream waited for an event "
                             "recorded outside the capture");
      setError(cudaErrorStreamCaptureIsolation);
      return cudaErrorStreamCaptureIsolation;
    }
    if (!s.capture)
      enqueueWait(h, e.at);
    return cudaSuccess; // a never-recorded event: nothing to wait for
  }
  auto it = k.captures.find(e.capture);
  if (it == k.captures.end())
    return capturedEvent("cudaStreamWaitEvent");
  Capture *c = it->second;
  if (s.null || (s.capture && s.capture != c)) {
    report(std::string("cudaStreamWaitEvent of ") +
           (s.null ? "the legacy null stream" : "a stream of another capture") +
           " on an event of a capture");
    invalidate(*c, "a stream outside it waited for its event");
    cudaError_t err =
        s.null ? cudaErrorStreamCaptureImplicit : cudaErrorStreamCaptureMerge;
    setError(err);
    return err;
  }
  if (!s.capture) {
    s.capture = c;
    c->members.push_back(&s);
  }
  orderAfter(c->after[s.id], e.captured);
  return cudaSuccess;
}

} // namespace smp::cudaemu::streams

using namespace smp::cudaemu::streams;

namespace smp::cudaemu {

std::shared_ptr<GraphBody> capturedBody(cudaStream_t h) {
  if (!activeCaptures.load())
    return nullptr;
  Lock lock(sched().mutex);
  Capture *c = resolve(h).capture;
  return c ? c->body : nullptr;
}

cudaError_t refuseOnCapturedStream(cudaStream_t h, const std::string &why) {
  if (!activeCaptures.load())
    return cudaSuccess;
  Lock lock(sched().mutex);
  Capture *c = resolve(h).capture;
  if (!c)
    return cudaSuccess;
  invalidate(*c, why);
  setError(cudaErrorStreamCaptureUnsupported);
  return cudaErrorStreamCaptureUnsupported;
}

cudaError_t refuseDuringCapture(const char *call) {
  if (!activeCaptures.load())
    return cudaSuccess;
  Lock lock(sched().mutex);
  bool refused = false;
  for (auto &[id, c] : sched().captures)
    if (c->mode != cudaStreamCaptureModeRelaxed) {
      invalidate(*c, std::string(call) +
                         " was called while a stream is captured (it waits "
                         "for the device or allocates synchronously)");
      refused = true;
    }
  if (!refused)
    return cudaSuccess;
  setError(cudaErrorStreamCaptureUnsupported);
  return cudaErrorStreamCaptureUnsupported;
}

} // namespace smp::cudaemu

extern "C" {

cudaError_t cudaStreamBeginCapture(cudaStream_t stream,
                                   enum cudaStreamCaptureMode mode) {
  Scheduler &k = sched();
  Lock lock(k.mutex);
  if (isNull(stream)) {
    report("cudaStreamBeginCapture of the legacy null stream: cudart "
           "captures only streams made by cudaStreamCreate*");
    return cudaErrorStreamCaptureUnsupported;
  }
  EmuStream &s = resolve(stream);
  if (s.capture)
    return cudaErrorIllegalState;
  auto *c = new Capture;
  c->id = ++k.captureSerial;
  c->origin = &s;
  c->mode = mode;
  c->members.push_back(&s);
  s.capture = c;
  k.captures[c->id] = c;
  ++activeCaptures;
  return cudaSuccess;
}

/// The capture's graph, when it is valid and every stream it joined has
/// been joined back: the origin ordered after each one's last captured
/// work (cudart's cudaErrorStreamCaptureUnjoined otherwise).
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph) {
  Scheduler &k = sched();
  Lock lock(k.mutex);
  if (!pGraph)
    return cudaErrorInvalidValue;
  *pGraph = nullptr;
  Capture *c = isNull(stream) ? nullptr : resolve(stream).capture;
  if (!c)
    return cudaErrorIllegalState;
  if (c->origin != &resolve(stream)) {
    report("cudaStreamEndCapture of a stream that joined a capture but "
           "did not begin it");
    return cudaErrorStreamCaptureUnmatched;
  }
  cudaError_t result = cudaSuccess;
  if (!c->invalid.empty())
    result = cudaErrorStreamCaptureInvalidated;
  CaptureClock &joined = c->after[c->origin->id];
  for (EmuStream *m : c->members)
    if (result == cudaSuccess && joined[m->id] < c->issued[m->id]) {
      report("cudaStreamEndCapture: stream " + std::to_string(m->id) +
             " joined the capture and its last captured work is not "
             "joined back (the origin stream never waited for an event "
             "recorded after it)");
      result = cudaErrorStreamCaptureUnjoined;
    }
  if (result == cudaSuccess)
    *pGraph = reinterpret_cast<cudaGraph_t>(new EmuGraph{c->body});
  leave(c);
  return result;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream,
                                  enum cudaStreamCaptureStatus *status) {
  if (!status)
    return cudaErrorInvalidValue;
  *status = cudaStreamCaptureStatusNone;
  if (!activeCaptures.load())
    return cudaSuccess;
  Lock lock(sched().mutex);
  if (Capture *c = resolve(stream).capture)
    *status = c->invalid.empty() ? cudaStreamCaptureStatusActive
                                 : cudaStreamCaptureStatusInvalidated;
  return cudaSuccess;
}

} // extern "C"
