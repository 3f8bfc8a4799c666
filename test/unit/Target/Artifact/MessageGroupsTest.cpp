//===- MessageGroupsTest.cpp - The pipeline's messages in NCCL's groups ---===//
//
// lib/Target/Artifact/MessageGroups.cpp on rank programs written here:
// each send goes at once where no rank would wait for ever (GPipe's first
// stage's forwards; 1F1B's warm-up), else with the next operation (1F1B's
// steady state: a send at once before a receive the peer posts after its
// own send would wait for ever), else held for a later receive (the
// interleaved schedule's order of messages: two ranks, as smpc compiles
// the gpt fixture with --pp 2 --schedule interleaved --virtual-stages 2
// --microbatches 4, whose groups wait for each other when every posted
// send joins the next receive); the order they make is played through
// again to the end here (a second, simpler player: a group runs once every
// message of it has its other end in the peer's running group); an order
// nothing mends is refused, naming what each rank waits for.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include <gtest/gtest.h>

#include <map>
#include <sstream>

namespace pb = smp::artifact;

namespace {

/// A rank program of "S<peer>#<tag>" (send) and "R<peer>#<tag>" (receive)
/// instructions, a compute instruction between them.
pb::RankProgram program(const std::string &ops) {
  pb::RankProgram p;
  std::istringstream in(ops);
  std::string op;
  while (in >> op) {
    p.add_instructions()->set_op("matmul");
    pb::Instruction *inst = p.add_instructions();
    inst->set_op(op[0] == 'S' ? "send" : "recv");
    size_t hash = op.find('#');
    (*inst->mutable_attrs())["peer"].set_i(std::stoi(op.substr(1, hash - 1)));
    (*inst->mutable_attrs())["tag"].set_i(std::stoi(op.substr(hash + 1)));
  }
  return p;
}

int64_t attr(const pb::Instruction &inst, const char *name, int64_t def) {
  auto it = inst.attrs().find(name);
  return it == inst.attrs().end() ? def : it->second.i();
}

/// Plays the programs through NCCL's groups as NcclCommunicator makes them
/// (posted sends with the next receive, or the receive of their join_tag,
/// or the end; a send after a held one to the same peer held with it):
/// true when every rank finishes. Messages are matched by tag.
bool finishes(const std::vector<pb::RankProgram> &programs) {
  struct Group {
    std::vector<int64_t> sends; // tags
    int64_t recv = -1;          // tag; -1: the end
  };
  std::vector<std::vector<Group>> groups(programs.size());
  for (size_t r = 0; r < programs.size(); ++r) {
    std::vector<std::pair<int64_t, int64_t>> posted; // (tag, join)
    std::map<int64_t, int64_t> peerOf;
    // recv: a receive's tag, -1 the end, -2 a send at once's group.
    auto take = [&](int64_t recv) {
      Group g;
      g.recv = recv;
      std::vector<std::pair<int64_t, int64_t>> left;
      std::vector<int64_t> heldPeers;
      for (auto [tag, join] : posted) {
        bool blocked =
            std::count(heldPeers.begin(), heldPeers.end(), peerOf[tag]) != 0;
        bool next = join == -3 || (recv != -2 && join == -2);
        if (!blocked && (next || (recv >= 0 && join == recv) || recv == -1)) {
          g.sends.push_back(tag);
        } else {
          heldPeers.push_back(peerOf[tag]);
          left.push_back({tag, join});
        }
      }
      posted = left;
      groups[r].push_back(g);
    };
    for (const pb::Instruction &inst : programs[r].instructions()) {
      if (inst.op() == "send") {
        peerOf[attr(inst, "tag", 0)] = attr(inst, "peer", 0);
        posted.push_back({attr(inst, "tag", 0), attr(inst, "join_tag", -2)});
        if (posted.back().second == -3)
          take(-2);
      } else if (inst.op() == "recv") {
        take(attr(inst, "tag", 0));
      }
    }
    if (!posted.empty())
      take(-1);
  }
  std::vector<size_t> at(programs.size(), 0);
  auto running = [&](size_t r) -> const Group * {
    return at[r] < groups[r].size() ? &groups[r][at[r]] : nullptr;
  };
  std::map<int64_t, bool> done;
  for (bool moved = true; moved;) {
    moved = false;
    for (size_t r = 0; r < programs.size(); ++r) {
      const Group *g = running(r);
      if (!g)
        continue;
      // Each message's other end: in a running group of another rank.
      auto otherEnd = [&](int64_t tag, bool isSend) {
        if (done[tag])
          return true;
        for (size_t q = 0; q < programs.size(); ++q) {
          const Group *h = running(q);
          if (q == r || !h)
            continue;
          if (isSend ? h->recv == tag
                     : std::count(h->sends.begin(), h->sends.end(), tag))
            return true;
        }
        return false;
      };
      bool ok = g->recv < 0 || otherEnd(g->recv, false);
      for (int64_t t : g->sends)
        ok = ok && otherEnd(t, true);
      if (!ok)
        continue;
      for (int64_t t : g->sends)
        done[t] = true;
      if (g->recv >= 0)
        done[g->recv] = true;
      ++at[r];
      moved = true;
    }
  }
  for (size_t r = 0; r < programs.size(); ++r)
    if (running(r))
      return false;
  return true;
}

/// How many sends of `programs` are held (join_tag >= -1: a receive's tag
/// or the step's end) or, with `atOnce`, sent at once (join_tag -3).
int sends(const std::vector<pb::RankProgram> &programs, bool atOnce = false) {
  int n = 0;
  for (const pb::RankProgram &p : programs)
    for (const pb::Instruction &inst : p.instructions()) {
      int64_t join = attr(inst, "join_tag", -2);
      n += atOnce ? join == -3 : join >= -1;
    }
  return n;
}

int holds(const std::vector<pb::RankProgram> &programs) {
  return sends(programs);
}

/// The join_tag of rank `r`'s `k`-th send (-2: none).
int64_t joinOf(const pb::RankProgram &program, int k) {
  for (const pb::Instruction &inst : program.instructions())
    if (inst.op() == "send" && k-- == 0)
      return attr(inst, "join_tag", -2);
  return -100;
}

TEST(MessageGroups, TheInterleavedOrderGetsHoldsThatFinish) {
  std::vector<pb::RankProgram> programs = {
      program("S1#0 S1#3 R1#1 S1#2 R1#4 S1#5 S1#6 R1#12 S1#13 S1#9 R1#15 "
              "S1#16 R1#7 S1#8 R1#14 R1#10 S1#11 R1#17 R1#18 S1#19 R1#23 "
              "S1#24 R1#20 R1#25 S1#26 R1#22 R1#27 R1#28 S1#29 R1#21"),
      program("R0#0 S0#1 R0#3 S0#4 R0#2 S0#12 R0#5 S0#15 R0#6 S0#7 R0#13 "
              "S0#14 R0#9 S0#10 R0#16 S0#17 R0#8 S0#18 R0#11 S0#23 R0#19 "
              "S0#20 R0#24 S0#25 S0#22 R0#26 S0#27 S0#28 S0#21 R0#29")};
  EXPECT_FALSE(finishes(programs)); // every send with the next receive
  ASSERT_FALSE(llvm::errorToBool(smp::writer::groupMessagesForNccl(programs)));
  EXPECT_GT(holds(programs), 0);
  EXPECT_TRUE(finishes(programs));
}

TEST(MessageGroups, OneFOneBNeedsNoHold) {
  std::vector<pb::RankProgram> programs = {
      program("S1#0 S1#1 R1#10 S1#2 R1#11 S1#3 R1#12 R1#13"),
      program("R0#0 S0#10 R0#1 S0#11 R0#2 S0#12 R0#3 S0#13")};
  EXPECT_TRUE(finishes(programs));
  ASSERT_FALSE(llvm::errorToBool(smp::writer::groupMessagesForNccl(programs)));
  EXPECT_EQ(holds(programs), 0);
  // Stage 0's warm-up forward (S1#0) goes at once, not kept for its first
  // backward's receive; its later forwards each go with the next receive
  // from stage 1 (Megatron's send_forward_recv_backward): at once, S1#1
  // would wait for stage 1's R0#1, queued behind stage 1's S0#10, which
  // waits for stage 0's R1#10, queued behind S1#1. Stage 1's gradients go
  // at once.
  EXPECT_EQ(joinOf(programs[0], 0), -3);
  for (int k = 1; k < 4; ++k)
    EXPECT_EQ(joinOf(programs[0], k), -2) << "rank 0's send " << k;
  for (int k = 0; k < 4; ++k)
    EXPECT_EQ(joinOf(programs[1], k), -3) << "rank 1's send " << k;
  EXPECT_TRUE(finishes(programs));
}

TEST(MessageGroups, GPipesFirstStageSendsEachForwardAtOnce) {
  // Stage 0 receives nothing until its backwards: with the next operation,
  // all four forwards' outputs would wait for the first backward's receive
  // (stage 1 idle through stage 0's forwards); so would stage 1's
  // backwards' gradients (the last stage receives nothing there).
  std::vector<pb::RankProgram> programs = {
      program("S1#0 S1#1 S1#2 S1#3 R1#13 R1#12 R1#11 R1#10"),
      program("R0#0 R0#1 R0#2 R0#3 S0#13 S0#12 S0#11 S0#10")};
  ASSERT_FALSE(llvm::errorToBool(smp::writer::groupMessagesForNccl(programs)));
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(joinOf(programs[0], k), -3) << "rank 0's send " << k;
    EXPECT_EQ(joinOf(programs[1], k), -3) << "rank 1's send " << k;
  }
  EXPECT_TRUE(finishes(programs));
}

