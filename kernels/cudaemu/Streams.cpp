//===- Streams.cpp - Streams, events and deferred work of the emulator ----===//
//
// The cudart stream and event calls, and the scheduler every piece of work
// (a launch, an asynchronous copy or memset, an event record, a wait, a
// stream-ordered free, a cuBLASLt product, an NCCL operation or group) is
// issued through. By default a stream runs its work when it is issued.
// Under SMP_CUDAEMU_DEFER=low (the streams of priority 0, the null stream
// included) or =high (the streams of priority below 0) the chosen streams
// are slow: each queues its work in a FIFO, which runs only when something
// needs it (a synchronization of the stream, of an event recorded on it or
// of the device, a query, another stream reaching a cudaStreamWaitEvent on
// such an event, a synchronous copy, the stream's destruction, the legacy
// null stream's ordering). A missing wait between two streams then reads
// what the other stream has not written yet, as on a GPU where that stream
// is slow. One recursive mutex guards the scheduler; running an item may
// run other streams (its waits). Without any deferred stream nothing is
// locked: work runs in the issuing thread, as it always did.
//
//===----------------------------------------------------------------------===//

#include "Streams.h"
#include "State.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>

using namespace smp::cudaemu;

namespace {

/// An H100's stream priorities: 0 the least (the default), -5 the greatest.
constexpr int kLeastPriority = 0, kGreatestPriority = -5;

/// SMP_CUDAEMU_DEFER: which streams are slow, read when a stream is made
/// (the null stream's when it is used); anything else is refused.
enum class Defer { None, Low, High };
Defer deferMode() {
  const char *v = std::getenv("SMP_CUDAEMU_DEFER");
  if (!v || !*v)
    return Defer::None;
  std::string s(v);
  if (s == "low")
    return Defer::Low;
  if (s == "high")
    return Defer::High;
  report("SMP_CUDAEMU_DEFER=" + s +
         " is not a setting: low (defer the work of the streams of the "
         "default priority 0, the null stream's included), high (defer the "
         "work of the streams of priority below 0), or unset or empty (run "
         "all work when it is issued)");
  std::abort();
}
bool deferredAt(int priority) {
  switch (deferMode()) {
  case Defer::Low:
    return priority >= kLeastPriority;
  case Defer::High:
    return priority < kLeastPriority;
  default:
    return false;
  }
}

/// A piece of work on a stream.
struct Item {
  uint64_t position = 0; // on its stream: 1 the first issued
  uint64_t serial = 0;   // in the process's issue order
  bool ordered = false;  // WorkKind::Ordered
  std::function<void()> work;
};

} // namespace

struct Capture;

struct EmuStream {
  uint64_t id = 0;
  int device = 0;
  unsigned flags = 0;
  int priority = 0;
  bool deferred = false;
  bool null = false;
  std::deque<Item> queue;
  uint64_t issued = 0, done = 0;
  bool running = false; // an item of it is running (no re-entry)
  Capture *capture = nullptr; // the stream capture it is part of
};

/// What a stream has been ordered after in a capture: for each stream of
/// the capture (by serial), how many of its captured items.
using CaptureClock = std::map<uint64_t, uint64_t>;

/// A stream capture in progress (cudaStreamBeginCapture's): the streams it
/// joined (the origin first, then each that waited for an event recorded
/// in it) and the work they issued since, in issue order.
struct Capture {
  uint64_t id = 0;
  EmuStream *origin = nullptr;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  std::shared_ptr<GraphBody> body = std::make_shared<GraphBody>();
  std::string invalid; // why it was invalidated; empty while it is valid
  std::vector<EmuStream *> members;
  CaptureClock issued;                    // items captured on each stream
  std::map<uint64_t, CaptureClock> after; // each member's dependencies
};

