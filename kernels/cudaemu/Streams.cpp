//===- Streams.cpp - Streams, events and deferred work of the emulator ----===//
//
// The cudart stream and event calls (stream capture's: StreamCapture.cpp,
// sharing the state of StreamsState.h), and the scheduler every piece of work
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
#include "StreamsState.h"

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
using namespace smp::cudaemu::streams;

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

EmuStream *registerStream(EmuStream *s) {
  Scheduler &k = sched();
  Lock lock(k.mutex);
  s->id = ++k.streams;
  k.live[s->id] = s;
  return s;
}

void runStream(EmuStream &s, uint64_t upTo);

/// Takes queued Ordered item `serial` of `key` out of the scheduler's map.
void forgetOrdered(uintptr_t key, uint64_t serial) {
  auto &all = sched().ordered;
  auto m = all.find(key);
  if (m == all.end())
    return;
  m->second.erase(serial);
  if (m->second.empty())
    all.erase(m);
}

/// Runs every queued Ordered item of `key` issued before `serial` (a key's
/// map is never left empty).
void runOrderedBefore(uintptr_t key, uint64_t serial) {
  auto &all = sched().ordered;
  for (auto m = all.find(key);
       m != all.end() && m->second.begin()->first < serial; m = all.find(key)) {
    auto [first, point] = *m->second.begin();
    runUpTo(point);
    forgetOrdered(key, first); // ran (never loop on one that cannot)
  }
}

void execute(EmuStream &s, Item &it) {
  bool was = s.running;
  s.running = true;
  if (it.ordered) {
    runOrderedBefore(it.order.key, it.serial);
    forgetOrdered(it.order.key, it.serial);
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

/// Whether queued item `it` would run now without waiting for another
/// process or for work that has not run (progressQueued's test, under the
/// lock): not an Ordered item behind an earlier one of its key, nor one
/// that may wait; a Lazy item only once it is ready; a wait only for work
/// that has run.
bool runsNow(const Item &it) {
  Scheduler &k = sched();
  if (it.ordered) {
    auto m = k.ordered.find(it.order.key);
    if (m != k.ordered.end() && !m->second.empty() &&
        m->second.begin()->first < it.serial)
      return false;
    if (it.lazy)
      return it.order.ready && it.order.ready();
    return !it.order.mayWait;
  }
  StreamPoint p = it.order.waitsFor;
  if (p.stream == 0)
    return true;
  auto w = k.live.find(p.stream);
  return w == k.live.end() || w->second->done >= p.position;
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

} // namespace

EmuStream &smp::cudaemu::streams::resolve(cudaStream_t h) {
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

namespace smp::cudaemu {

Issued enqueueWork(cudaStream_t h, std::function<void()> work, WorkKind kind,
                   WorkOrder order) {
  if (activeCaptures.load()) {
    Lock lock(sched().mutex);
    if (captureWork(resolve(h), work, kind, order))
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
  Item it{++s.issued, ++k.serial,      kind == WorkKind::Ordered || lazy,
          lazy,       std::move(work), std::move(order)};
  StreamPoint at{s.id, it.position};
  // A stream holding a lazy item queues what comes after it (stream order),
  // as a deferred stream does, until something needs it.
  bool queues = s.deferred || lazy || !s.queue.empty();
  if (queues && kind != WorkKind::Immediate) {
    if (it.ordered)
      k.ordered[it.order.key][it.serial] = at;
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
  if (point.stream == 0)
    return;
  WorkOrder order;
  order.waitsFor = point;
  enqueueWork(
      h, [point] { runUpTo(point); }, WorkKind::Normal, std::move(order));
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
  auto &all = sched().ordered;
  while (!all.empty())
    runOrderedBefore(all.begin()->first, ~uint64_t(0));
}

bool progressQueued() {
  if (!anyDeferred.load())
    return false;
  Scheduler &k = sched();
  Lock lock(k.mutex);
  bool ran = false;
  for (bool again = true; again;) {
    again = false;
    for (auto &[id, t] : k.live) {
      EmuStream &s = *t;
      while (!s.running && !s.queue.empty() && runsNow(s.queue.front())) {
        Item it = std::move(s.queue.front());
        s.queue.pop_front();
        execute(s, it);
        again = ran = true;
      }
    }
  }
  return ran;
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

} // extern "C"
