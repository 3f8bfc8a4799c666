//===- MessageGroups.cpp - The pipeline's messages in NCCL's groups -------===//
//
// On the CUDA target a rank's messages (smp.send, eager: the runtime copies
// the bytes and posts them) go to the NCCL communicator, which runs its
// operations one group after another on the GPU. NCCL holds a send larger
// than its buffers until the peer posts its receive, and a group until all
// of it is done. Queued at once, alone, a send lets the peer start as soon
// as the bytes exist; queued with the rank's next operation (a receive, a
// collective) it waits for that operation. The first is what a pipeline
// needs (the first stage has no receive between its forwards: every
// forward's output would wait for the first backward's receive, and GPipe's
// stage 1 would start only when stage 0 had run all its forwards), but a
// send alone before a receive its peer posts only after sending to this
// rank waits for ever: the peer's send waits for this rank's receive,
// queued behind this rank's send. And a group that holds a send whose
// receive the peer posts only after a group waiting for this rank's next
// group waits for ever too (the interleaved schedule's order does this).
//
// Here every rank's training run is played through as NCCL would run it
// (each rank's communication in issue order, one group at a time; a
// message done once its send's and its receive's groups both run; a
// collective once all of its group run it), every send at once at first
// (the instruction's `join_tag` -3: Communicator::kAtOnce). Where every rank
// would wait and a send at once is among the waiting, that send waits for
// the next operation instead (no join_tag; no rank has seen it, so the play
// goes on as if it had from the start); where only groups of next
// operations wait, a send whose receive is not
// posted is held back for a later receive's group (`join_tag`: that
// receive's tag, or -1 for the end of the step), with the messages after it
// to the same peer, until every rank finishes. An evaluation's run (the
// forward's instructions) is played through too, its choices in
// `eval_join_tag`. No order found is an error that names what each rank
// waits for.
//
// The rules are NcclCommunicator's (postSendJoining): a send at once is a
// group of the messages at once not left behind another to the same peer;
// a receive's group takes the messages posted for the next operation or at
// once and those held for its tag; a collective of the messages'
// communicator (no "ranks") takes those for the next operation or at once;
// one over a group of ranks is its own communicator's and takes none; the
// step's end (completeSends) takes every one left. A message after one
// left behind to the same peer waits with it (NCCL matches two ranks'
// messages in order).
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include <algorithm>
#include <array>
#include <deque>
#include <map>
#include <set>
#include <tuple>

namespace smp::writer {
namespace {

/// One communication instruction of a rank's training run.
struct Event {
  enum Kind { Send, Recv, Collective } kind;
  int inst = -1; // its instruction
  int peer = -1; // Send, Recv: the other rank
  int64_t tag = 0;
  uint64_t n = 0; // Send, Recv: its number among the pair's (one way)
  std::vector<int64_t> ranks; // Collective: its group (empty: every rank)
  uint64_t instance = 0;      // Collective: its number among the group's
};

/// join_tag of a send that goes at once, in a group of its own
/// (Communicator::kAtOnce in the runtime, which links no compiler code).
constexpr int64_t kAtOnce = -3;

/// A message: (from, to, number).
using Message = std::tuple<int, int, uint64_t>;
/// A collective: (group, number).
using Instance = std::pair<std::vector<int64_t>, uint64_t>;

struct RankState {
  std::vector<Event> events;
  size_t next = 0;
  std::deque<int> posted; // Send events not yet in a group, in order
  std::set<int> held;     // of them, those held back
  std::set<int> late;     // Send events not sent at once (kNextOperation)
  bool active = false, done = false;
  std::vector<int> sends; // the active group's Send events
  /// Its Recv or Collective event, or its Send event sent at once (a group
  /// of the messages sent at once); -1: the step's end.
  int anchor = -1;
};

class Play {
public:
  /// `evaluation`: an evaluation's run (the instructions marked forward),
  /// else a training run's (all but the evaluation's own).
  Play(std::vector<pb::RankProgram> &programs, bool evaluation)
      : programs(programs), evaluation(evaluation) {
    ranks.resize(programs.size());
    for (size_t r = 0; r < programs.size(); ++r)
      collect(static_cast<int>(r));
  }