namespace {

/// When an event's record ran (cudaEventElapsedTime's clock): shared with
/// the queued record, which outlives a destroyed event.
struct Clock {
  bool recorded = false;
  std::chrono::steady_clock::time_point at{};
};
struct EmuEvent {
  unsigned flags;
  std::shared_ptr<Clock> clock = std::make_shared<Clock>();
  StreamPoint at;        // its last record, as issued
  bool recorded = false; // ever recorded
  /// The capture its last record was made in (its serial; 0: none), and
  /// what that record stood for in it.
  uint64_t capture = 0;
  CaptureClock captured;
};

struct Scheduler {
  std::recursive_mutex mutex;
  std::map<uint64_t, EmuStream *> live;    // every stream by serial
  std::map<int, EmuStream *> nulls;        // each device's null stream
  std::map<uint64_t, StreamPoint> ordered; // queued Ordered items by serial
  std::map<uint64_t, Capture *> captures;  // in progress, by serial
  uint64_t serial = 0;
  uint64_t streams = 0;
  uint64_t captureSerial = 0;
};
Scheduler &sched() {
  static Scheduler *s = new Scheduler; // never destroyed: used at exit
  return *s;
}
/// Set once a stream defers: from then on, every issue goes through the
/// scheduler's lock.
std::atomic<bool> anyDeferred{false};
/// How many stream captures are in progress: while none is, issuing work
/// never looks for one.
std::atomic<int> activeCaptures{0};

using Lock = std::lock_guard<std::recursive_mutex>;

bool isNull(cudaStream_t s) {
  return s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread;
}

EmuStream *registerStream(EmuStream *s) {
  Scheduler &k = sched();
  Lock lock(k.mutex);
  s->id = ++k.streams;
  k.live[s->id] = s;
  return s;
}

/// The stream a handle names (under the lock).
EmuStream &resolve(cudaStream_t h) {
  if (!isNull(h))
    return *reinterpret_cast<EmuStream *>(h);
  Scheduler &k = sched();
  int device = emuCurrentDevice();
  EmuStream *&s = k.nulls[device];
  if (!s) {
    s = new EmuStream;
    s->device = device;
    s->null = true;
    registerStream(s);
  }
  return *s;
}

void runStream(EmuStream &s, uint64_t upTo);

/// Runs every queued Ordered item issued before `serial`.
void runOrderedBefore(uint64_t serial) {
  auto &m = sched().ordered;
  while (!m.empty() && m.begin()->first < serial) {
    auto [key, point] = *m.begin();
    runUpTo(point);
    m.erase(key); // ran (never loop on one that cannot)
  }
}

void execute(EmuStream &s, Item &it) {
  bool was = s.running;
  s.running = true;
  if (it.ordered) {
    runOrderedBefore(it.serial);
    sched().ordered.erase(it.serial);
  }
  it.work();
  s.running = was;
  s.done = it.position;
}

void runStream(EmuStream &s, uint64_t upTo) {
  while (!s.running && s.done < upTo && !s.queue.empty()) {
    Item it = std::move(s.queue.front());
    s.queue.pop_front();
    execute(s, it);
  }
}
void drain(EmuStream &s) { runStream(s, s.issued); }

/// The legacy null stream's ordering, modelled conservatively: before work
/// is issued on the null stream, every blocking stream of its device runs
/// to its end, and before work on a blocking stream, the null stream.
void runLegacyPeers(EmuStream &s) {
  if (s.flags & cudaStreamNonBlocking)
    return;
  Scheduler &k = sched();
  if (!s.null) {
    auto n = k.nulls.find(s.device);
    if (n != k.nulls.end())
      drain(*n->second);
    return;
  }
  for (auto &[id, t] : k.live)
    if (!t->null && t->device == s.device &&
        !(t->flags & cudaStreamNonBlocking))
      drain(*t);
}

/// Whether `p`'s work has yet to run.
bool pending(StreamPoint p) {
  if (!anyDeferred.load())
    return false;
  Scheduler &k = sched();
  Lock lock(k.mutex);
  auto it = k.live.find(p.stream);
  return it != k.live.end() && it->second->done < p.position;
}

cudaError_t makeStream(cudaStream_t *out, unsigned flags, int priority) {
  if (!out || (flags & ~unsigned(cudaStreamNonBlocking)))
    return cudaErrorInvalidValue;
  auto *s = new EmuStream;
  s->device = emuCurrentDevice();
  s->flags = flags;
  // Clamped into the device's range, as cudart does.
  s->priority = std::clamp(priority, kGreatestPriority, kLeastPriority);
  s->deferred = deferredAt(s->priority);
  if (s->deferred)
    anyDeferred = true;
  *out = reinterpret_cast<cudaStream_t>(registerStream(s));
  return cudaSuccess;
}

EmuEvent *event(cudaEvent_t e) { return reinterpret_cast<EmuEvent *>(e); }

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
bool captureWork(EmuStream &s, std::function<void()> &work, WorkKind kind) {
  Capture *c = s.capture;
  if (!c) {
    if (s.null)
      implicitUse(s);
    return false;
  }
  c->body->work.push_back({std::move(work), kind});
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

} // namespace

namespace smp::cudaemu {

Issued enqueueWork(cudaStream_t h, std::function<void()> work, WorkKind kind) {
  if (activeCaptures.load()) {
    Lock lock(sched().mutex);
    if (captureWork(resolve(h), work, kind))
      return {{}, false};
  }
  bool defer =
      isNull(h) ? deferredAt(0) : reinterpret_cast<EmuStream *>(h)->deferred;
  bool lazy = kind == WorkKind::Lazy;
  if (defer || lazy)
    anyDeferred = true;
  if (!anyDeferred.load()) {
    work();
    return {{}, true};
  }
  Scheduler &k = sched();
  Lock lock(k.mutex);
  EmuStream &s = resolve(h);
  if (s.null)
    s.deferred = defer;
  runLegacyPeers(s);
  Item it{++s.issued, ++k.serial, kind == WorkKind::Ordered || lazy,
          std::move(work)};
  StreamPoint at{s.id, it.position};
  // A stream holding a lazy item queues what comes after it (stream order),
  // as a deferred stream does, until something needs it.
  bool queues = s.deferred || lazy || !s.queue.empty();
  if (queues && kind != WorkKind::Immediate) {
    if (it.ordered)
      k.ordered[it.serial] = at;
    s.queue.push_back(std::move(it));
    return {at, false};
  }
  runStream(s, it.position - 1); // the work before it first
  execute(s, it);
  return {at, true};
}

StreamPoint streamTail(cudaStream_t h) {
  if (!anyDeferred.load())
    return {};
  Scheduler &k = sched();
  Lock lock(k.mutex);
  EmuStream &s = resolve(h);
  return {s.id, s.issued};
}

void enqueueWait(cudaStream_t h, StreamPoint point) {
  if (point.stream != 0)
    enqueueWork(h, [point] { runUpTo(point); });
}

void runUpTo(StreamPoint p) {
  if (!anyDeferred.load() || p.stream == 0)
    return;
  Scheduler &k = sched();
  Lock lock(k.mutex);
  auto it = k.live.find(p.stream);
  if (it != k.live.end())
    runStream(*it->second, p.position);
}

void runOrdered() {
  if (!anyDeferred.load())
    return;
  Lock lock(sched().mutex);
  runOrderedBefore(~uint64_t(0));
}

void runLegacy() {
  if (!anyDeferred.load())
    return;
  Scheduler &k = sched();
  Lock lock(k.mutex);
  int device = emuCurrentDevice();
  for (auto &[id, t] : k.live)
    if (t->device == device && !(t->flags & cudaStreamNonBlocking))
      drain(*t);
}

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

void runAll() {
  if (!anyDeferred.load())
    return;
  Scheduler &k = sched();
  Lock lock(k.mutex);
  for (bool again = true; again;) {
    again = false;
    for (auto &[id, t] : k.live) {
      drain(*t);
      again |= !t->running && !t->queue.empty();
    }
  }
}

} // namespace smp::cudaemu

extern "C" {

cudaError_t cudaDeviceSynchronize(void) {
  if (cudaError_t e = refuseDuringCapture("cudaDeviceSynchronize"))
    return e;
  countHostWait();
  runAll();
  return stickyError();
}

cudaError_t cudaDeviceGetStreamPriorityRange(int *leastPriority,
                                             int *greatestPriority) {
  if (leastPriority)
    *leastPriority = kLeastPriority;
  if (greatestPriority)
    *greatestPriority = kGreatestPriority;
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *pStream) {
  return makeStream(pStream, cudaStreamDefault, kLeastPriority);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream,
                                      unsigned int flags) {
  return makeStream(pStream, flags, kLeastPriority);
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t *pStream,
                                         unsigned int flags, int priority) {
  return makeStream(pStream, flags, priority);
}

cudaError_t cudaStreamGetPriority(cudaStream_t stream, int *priority) {
  if (!priority)
    return cudaErrorInvalidValue;
  *priority = isNull(stream) ? kLeastPriority
                             : reinterpret_cast<EmuStream *>(stream)->priority;
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (isNull(stream))
    return cudaErrorInvalidResourceHandle;
  auto *s = reinterpret_cast<EmuStream *>(stream);
  Scheduler &k = sched();
  {
    Lock lock(k.mutex);
    if (Capture *c = s->capture) { // its capture cannot end as begun
      invalidate(*c, "a captured stream was destroyed");
      if (c->origin == s) {
        leave(c);
      } else {
        auto &m = c->members;
        m.erase(std::find(m.begin(), m.end(), s));
      }
    }
    drain(*s); // its work runs first (cudart lets it finish)
    k.live.erase(s->id);
  }
  delete s;
  return cudaSuccess;
}

/// The null stream's work runs after the blocking streams' (their work
/// issued before it): those run too.
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (cudaError_t e = refuseCapturedStream(stream, "cudaStreamSynchronize"))
    return e;
  countHostWait();
  if (isNull(stream))
    runLegacy();
  runUpTo(streamTail(stream));
  return stickyError();
}

/// Runs the stream's work and answers that it is done: a caller polls a
/// query, and must see progress.
cudaError_t cudaStreamQuery(cudaStream_t stream) {
  if (cudaError_t e = refuseCapturedStream(stream, "cudaStreamQuery"))
    return e;
  if (isNull(stream))
    runLegacy();
  runUpTo(streamTail(stream));
  return stickyError();
}

/// The wait is for the event's last record as it stands now: a later
/// record does not change it (cudart's semantics).
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t e,
                                unsigned int) {
  if (!e)
    return cudaErrorInvalidResourceHandle;
  if (event(e)->capture || activeCaptures.load())
    return waitInCapture(stream, *event(e));
  enqueueWait(stream, event(e)->at);
  return cudaSuccess;
}

