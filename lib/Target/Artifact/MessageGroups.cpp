//===- MessageGroups.cpp - The pipeline's messages in NCCL's groups -------===//
//
// On the CUDA target a rank's messages (smp.send, eager: the runtime copies
// the bytes and posts them) are queued by the NCCL communicator with its
// next operation, one NCCL group: posted before a receive from the same
// peer, a send alone would wait for the peer's receive on the GPU, and the
// peer's receive behind the peer's own send. But NCCL holds a send larger
// than its buffers until the peer posts its receive, and a group until all
// of it is done: when a rank's group holds a send whose receive the peer
// posts only after a group that waits for this rank's next group (the
// interleaved schedule's order of messages does this), both ranks wait for
// ever. Here every rank's training run is played through as NCCL would run
// it (each rank's communication in issue order, one group at a time; a
// message done once its send's and its receive's groups both run; a
// collective once all of its group run it), and where every rank would
// wait, a send whose receive is not posted is held back for a later
// receive's group (the instruction's `join_tag`: that receive's tag, or -1
// for the end of the step; the communicator's postSendJoining), with the
// messages after it to the same peer, until every rank finishes. An
// evaluation's run (the forward's instructions) is played through too, its
// holds in `eval_join_tag`. No order found is an error that names what each
// rank waits for.
//
// The rules are NcclCommunicator's: a receive's group takes the messages
// posted for the next operation and those held for its tag; a collective
// of the messages' communicator (no "ranks") takes those for the next
// operation; one over a group of ranks is its own communicator's and takes
// none; the step's end (completeSends) takes every one left. A message
// after a held one to the same peer waits with it (NCCL matches two ranks'
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

/// A message: (from, to, number).
using Message = std::tuple<int, int, uint64_t>;
/// A collective: (group, number).
using Instance = std::pair<std::vector<int64_t>, uint64_t>;

struct RankState {
  std::vector<Event> events;
  size_t next = 0;
  std::deque<int> posted; // Send events not yet in a group, in order
  std::set<int> held;     // of them, those held back
  bool active = false, done = false;
  std::vector<int> sends; // the active group's Send events
  int anchor = -1;        // its Recv or Collective event; -1: the step's end
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

  llvm::Error run();

private:
  void collect(int r);
  bool start(int r);
  bool complete(int r) const;
  void finish(int r);
  bool holdOne();
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
  while (s.next < s.events.size() && s.events[s.next].kind == Event::Send)
    s.posted.push_back(static_cast<int>(s.next++));
  s.sends.clear();
  bool end = s.next == s.events.size();
  if (end && s.posted.empty()) {
    s.done = true;
    return false;
  }
  const Event *anchor = end ? nullptr : &s.events[s.next];
  s.anchor = end ? -1 : static_cast<int>(s.next++);
  bool own = anchor && anchor->kind == Event::Collective &&
             !anchor->ranks.empty(); // its own communicator: takes none
  if (!own) {
    std::set<int> waiting; // peers of a message left behind
    std::deque<int> left;
    for (int p : s.posted) {
      int peer = s.events[p].peer;
      bool takes = !waiting.count(peer) &&
                   (end || anchor->kind == Event::Recv || !s.held.count(p));
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
  if (s.anchor >= 0) {
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

/// Holds back the first message of a waiting group (not the step's end's)
/// whose receive is not posted, with the messages after it to the same
/// peer; false when there is none.
bool Play::holdOne() {
  for (size_t r = 0; r < ranks.size(); ++r) {
    RankState &s = ranks[r];
    if (!s.active || s.anchor < 0)
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
      for (int p : back) {
        sending.erase({static_cast<int>(r), s.events[p].peer, s.events[p].n});
        s.held.insert(p);
      }
      s.sends = std::move(keep);
      // Back among the messages left, in posting order.
      s.posted.insert(s.posted.end(), back.begin(), back.end());
      std::sort(s.posted.begin(), s.posted.end());
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
  out += s.anchor < 0 ? "the step's end" : describe(s.events[s.anchor]);
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
    if (moved || holdOne())
      continue;
    std::string why;
    for (size_t r = 0; r < ranks.size(); ++r)
      if (ranks[r].active)
        why += (why.empty() ? "" : "; ") + describe(static_cast<int>(r));
    return fail("the pipeline's messages would hang on NCCL (a send larger "
                "than its buffers waits for its receive): " +
                why + "; train on the CPU target or with --schedule 1f1b");
  }
  for (const auto &[at, join] : joins) {
    const Event &e = ranks[at.first].events[at.second];
    auto *attrs =
        programs[at.first].mutable_instructions(e.inst)->mutable_attrs();
    (*attrs)[evaluation ? "eval_join_tag" : "join_tag"].set_i(join);
  }
  return llvm::Error::success();
}

} // namespace

std::string heldMessagesText(const std::vector<pb::RankProgram> &programs,
                             const DeviceGrid &grid) {
  std::string line;
  int64_t held = 0;
  for (int64_t p = 0; p < grid.size[kPipelineAxis]; ++p) {
    std::array<int64_t, 3> coord{};
    coord[kPipelineAxis] = p;
    int64_t sends = 0, rankHeld = 0;
    for (const pb::Instruction &inst :
         programs[grid.rankOf(coord)].instructions()) {
      sends += inst.op() == "send" && !inst.eval_only();
      rankHeld += inst.attrs().count("join_tag");
    }
    held += rankHeld;
    line += (p ? ", " : "") + std::to_string(rankHeld) + " of pipeline rank " +
            std::to_string(p) + "'s " + std::to_string(sends);
  }
  if (held == 0)
    return "";
  return "NCCL's groups: sends held for a later receive's group (the order "
         "would hang otherwise; MessageGroups.cpp): " +
         line + "\n";
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