  bool any() const {
    for (const RankState &s : ranks)
      if (!s.events.empty())
        return true;
    return false;
  }

  /// Plays the run through and sets the sends' attributes.
  llvm::Error run();

private:
  void collect(int r);
  bool start(int r);
  bool complete(int r) const;
  void finish(int r);
  bool lateOne();
  bool holdOne();
  /// Takes `back` out of rank r's active group (leaving `keep`), marks them
  /// in `mark` and returns them among its posted messages.
  void takeBack(int r, std::vector<int> keep, const std::vector<int> &back,
                std::set<int> &mark);
  std::string describe(int r) const;
  std::string describe(const Event &e) const;

  std::vector<pb::RankProgram> &programs;
  bool evaluation;
  std::vector<RankState> ranks;
  std::set<Message> sending, receiving, delivered;
  std::map<Instance, std::set<int>> running;
  std::set<Instance> finished;
  /// The held messages' receives: Send event (rank, event) -> tag or -1.
  std::map<std::pair<int, int>, int64_t> joins;
};

void Play::collect(int r) {
  RankState &s = ranks[r];
  std::map<int, uint64_t> sent, received;
  std::map<std::vector<int64_t>, uint64_t> collectives;
  const auto &insts = programs[r].instructions();
  for (int i = 0; i < insts.size(); ++i) {
    const pb::Instruction &inst = insts[i];
    if (evaluation ? !inst.forward() : inst.eval_only())
      continue;
    const auto &attrs = inst.attrs();
    Event e;
    e.inst = i;
    if (inst.op() == "send" || inst.op() == "recv") {
      e.kind = inst.op() == "send" ? Event::Send : Event::Recv;
      e.peer = static_cast<int>(attrs.at("peer").i());
      e.tag = attrs.at("tag").i();
      e.n = (e.kind == Event::Send ? sent : received)[e.peer]++;
    } else if (inst.op() == "all_reduce" || inst.op() == "all_gather" ||
               inst.op() == "reduce_scatter") {
      e.kind = Event::Collective;
      if (auto it = attrs.find("ranks"); it != attrs.end())
        e.ranks.assign(it->second.ints().values().begin(),
                       it->second.ints().values().end());
      e.instance = collectives[e.ranks]++;
    } else {
      continue;
    }
    s.events.push_back(std::move(e));
  }
}

/// Queues rank r's next group (its posted messages that it takes, with the
/// receive or collective they precede, or alone at the step's end); false
/// when the rank has nothing left.
bool Play::start(int r) {
  RankState &s = ranks[r];
  bool atOnce = false; // a send at once starts a group of those at once
  while (s.next < s.events.size() && s.events[s.next].kind == Event::Send) {
    int p = static_cast<int>(s.next++);
    s.posted.push_back(p);
    if ((atOnce = !s.late.count(p)))
      break;
  }
  s.sends.clear();
  bool end = !atOnce && s.next == s.events.size();
  if (end && s.posted.empty()) {
    s.done = true;
    return false;
  }
  const Event *anchor = end ? nullptr : &s.events[atOnce ? s.next - 1 : s.next];
  s.anchor = end ? -1 : static_cast<int>(atOnce ? s.next - 1 : s.next++);
  bool own = anchor && anchor->kind == Event::Collective &&
             !anchor->ranks.empty(); // its own communicator: takes none
  if (!own) {
    std::set<int> waiting; // peers of a message left behind
    std::deque<int> left;
    for (int p : s.posted) {
      int peer = s.events[p].peer;
      bool takes =
          !waiting.count(peer) &&
          (atOnce ? !s.late.count(p) && !s.held.count(p)
                  : end || anchor->kind == Event::Recv || !s.held.count(p));
      if (takes) {
        s.sends.push_back(p);
      } else {
        waiting.insert(peer);
        left.push_back(p);
      }
    }
    s.posted = std::move(left);
  }
  s.active = true;
  for (int p : s.sends) {
    const Event &e = s.events[p];
    sending.insert({r, e.peer, e.n});
  }
  if (anchor && anchor->kind == Event::Recv)
    receiving.insert({anchor->peer, r, anchor->n});
  if (anchor && anchor->kind == Event::Collective)
    running[{anchor->ranks, anchor->instance}].insert(r);
  return true;
}

bool Play::complete(int r) const {
  const RankState &s = ranks[r];
  for (int p : s.sends) {
    Message m{r, s.events[p].peer, s.events[p].n};
    if (!receiving.count(m) && !delivered.count(m))
      return false;
  }
  if (s.anchor < 0)
    return true;
  const Event &a = s.events[s.anchor];
  if (a.kind == Event::Send)
    return true;
  if (a.kind == Event::Recv) {
    Message m{a.peer, r, a.n};
    return sending.count(m) || delivered.count(m);
  }
  Instance key{a.ranks, a.instance};
  if (finished.count(key))
    return true;
  auto it = running.find(key);
  size_t members = a.ranks.empty() ? ranks.size() : a.ranks.size();
  return it != running.end() && it->second.size() == members;
}

void Play::finish(int r) {
  RankState &s = ranks[r];
  int64_t join = -1; // the step's end
  if (s.anchor >= 0 && s.events[s.anchor].kind == Event::Recv)
    join = s.events[s.anchor].tag;
  for (int p : s.sends) {
    Message m{r, s.events[p].peer, s.events[p].n};
    sending.erase(m);
    receiving.erase(m);
    delivered.insert(m);
    if (s.held.erase(p))
      joins[{r, p}] = join;
  }
  if (s.anchor >= 0 && s.events[s.anchor].kind != Event::Send) {
    const Event &a = s.events[s.anchor];
    if (a.kind == Event::Recv) {
      Message m{a.peer, r, a.n};
      sending.erase(m);
      receiving.erase(m);
      delivered.insert(m);
    } else {
      Instance key{a.ranks, a.instance};
      finished.insert(key);
      running.erase(key);
    }
  }
  s.active = false;
}

/// Makes the messages of the first waiting group of sends at once whose
/// receives are not posted wait for the next operation instead (back among
/// the messages left, late); false when there is none. No rank has seen
/// them (a message is seen once its receive is posted), so the play goes
/// on as if they had been late from the start.
bool Play::lateOne() {
  for (size_t r = 0; r < ranks.size(); ++r) {
    RankState &s = ranks[r];
    if (!s.active || s.anchor < 0 || s.events[s.anchor].kind != Event::Send)
      continue;
    std::vector<int> keep, back;
    for (int p : s.sends) {
      Message m{static_cast<int>(r), s.events[p].peer, s.events[p].n};
      bool seen = receiving.count(m) || delivered.count(m);
      (seen ? keep : back).push_back(p);
    }
    if (back.empty())
      continue;
    takeBack(static_cast<int>(r), std::move(keep), back, s.late);
    return true;
  }
  return false;
}

void Play::takeBack(int r, std::vector<int> keep, const std::vector<int> &back,
                    std::set<int> &mark) {
  RankState &s = ranks[r];
  for (int p : back) {
    sending.erase({r, s.events[p].peer, s.events[p].n});
    mark.insert(p);
  }
  s.sends = std::move(keep);
  // Back among the messages left, in posting order.
  s.posted.insert(s.posted.end(), back.begin(), back.end());
  std::sort(s.posted.begin(), s.posted.end());
}

/// Holds back the first message of a waiting group (not the step's end's,
/// nor one sent at once) whose receive is not posted, with the messages
/// after it to the same peer; false when there is none.
bool Play::holdOne() {
  for (size_t r = 0; r < ranks.size(); ++r) {
    RankState &s = ranks[r];
    if (!s.active || s.anchor < 0 || s.events[s.anchor].kind == Event::Send)
      continue;
    for (size_t k = 0; k < s.sends.size(); ++k) {
      const Event &e = s.events[s.sends[k]];
      Message m{static_cast<int>(r), e.peer, e.n};
      if (receiving.count(m) || delivered.count(m))
        continue;
      std::vector<int> back, keep;
      for (size_t j = 0; j < s.sends.size(); ++j) {
        bool hold = j >= k && s.events[s.sends[j]].peer == e.peer;
        (hold ? back : keep).push_back(s.sends[j]);
      }
      takeBack(static_cast<int>(r), std::move(keep), back, s.held);
      return true;
    }
  }
  return false;
}

std::string Play::describe(const Event &e) const {
  switch (e.kind) {
  case Event::Send:
    return "send (tag " + std::to_string(e.tag) + ") to rank " +
           std::to_string(e.peer);
  case Event::Recv:
    return "receive (tag " + std::to_string(e.tag) + ") from rank " +
           std::to_string(e.peer);
  case Event::Collective:
    return "collective #" + std::to_string(e.instance) + " of its group";
  }
  return "";
}

std::string Play::describe(int r) const {
  const RankState &s = ranks[r];
  std::string out = "rank " + std::to_string(r) + " waits in the group of ";
  bool atOnce = s.anchor >= 0 && s.events[s.anchor].kind == Event::Send;
  out += s.anchor < 0 ? "the step's end"
         : atOnce     ? "the sends at once"
                      : describe(s.events[s.anchor]);
  for (int p : s.sends)
    out += ", " + describe(s.events[p]);
  return out;
}

llvm::Error Play::run() {
  for (;;) {
    bool moved = false, left = false;
    for (size_t r = 0; r < ranks.size(); ++r) {
      int ri = static_cast<int>(r);
      while (!ranks[r].done) {
        if (!ranks[r].active && !start(ri))
          break;
        if (!complete(ri))
          break;
        finish(ri);
        moved = true;
      }
      left |= !ranks[r].done;
    }
    if (!left)
      break;
    if (moved || lateOne() || holdOne())
      continue;
    std::string why;
    for (size_t r = 0; r < ranks.size(); ++r)
      if (ranks[r].active)
        why += (why.empty() ? "" : "; ") + describe(static_cast<int>(r));
    return fail("the pipeline's messages would hang on NCCL (a send larger "
                "than its buffers waits for its receive): " +
                why + "; train on the CPU target or with --schedule 1f1b");
  }
  // Each send: held (its receive's tag, or -1), else at once, else none
  // (with the next operation).
  const char *name = evaluation ? "eval_join_tag" : "join_tag";
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankState &s = ranks[r];
    for (size_t p = 0; p < s.events.size(); ++p) {
      auto it = joins.find({static_cast<int>(r), static_cast<int>(p)});
      bool held = it != joins.end();
      if (s.events[p].kind != Event::Send || (!held && s.late.count(p)))
        continue;
      (*programs[r]
            .mutable_instructions(s.events[p].inst)
            ->mutable_attrs())[name]
          .set_i(held ? it->second : kAtOnce);
    }
  }
  return llvm::Error::success();
}

} // namespace

