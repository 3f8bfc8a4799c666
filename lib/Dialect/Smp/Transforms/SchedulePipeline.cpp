//===- SchedulePipeline.cpp - One function per pipeline rank --------------===//
//
// Implements `smp-pipeline-schedule`. See Passes.td for the contract.
//
// Ops of @train_step fall in four groups:
//   free      no smp.stage: constants and computations on inputs only;
//             cloned into every rank that needs them, before anything else.
//   prologue  a stage but no micro-batch, using only arguments, free and
//             prologue values (e.g. the labels counted for the loss mean).
//   action    a stage and a micro-batch: forward (F) or, with smp.bwd,
//             backward (B). For ZB-H1 the backward of a stage x micro-batch
//             is split: its input-gradient part (BI) is what some other
//             stage uses (and what that needs), the rest is the weight
//             gradient (BW).
//   epilogue  a stage, no micro-batch, depending on an action.
// A rank runs its free ops, its prologue, its actions in the schedule's
// order, then its epilogue; each group keeps @train_step's op order. A free
// or prologue op that only the rank's epilogue reads (ZeRO-1/2's chunk of a
// parameter for the optimizer, sliced from the parameter alone) runs with
// the epilogue instead: before the actions its result would be held through
// every micro-batch.
//
// Sends are eager in the runtime (a send never waits for its receiver), so
// a rank blocks only in receives; the schedule's dependencies are then the
// only waits, and the simulator in the unit tests shows them deadlock-free.
//
//===----------------------------------------------------------------------===//

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/IRMapping.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"
#include "TrainStepUtils.h"
#include "smp/Schedule/PipelineSchedule.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Format.h"

#include <map>
#include <set>

namespace smp {
#define GEN_PASS_DEF_SMPPIPELINESCHEDULEPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;
namespace sched = smp::schedule;

namespace {

enum class Group { Free, Prologue, Action, Epilogue };

struct OpInfo {
  Group group = Group::Free;
  int64_t stage = -1, mb = -1;
  sched::Action::Kind kind = sched::Action::F;
};

/// Per value computed on one rank and used on others: (rank, tag) of each
/// message that carries it.
using Tags = llvm::DenseMap<Value, SmallVector<std::pair<int64_t, int64_t>>>;

/// What the pass works out about @train_step, one step at a time: each op's
/// group, which ranks run and read what, and the messages between them.
struct RankPlan {
  func::FuncOp step;
  int64_t pp;
  llvm::DenseMap<Operation *, OpInfo> info;
  int64_t numStages = 1, numMicrobatches = 1;
  /// A step-wide state (the fp16 loss scale and its counters) that ops of
  /// several ranks read: every such rank keeps a copy and gets its update.
  /// (Filled once the free ops' ranks are known; until then, updates go to
  /// their owner only.)
  llvm::DenseMap<StringAttr, std::set<int64_t>> stateReaders;
  /// Per rank: the ops it runs, in order, and the free ops it needs.
  std::vector<std::vector<Operation *>> program;
  std::vector<llvm::DenseSet<Operation *>> needsFree;
  /// Per rank: the free and prologue ops it runs with its epilogue.
  std::vector<llvm::DenseSet<Operation *>> late;
  Tags tags;

  RankPlan(func::FuncOp step, int64_t pp)
      : step(step), pp(pp), program(pp), needsFree(pp), late(pp) {}

  Block &body() { return step.getBody().front(); }
  func::ReturnOp ret() { return cast<func::ReturnOp>(body().getTerminator()); }
  int64_t rankOf(int64_t stage) const { return stage % pp; }
  const OpInfo *infoOf(Value v) {
    Operation *def = v.getDefiningOp();
    return def ? &info[def] : nullptr;
  }

