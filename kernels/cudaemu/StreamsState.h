//===- StreamsState.h - The emulator's scheduler state (internal) -*- C++
//-*-===//
//
// Private to Streams.cpp (the scheduler, streams and events) and
// StreamCapture.cpp (stream capture): the streams' queues, the events,
// the captures in progress and the one scheduler every piece of work goes
// through, under its recursive mutex.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_CUDAEMU_STREAMSSTATE_H
#define SMP_CUDAEMU_STREAMSSTATE_H

#include "Streams.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace smp::cudaemu::streams {

/// A piece of work on a stream.
struct Item {
  uint64_t position = 0; // on its stream: 1 the first issued
  uint64_t serial = 0;   // in the process's issue order
  bool ordered = false;  // WorkKind::Ordered or Lazy
  bool lazy = false;     // WorkKind::Lazy
  std::function<void()> work;
  WorkOrder order;
};

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
  bool running = false;       // an item of it is running (no re-entry)
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
  std::map<uint64_t, EmuStream *> live; // every stream by serial
  std::map<int, EmuStream *> nulls;     // each device's null stream
  /// Queued Ordered and Lazy items by key (WorkOrder::key), then serial.
  std::map<uintptr_t, std::map<uint64_t, StreamPoint>> ordered;
  std::map<uint64_t, Capture *> captures; // in progress, by serial
  uint64_t serial = 0;
  uint64_t streams = 0;
  uint64_t captureSerial = 0;
};
inline Scheduler &sched() {
  static Scheduler *s = new Scheduler; // never destroyed: used at exit
  return *s;
}
/// Set once a stream defers: from then on, every issue goes through the
/// scheduler's lock.
inline std::atomic<bool> anyDeferred{false};
/// How many stream captures are in progress: while none is, issuing work
/// never looks for one.
inline std::atomic<int> activeCaptures{0};

using Lock = std::lock_guard<std::recursive_mutex>;
inline bool isNull(cudaStream_t s) {
  return s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread;
}

inline EmuEvent *event(cudaEvent_t e) {
  return reinterpret_cast<EmuEvent *>(e);
}

/// The stream a handle names (under the lock).
EmuStream &resolve(cudaStream_t h);

//===--- StreamCapture.cpp ------------------------------------------------===//

/// Marks capture `c` invalid (its end will fail) and says why, once.
void invalidate(Capture &c, const std::string &why);
/// Ends capture `c`: its streams are captured no more (under the lock).
void leave(Capture *c);
/// Appends `work` to the capture of `s` when it has one (under the lock).
bool captureWork(EmuStream &s, std::function<void()> &work, WorkKind kind,
                 WorkOrder &order);
/// cudaStreamSynchronize or cudaStreamQuery (`call`) of a captured stream,
/// or of the legacy null stream during a capture: refused, the capture
/// invalidated.
cudaError_t refuseCapturedStream(cudaStream_t h, const char *call);
/// A query or synchronization (`call`) of an event last recorded in a
/// capture: it stands for no work that runs.
cudaError_t capturedEvent(const char *call);
/// An event recorded on a captured stream stands for what that stream is
/// ordered after in the capture.
bool recordInCapture(cudaStream_t h, EmuEvent &e);
/// cudaStreamWaitEvent while a capture is in progress or of an event
/// recorded in one: a stream that waits for an event of a capture joins
/// it; a captured stream may not wait for work outside its capture.
cudaError_t waitInCapture(cudaStream_t h, EmuEvent &e);

} // namespace smp::cudaemu::streams

#endif // SMP_CUDAEMU_STREAMSSTATE_H