TEST(MessageGroups, ASendAtOnceThatWouldHangWaitsForTheNextOperation) {
  // Each rank sends, then receives what the other sends: both at once, each
  // send waits for a receive queued behind the peer's send. Rank 0's goes
  // with its receive instead (one group: they progress together).
  std::vector<pb::RankProgram> programs = {program("S1#1 R1#2"),
                                           program("S0#2 R0#1")};
  ASSERT_FALSE(llvm::errorToBool(smp::writer::groupMessagesForNccl(programs)));
  EXPECT_EQ(joinOf(programs[0], 0), -2);
  EXPECT_EQ(joinOf(programs[1], 0), -3);
  EXPECT_TRUE(finishes(programs));
  // Both at once would not finish (the player's check can fail).
  (*programs[0].mutable_instructions(1)->mutable_attrs())["join_tag"].set_i(-3);
  EXPECT_FALSE(finishes(programs));
}

TEST(MessageGroups, ASendAtOnceWaitsBehindOneLeftToTheSamePeer) {
  // Rank 0's first send must wait for its receive's group (at once it would
  // hang as above); its second, to the same peer, cannot pass it (NCCL
  // matches in order) although it is marked at once: the player (as
  // NcclCommunicator) leaves it behind and the run still finishes.
  std::vector<pb::RankProgram> programs = {program("S1#1 S1#3 R1#2"),
                                           program("S0#2 R0#1 R0#3")};
  ASSERT_FALSE(llvm::errorToBool(smp::writer::groupMessagesForNccl(programs)));
  EXPECT_EQ(joinOf(programs[0], 0), -2);
  EXPECT_EQ(joinOf(programs[0], 1), -3);
  EXPECT_TRUE(finishes(programs));
}

TEST(MessageGroups, AnOrderNoHoldMendsIsRefused) {
  // Each rank receives before it sends what the other waits for.
  std::vector<pb::RankProgram> programs = {program("R1#1 S1#2"),
                                           program("R0#2 S0#1")};
  llvm::Error err = smp::writer::groupMessagesForNccl(programs);
  ASSERT_TRUE(static_cast<bool>(err));
  EXPECT_EQ(llvm::toString(std::move(err)),
            "the pipeline's messages would hang on NCCL (a send larger than "
            "its buffers waits for its receive): rank 0 waits in the group "
            "of receive (tag 1) from rank 1; rank 1 waits in the group of "
            "receive (tag 2) from rank 0; train on the CPU target or with "
            "--schedule 1f1b");
}

} // namespace