std::string messageGroupsText(const std::vector<pb::RankProgram> &programs,
                              const DeviceGrid &grid) {
  std::string line;
  int64_t all = 0;
  for (int64_t p = 0; p < grid.size[kPipelineAxis]; ++p) {
    std::array<int64_t, 3> coord{};
    coord[kPipelineAxis] = p;
    int64_t sends = 0, atOnce = 0, held = 0;
    for (const pb::Instruction &inst :
         programs[grid.rankOf(coord)].instructions()) {
      if (inst.op() != "send" || inst.eval_only())
        continue;
      ++sends;
      auto it = inst.attrs().find("join_tag");
      int64_t join = it == inst.attrs().end() ? -2 : it->second.i();
      atOnce += join == kAtOnce;
      held += join >= -1;
    }
    all += sends;
    line += std::string(p ? "; " : "") + "pipeline rank " + std::to_string(p) +
            " sends " + std::to_string(atOnce) + " of its " +
            std::to_string(sends) + " messages at once, " +
            std::to_string(sends - atOnce - held) +
            " with its next operation, " + std::to_string(held) +
            " held for a later receive's group";
  }
  if (all == 0)
    return "";
  return "NCCL's groups (MessageGroups.cpp): " + line + "\n";
}

llvm::Error groupMessagesForNccl(std::vector<pb::RankProgram> &programs) {
  for (bool evaluation : {false, true}) {
    Play play(programs, evaluation);
    if (!play.any())
      continue;
    if (auto err = play.run())
      return err;
  }
  return llvm::Error::success();
}

} // namespace smp::writer