cudaError_t cudaStreamGetDevice(cudaStream_t stream, int *device) {
  *device = isNull(stream) ? emuCurrentDevice()
                           : reinterpret_cast<EmuStream *>(stream)->device;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *e) {
  return cudaEventCreateWithFlags(e, 0);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags) {
  *e = reinterpret_cast<cudaEvent_t>(new EmuEvent{flags});
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete event(e);
  return cudaSuccess;
}

/// The event stands for the stream's work issued so far; its time is the
/// host's when the record runs (on a deferred stream, when its work does).
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t stream) {
  if (!e)
    return cudaErrorInvalidResourceHandle;
  event(e)->recorded = true;
  if (recordInCapture(stream, *event(e)))
    return cudaSuccess;
  std::shared_ptr<Clock> clock = event(e)->clock;
  event(e)->at = enqueueWork(stream, [clock] {
                   clock->recorded = true;
                   clock->at = std::chrono::steady_clock::now();
                 }).at;
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e) {
  if (!e)
    return cudaErrorInvalidResourceHandle;
  if (event(e)->capture)
    return capturedEvent("cudaEventQuery");
  runUpTo(event(e)->at);
  return stickyError();
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  if (!e)
    return cudaErrorInvalidResourceHandle;
  if (event(e)->capture)
    return capturedEvent("cudaEventSynchronize");
  countHostWait();
  runUpTo(event(e)->at);
  return stickyError();
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start,
                                 cudaEvent_t end) {
  EmuEvent *s = event(start), *e = event(end);
  if ((s->flags | e->flags) & cudaEventDisableTiming) {
    report("cudaEventElapsedTime on an event made with "
           "cudaEventDisableTiming");
    setError(cudaErrorInvalidResourceHandle);
    return cudaErrorInvalidResourceHandle;
  }
  if (pending(s->at) || pending(e->at))
    return cudaErrorNotReady; // a deferred stream has not reached it
  if (!s->clock->recorded || !e->clock->recorded) {
    report("cudaEventElapsedTime on an event never recorded");
    setError(cudaErrorInvalidResourceHandle);
    return cudaErrorInvalidResourceHandle;
  }
  *ms = std::chrono::duration<float, std::milli>(e->clock->at - s->clock->at)
            .count();
  return cudaSuccess;
}

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