  /// The ranks that return result `i` (value `v`) of @train_step.
  SmallVector<int64_t> returnedBy(unsigned i, Value v) {
    SmallVector<int64_t> ranks;
    if (auto update =
            step.getResultAttrOfType<StringAttr>(i, SmpDialect::kUpdateAttr)) {
      const OpInfo *d = infoOf(v);
      int64_t owner = d && d->stage >= 0 ? rankOf(d->stage) : 0;
      ranks.push_back(owner);
      if (auto it = stateReaders.find(update); it != stateReaders.end())
        for (int64_t r : it->second)
          if (r != owner)
            ranks.push_back(r);
    } else {
      for (int64_t r = 0; r < pp; ++r)
        ranks.push_back(r);
    }
    return ranks;
  }

  /// Puts each op in its group (free, prologue, action, epilogue) and counts
  /// the stages and micro-batches.
  void classifyOps() {
    for (Operation &op : body().without_terminator()) {
      OpInfo in;
      auto stage = op.getAttrOfType<IntegerAttr>(SmpDialect::kStageAttr);
      auto mb = op.getAttrOfType<IntegerAttr>(SmpDialect::kMicrobatchAttr);
      if (!stage) {
        // Free unless it uses a staged value (an op a pass built after the
        // stages were assigned): then it joins that value's group.
        for (Value v : op.getOperands())
          if (const OpInfo *d = infoOf(v); d && d->group != Group::Free) {
            in = *d;
            break;
          }
        info[&op] = in;
        continue;
      }
      in.stage = stage.getInt();
      numStages = std::max(numStages, in.stage + 1);
      if (mb) {
        in.group = Group::Action;
        in.mb = mb.getInt();
        in.kind = op.hasAttr(SmpDialect::kBackwardAttr) ? sched::Action::B
                                                        : sched::Action::F;
        numMicrobatches = std::max(numMicrobatches, in.mb + 1);
      } else {
        in.group = Group::Prologue;
        for (Value v : op.getOperands())
          if (const OpInfo *d = infoOf(v);
              d && (d->group == Group::Action || d->group == Group::Epilogue))
            in.group = Group::Epilogue;
      }
      info[&op] = in;
    }
  }

  /// Marks on rank `r` the free op defining `root` and the free ops it
  /// (transitively) uses. A worklist: no recursion as deep as the graph.
  void requireFree(int64_t r, Value root) {
    SmallVector<Value> work{root};
    while (!work.empty()) {
      Value v = work.pop_back_val();
      Operation *def = v.getDefiningOp();
      if (!def || info[def].group != Group::Free ||
          !needsFree[r].insert(def).second)
        continue;
      for (Value u : llvm::reverse(def->getOperands()))
        work.push_back(u);
    }
  }

  /// Free ops a rank needs: those its ops and its results (transitively)
  /// use.
  void collectFreeOps() {
    for (Operation &op : body().without_terminator())
      if (info[&op].group != Group::Free)
        for (Value v : op.getOperands())
          requireFree(rankOf(info[&op].stage), v);
    for (auto [i, v] : llvm::enumerate(ret().getOperands()))
      for (int64_t r : returnedBy(i, v))
        requireFree(r, v);
  }

  /// Whether rank r runs op (a free op it needs, or one of its stages').
  bool runsOn(Operation *op, int64_t r) {
    const OpInfo &in = info[op];
    return in.group == Group::Free ? needsFree[r].count(op) > 0
                                   : rankOf(in.stage) == r;
  }

  /// The free and prologue ops each rank can run with its epilogue: every
  /// reader on that rank is an epilogue op or such an op itself, and none
  /// is on another rank (a prologue value sent there) or the return. In
  /// reverse order, so that a chain (reshape, pad, slice) moves whole.
  void collectLateOps() {
    for (int64_t r = 0; r < pp; ++r)
      for (Operation &op : llvm::reverse(body().without_terminator())) {
        const OpInfo &in = info[&op];
        if ((in.group != Group::Free && in.group != Group::Prologue) ||
            !runsOn(&op, r) || op.use_empty())
          continue;
        bool all = llvm::all_of(op.getUsers(), [&](Operation *user) {
          auto it = info.find(user);
          if (it == info.end()) // the return
            return false;
          if (!runsOn(user, r)) // a free op is cloned where it is needed
            return in.group == Group::Free;
          return it->second.group == Group::Epilogue || late[r].count(user);
        });
        if (all)
          late[r].insert(&op);
      }
  }

