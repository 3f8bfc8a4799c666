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
  StreamPoint at; // its last record, as issued
};

struct Scheduler {
  std::recursive_mutex mutex;
  std::map<uint64_t, EmuStream *> live;    // every stream by serial
  std::map<int, EmuStream *> nulls;        // each device's null stream
  std::map<uint64_t, StreamPoint> ordered; // queued Ordered items by serial
  uint64_t serial = 0;
  uint64_t streams = 0;
};
Scheduler &sched() {
  static Scheduler *s = new Scheduler; // never destroyed: used at exit
  return *s;
}
/// Set once a stream defers: from then on, every issue goes through the
/// scheduler's lock.
std::atomic<bool> anyDeferred{false};

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

} // namespace

namespace smp::cudaemu {

Issued enqueueWork(cudaStream_t h, std::function<void()> work, WorkKind kind) {
  bool defer =
      isNull(h) ? deferredAt(0) : reinterpret_cast<EmuStream *>(h)->deferred;
  if (defer)
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
  Item it{++s.issued, ++k.serial, kind == WorkKind::Ordered, std::move(work)};
  StreamPoint at{s.id, it.position};
  if (s.deferred && kind != WorkKind::Immediate) {
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
    drain(*s); // its work runs first (cudart lets it finish)
    k.live.erase(s->id);
  }
  delete s;
  return cudaSuccess;
}

/// The null stream's work runs after the blocking streams' (their work
/// issued before it): those run too.
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  countHostWait();
  if (isNull(stream))
    runLegacy();
  runUpTo(streamTail(stream));
  return stickyError();
}

/// Runs the stream's work and answers that it is done: a caller polls a
/// query, and must see progress.
cudaError_t cudaStreamQuery(cudaStream_t stream) {
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
  runUpTo(event(e)->at);
  return stickyError();
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  if (!e)
    return cudaErrorInvalidResourceHandle;
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