  /// The ranks that read each step-wide state argument (named "@...").
  void collectStateReaders() {
    for (BlockArgument arg : body().getArguments()) {
      auto name = step.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                    SmpDialect::kStateAttr);
      if (!name || !name.getValue().starts_with("@"))
        continue;
      for (Operation *user : arg.getUsers()) {
        auto it = info.find(user);
        if (it == info.end())
          continue;
        if (it->second.group != Group::Free)
          stateReaders[name].insert(rankOf(it->second.stage));
        else
          for (int64_t r = 0; r < pp; ++r)
            if (needsFree[r].count(user))
              stateReaders[name].insert(r);
      }
    }
  }

  /// Each rank's program: its free ops, its prologue, its actions in the
  /// schedule's order, then its epilogue (with its late ops). Fails on an
  /// action the schedule has no slot for.
  LogicalResult assignOps(const sched::Schedule &order) {
    std::map<std::tuple<int64_t, int64_t, int>, std::vector<Operation *>>
        actions; // (stage, mb, kind) -> ops
    for (int64_t r = 0; r < pp; ++r)
      for (Operation &op : body().without_terminator())
        if (info[&op].group == Group::Free && needsFree[r].count(&op) &&
            !late[r].count(&op))
          program[r].push_back(&op);
    for (Operation &op : body().without_terminator()) {
      const OpInfo &in = info[&op];
      if (in.group == Group::Prologue && !late[rankOf(in.stage)].count(&op))
        program[rankOf(in.stage)].push_back(&op);
      else if (in.group == Group::Action)
        actions[{in.stage, in.mb, in.kind}].push_back(&op);
    }
    for (int64_t r = 0; r < pp; ++r)
      for (const sched::Action &a : order[r]) {
        auto it = actions.find({a.stage, a.microbatch, a.kind});
        if (it == actions.end())
          continue; // e.g. no backward on a stage without parameters
        program[r].insert(program[r].end(), it->second.begin(),
                          it->second.end());
        actions.erase(it);
      }
    if (!actions.empty()) {
      auto [key, ops] = *actions.begin();
      return ops.front()->emitError()
             << "op of stage " << std::get<0>(key) << ", micro-batch "
             << std::get<1>(key)
             << " is not part of the pipeline schedule (stage or micro-batch "
                "out of range)";
    }
    for (int64_t r = 0; r < pp; ++r)
      for (Operation &op : body().without_terminator())
        if ((info[&op].group == Group::Epilogue &&
             rankOf(info[&op].stage) == r) ||
            late[r].count(&op))
          program[r].push_back(&op);
    return success();
  }

  /// Recipients of each staged value, and the tag of each message.
  void assignTags() {
    llvm::DenseMap<Value, std::set<int64_t>> usedBy;
    for (int64_t r = 0; r < pp; ++r)
      for (Operation *op : program[r])
        for (Value v : op->getOperands())
          usedBy[v].insert(r);
    for (auto [i, v] : llvm::enumerate(ret().getOperands()))
      for (int64_t r : returnedBy(i, v))
        usedBy[v].insert(r);
    int64_t nextTag = 0;
    for (Operation &op : body().without_terminator()) {
      const OpInfo &in = info[&op];
      if (in.group == Group::Free)
        continue;
      for (Value v : op.getResults())
        for (int64_t r : usedBy[v])
          if (r != rankOf(in.stage))
            tags[v].push_back({r, nextTag++});
    }
  }
};

struct SmpPipelineSchedulePass
    : public smp::impl::SmpPipelineSchedulePassBase<SmpPipelineSchedulePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto step = lookupFuncOrError(module, "train_step", "smp-pipeline-schedule",
                                  "(run smp-build-train-step first)");
    if (!step || failed(schedule_(module, step)))
      return signalPassFailure();
  }

  /// The schedule for `plan`'s stages and micro-batches on pp ranks, or an
  /// error naming what does not fit.
  FailureOr<sched::Schedule> buildOrder(ModuleOp module, RankPlan &plan,
                                        sched::ScheduleKind kind,
                                        int64_t &virtualStages) {
    int64_t numStages = plan.numStages;
    if (numStages % pp != 0)
      return module.emitError()
             << "cannot run " << numStages << " pipeline stages on "
             << static_cast<int64_t>(pp)
             << " pipeline ranks (the stages must be a multiple of pp)";
    virtualStages = numStages / pp;
    if (virtualStages > 1 && kind != sched::ScheduleKind::Interleaved)
      return module.emitError()
             << numStages << " stages on " << static_cast<int64_t>(pp)
             << " pipeline ranks need "
             << "the interleaved schedule (" << virtualStages
             << " virtual stages per rank)";
    std::string error;
    sched::Schedule order = sched::buildSchedule(kind, pp, plan.numMicrobatches,
                                                 virtualStages, &error);
    if (order.empty())
      return module.emitError() << "pipeline schedule: " << error;
    return order;
  }

  LogicalResult schedule_(ModuleOp module, func::FuncOp step) {
    auto kind = sched::parseScheduleKind(schedule);
    if (!kind)
      return module.emitError() << "unknown pipeline schedule '" << schedule
                                << "' (expected gpipe, 1f1b, interleaved or "
                                   "zb-h1)";
    if (pp < 1)
      return module.emitError()
             << "pp must be >= 1, got " << static_cast<int64_t>(pp);

    RankPlan plan(step, pp);
    plan.classifyOps();
    int64_t virtualStages = 1;
    FailureOr<sched::Schedule> order =
        buildOrder(module, plan, *kind, virtualStages);
    if (failed(order))
      return failure();
    // ZB-H1: the input-gradient part of each backward.
    if (*kind == sched::ScheduleKind::ZeroBubbleH1)
      splitBackward(plan.body(), plan.info);
    plan.collectFreeOps();
    plan.collectLateOps();
    plan.collectStateReaders();
    if (failed(plan.assignOps(*order)))
      return failure();
    plan.assignTags();

    // Build the functions.
    OpBuilder mb(module.getContext());
    mb.setInsertionPoint(step);
    for (int64_t r = 0; r < pp; ++r)
      if (failed(buildRankFunction(plan, mb, r)))
        return failure();
    SmallVector<func::FuncOp> rankFunctions;
    for (int64_t r = 0; r < pp; ++r)
      rankFunctions.push_back(module.lookupSymbol<func::FuncOp>(
          (step.getSymName() + "_pp" + Twine(r)).str()));
    orderSendsLikeReceives(rankFunctions);
    std::string description;
    llvm::raw_string_ostream os(description);
    os << sched::scheduleKindName(*kind) << " pp=" << pp
       << " microbatches=" << plan.numMicrobatches
       << " virtual-stages=" << virtualStages << " (simulated bubble "
       << llvm::format("%.1f%%", 100.0 * sched::unitCostBubbleFraction(
                                             *kind, pp, plan.numMicrobatches,
                                             virtualStages))
       << ")";
    module->setAttr(SmpDialect::kScheduleAttr,
                    StringAttr::get(module.getContext(), description));
    step.erase();
    return success();
  }

  /// Each rank's sends to a peer, in the order the peer receives them. The
  /// tags make any order work over MPI, but NCCL matches a pair's messages
  /// in the order they were queued. A send only moves later (after the
  /// send the peer takes before it), never before its data is made; sends
  /// are eager, so the sender never waits for that.
  static void orderSendsLikeReceives(ArrayRef<func::FuncOp> ranks) {
    for (auto [dst, rankFunction] : llvm::enumerate(ranks)) {
      func::FuncOp f = rankFunction;
      std::map<int64_t, SmallVector<int64_t>> received; // source -> tags
      f.walk([&](RecvOp r) {
        received[r.getPeer()].push_back(r.getTag());
      });
      for (auto &[src, order] : received) {
        if (src < 0 || src >= static_cast<int64_t>(ranks.size()))
          continue;
        llvm::DenseMap<int64_t, Operation *> sendOf;
        func::FuncOp sender = ranks[src];
        sender.walk([&](SendOp s) {
          if (s.getPeer() == static_cast<int64_t>(dst))
            sendOf[s.getTag()] = s;
        });
        Operation *previous = nullptr;
        for (int64_t tag : order) {
          Operation *send = sendOf.lookup(tag);
          if (!send)
            continue;
          if (previous && send->isBeforeInBlock(previous))
            send->moveAfter(previous);
          previous = send;
        }
      }
    }
  }

  /// Splits each backward (stage, micro-batch) into BI, the ops whose
  /// values another stage's backward uses and what they need, and BW, the
  /// rest (weight gradients and their sums over the micro-batches; a tied
  /// weight's sum goes to the other stage only in the epilogue).
  static void splitBackward(Block &body,
                            llvm::DenseMap<Operation *, OpInfo> &info) {
    for (Operation &op : llvm::reverse(body.without_terminator())) {
      OpInfo &in = info[&op];
      if (in.group != Group::Action || in.kind == sched::Action::F)
        continue;
      bool input = false;
      for (Value v : op.getResults())
        for (Operation *user : v.getUsers()) {
          auto it = info.find(user);
          if (it == info.end())
            continue; // the return
          const OpInfo &u = it->second;
          if (u.stage != in.stage && u.group == Group::Action)
            input = true; // another stage's backward needs it
          if (u.stage == in.stage && u.mb == in.mb &&
              u.kind == sched::Action::BI)
            input = true; // the input gradient needs it
        }
      in.kind = input ? sched::Action::BI : sched::Action::BW;
    }
  }

  /// Rank `rank`'s function: its program, with a receive before the first
  /// use of each value made on another rank and a send after each value
  /// another rank uses.
  LogicalResult buildRankFunction(RankPlan &plan, OpBuilder &mb, int64_t rank) {
    func::FuncOp step = plan.step;
    ArrayRef<Operation *> ops = plan.program[rank];
    llvm::DenseMap<Operation *, OpInfo> &info = plan.info;
    const Tags &tags = plan.tags;
    auto rankOf = [&](int64_t stage) { return plan.rankOf(stage); };
    auto returnedBy = [&](unsigned i, Value v) {
      return plan.returnedBy(i, v);
    };
    MLIRContext *ctx = step.getContext();
    Block &body = step.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    Location loc = step.getLoc();

    // Arguments: those the rank's ops use, in @train_step's order.
    llvm::DenseSet<Value> used;
    for (Operation *op : ops)
      for (Value v : op->getOperands())
        used.insert(v);
    SmallVector<unsigned> results;
    for (auto [i, v] : llvm::enumerate(ret.getOperands()))
      if (llvm::is_contained(returnedBy(i, v), rank)) {
        results.push_back(i);
        used.insert(v);
      }
    SmallVector<Type> argTypes, resultTypes;
    SmallVector<DictionaryAttr> argAttrs, resultAttrs;
    SmallVector<BlockArgument> args;
    for (BlockArgument arg : body.getArguments()) {
      // A parameter no op reads (a causal mask buffer that smp.attention
      // replaced) stays on rank 0, so that every plan checkpoints the same
      // tensors as one rank does.
      bool unreadParam = arg.use_empty() &&
                         step.getArgAttr(arg.getArgNumber(),
                                         SmpDialect::kParamAttr);
      if (!used.count(arg) && !(rank == 0 && unreadParam))
        continue;
      // Each rank reads its own copy of a parameter (smp-build-gradients
      // makes one per rank that reads it, and that rank updates it): a
      // copy read on another rank would keep its first value there.
      auto param = step.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                     SmpDialect::kParamAttr);
      auto stage = step.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(),
                                                      SmpDialect::kStageAttr);
      if (param && stage && used.count(arg) && rankOf(stage.getInt()) != rank)
        return step.emitError()
               << "smp-pipeline-schedule: parameter '" << param.getValue()
               << "' is read on pipeline rank " << rank
               << " but its copy belongs to stage " << stage.getInt()
               << " (rank " << rankOf(stage.getInt())
               << "), which updates it (an op of the backward was given "
                  "another stage than its forward)";
      args.push_back(arg);
      argTypes.push_back(arg.getType());
      NamedAttrList attrs(step.getArgAttrDict(arg.getArgNumber()));
      attrs.erase(SmpDialect::kStageAttr);
      argAttrs.push_back(attrs.getDictionary(ctx));
    }
    for (unsigned i : results) {
      resultTypes.push_back(ret.getOperand(i).getType());
      resultAttrs.push_back(step.getResultAttrDict(i));
    }
    auto f = func::FuncOp::create(
        mb, loc, (step.getSymName() + "_pp" + Twine(rank)).str(),
        FunctionType::get(ctx, argTypes, resultTypes));
    f.setAllArgAttrs(argAttrs);
    f.setAllResultAttrs(resultAttrs);
    f->setAttr(SmpDialect::kPipelineRankAttr,
               IntegerAttr::get(IntegerType::get(ctx, 64), rank));
    Block *entry = f.addEntryBlock();
    IRMapping map;
    for (auto [k, arg] : llvm::enumerate(args))
      map.map(arg, entry->getArgument(k));
    OpBuilder b = OpBuilder::atBlockEnd(entry);

    auto ownerOf = [&](Value v) -> int64_t {
      Operation *def = v.getDefiningOp();
      if (!def)
        return -1;
      const OpInfo &in = info[def];
      return in.group == Group::Free ? -1 : rankOf(in.stage);
    };
    auto lookup = [&](Value v) -> FailureOr<Value> {
      if (Value mapped = map.lookupOrNull(v))
        return mapped;
      int64_t owner = ownerOf(v);
      if (owner < 0 || owner == rank)
        return step.emitError() << "smp-pipeline-schedule: a value is used "
                                   "on pipeline rank "
                                << rank << " before it is computed";
      int64_t tag = -1;
      if (auto it = tags.find(v); it != tags.end())
        for (auto [r, t] : it->second)
          if (r == rank)
            tag = t;
      assert(tag >= 0 && "a message for every value used on another rank");
      auto recv = RecvOp::create(b, v.getLoc(), v.getType(),
                                 b.getI64IntegerAttr(owner),
                                 b.getI64IntegerAttr(tag));
      map.map(v, recv.getResult());
      return recv.getResult();
    };
    for (Operation *op : ops) {
      for (Value v : op->getOperands())
        if (failed(lookup(v)))
          return failure();
      Operation *copy = b.clone(*op, map);
      copy->removeAttr(SmpDialect::kStageAttr);
      copy->removeAttr(SmpDialect::kMicrobatchAttr);
      copy->removeAttr(SmpDialect::kBackwardAttr);
      if (info[op].group == Group::Free)
        continue;
      for (auto [k, v] : llvm::enumerate(op->getResults()))
        if (auto it = tags.find(v); it != tags.end())
          for (auto [r, tag] : it->second)
            SendOp::create(b, v.getLoc(), copy->getResult(k),
                           b.getI64IntegerAttr(r), b.getI64IntegerAttr(tag));
    }
    SmallVector<Value> returned;
    for (unsigned i : results) {
      auto v = lookup(ret.getOperand(i));
      if (failed(v))
        return failure();
      returned.push_back(*v);
    }
    func::ReturnOp::create(b, loc, returned);
    return success();
  }
};

} // namespace
