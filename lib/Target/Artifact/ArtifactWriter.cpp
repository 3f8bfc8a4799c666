//===- ArtifactWriter.cpp - smp module -> model.smpx ----------------------===//
//
// Lowers each pipeline rank's function once per tensor-parallel rank
// (Lowering.cpp), checks what one rank needs, and writes the artifact
// directory: weights and programs first, the manifest last.
//
//===----------------------------------------------------------------------===//

#include "smp/Target/Artifact/ArtifactWriter.h"

#include "Lowering.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "smp/Dialect/Smp/IR/ShapeUtils.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Support/CheckedMath.h"
#include "smp/base/FileFormat.h"
#include "smp/base/LrSchedules.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <set>

namespace smp {
using namespace writer;

namespace {

llvm::Error writeFile(const std::string &path, const std::string &bytes) {
  std::string tmp = path + ".tmp";
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(tmp, ec);
    if (ec)
      return fail(tmp + ": " + ec.message());
    os << bytes;
    os.close();
    if (os.has_error())
      return fail(tmp + ": write failed");
  }
  if (auto ec = llvm::sys::fs::rename(tmp, path))
    return fail(path + ": " + ec.message());
  return llvm::Error::success();
}

/// The device grid of the module: pipeline ranks from the functions, dp and
/// tp from the shard grids, the placement from the module attribute.
llvm::Expected<DeviceGrid> deviceGridOf(ModuleOp module, size_t numStages) {
  DeviceGrid grid;
  grid.size[kPipelineAxis] = numStages;
  for (auto [name, axis] : {std::make_pair("dp", kDataAxis),
                            std::make_pair("tp", kTensorAxis)})
    if (auto g = module.lookupSymbol<shard::GridOp>(name)) {
      for (int64_t d : g.getShape())
        grid.size[axis] *= d;
      // Hybrid sharding: @dp is [groups, S].
      if (axis == kDataAxis && g.getShape().size() == 2)
        grid.dpShard = g.getShape()[1];
    }
  if (auto placement = module->getAttrOfType<StringAttr>(SmpDialect::kPlacementAttr)) {
    auto order = DeviceGrid::parsePlacement(placement.str());
    if (!order)
      return fail("bad placement '" + placement.getValue() +
                  "' (expected cluster, spread or an order of D, P, T)");
    grid.order = *order;
  }
  return grid;
}

/// What one rank may need: checked before a file is written (smprun would
/// only fail to allocate it).
llvm::Error checkRankLimits(const std::vector<std::unique_ptr<Lowering>> &lowered,
                            int64_t tp) {
  for (size_t k = 0; k < lowered.size(); ++k) {
    const Lowering &l = *lowered[k];
    std::string which = "pipeline stage " + std::to_string(k / tp) +
                        ", tensor rank " + std::to_string(k % tp);
    for (auto [what, bytes] :
         {std::pair<const char *, uint64_t>{"arena", l.program.arena_bytes()},
          {"host arena", l.program.host_arena_bytes()},
          {"weights", l.weightsBytes.size()}})
      if (bytes > uint64_t(kMaxArenaBytes)) {
        const pb::Buffer *largest = nullptr;
        for (const pb::Buffer &b : l.program.buffers())
          if (!largest || b.bytes() > largest->bytes())
            largest = &b;
        std::string detail;
        if (largest) {
          SmallVector<int64_t> shape(largest->shape().begin(),
                                     largest->shape().end());
          detail = " (its largest tensor: '" + largest->name() +
                   "' of shape " + shapeToString(shape) + ")";
        }
        return fail(which + " needs " + llvm::Twine(bytes) + " bytes of " +
                    what + detail +
                    ", over the limit of 2^40 bytes (1 TiB) per rank");
      }
  }
  return llvm::Error::success();
}

/// A hyper-parameter as a spec prints it.
static std::string specNumber(double v) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%.6g", v);
  return std::string(buf);
}

/// An sgd_update's or sgd_update_multi's spec.
template <typename SgdOpT> static std::string sgdSpec(SgdOpT sgd) {
  auto num = specNumber;
  return "sgd(momentum=" + num(sgd.getMomentum().convertToFloat()) +
         ", dampening=" + num(sgd.getDampening().convertToFloat()) +
         ", nesterov=" + (sgd.getNesterov() ? "true" : "false") +
         ", weight_decay=" + num(sgd.getWeightDecay().convertToFloat()) + ")";
}

/// An adam_update's or adam_update_multi's spec.
template <typename AdamOpT> static std::string adamSpec(AdamOpT adam) {
  auto num = specNumber;
  return std::string(adam.getDecoupled() ? "adamw" : "adam") +
         "(beta1=" + num(adam.getBeta1().convertToFloat()) +
         ", beta2=" + num(adam.getBeta2().convertToFloat()) +
         ", eps=" + num(adam.getEpsilon().convertToFloat()) +
         ", weight_decay=" + num(adam.getWeightDecay().convertToFloat()) + ")";
}

/// The optimizer update's kind and hyper-parameters as the program runs
/// them, in the form a checkpoint records and smprun --resume compares:
/// the decayed parameters' (every parameter gets the same ones but the
/// weight decay, which --no-decay takes from those it matches: the spec
/// names it).
std::string optimizerSpec(ModuleOp module, const std::string &fallback,
                          const std::string &noDecay) {
  std::string spec;
  float decay = -1.0f;
  auto take = [&](std::string s, llvm::APFloat wd) {
    if (wd.convertToFloat() > decay)
      spec = std::move(s), decay = wd.convertToFloat();
  };
  module.walk([&](Operation *op) {
    if (auto sgd = dyn_cast<SgdUpdateOp>(op))
      take(sgdSpec(sgd), sgd.getWeightDecay());
    else if (auto sgdMulti = dyn_cast<SgdUpdateMultiOp>(op))
      take(sgdSpec(sgdMulti), sgdMulti.getWeightDecay());
    else if (auto adam = dyn_cast<AdamUpdateOp>(op))
      take(adamSpec(adam), adam.getWeightDecay());
    else if (auto multi = dyn_cast<AdamUpdateMultiOp>(op))
      take(adamSpec(multi), multi.getWeightDecay());
  });
  if (spec.empty())
    return fallback + "(no parameter trains)";
  if (!noDecay.empty())
    spec.insert(spec.size() - 1, ", no_decay='" + noDecay + "'");
  return spec;
}

/// Every parameter of every rank once, with its global shape, by name.
void addParameters(const std::vector<std::unique_ptr<Lowering>> &lowered,
                   pb::Manifest &manifest) {
  std::map<std::string, pb::TensorSpec> params;
  for (const auto &l : lowered)
    for (const pb::Buffer &b : l->program.buffers()) {
      if (b.role() != "param" || params.count(b.name()))
        continue;
      pb::TensorSpec spec;
      spec.set_name(b.name());
      spec.set_dtype(b.dtype());
      *spec.mutable_shape() = b.has_layout() ? b.layout().full_shape()
                                             : b.shape();
      params[b.name()] = std::move(spec);
    }
  for (auto &[name, spec] : params)
    *manifest.add_parameters() = std::move(spec);
}

void setTraining(ModuleOp module, const TrainingOptions &training,
                 pb::TrainingConfig *t) {
  t->set_loss(training.loss);
  t->set_optimizer(training.optimizer);
  t->set_optimizer_spec(
      optimizerSpec(module, training.optimizer, training.noDecay));
  t->set_microbatches(static_cast<uint32_t>(training.microbatches));
  t->set_lr(training.lr);
  t->set_lr_schedule(training.lrSchedule);
  t->set_warmup_steps(training.warmupSteps);
  t->set_decay_steps(training.decaySteps);
  t->set_eval_every(training.evalEvery);
  t->set_eval_delay(training.evalDelay);
  t->set_eval_on_start(training.evalOnStart);
  t->set_shift_labels(training.shiftLabels);
  t->set_eval_batch(training.evalBatch);
  for (const std::string &name : training.evalMetrics)
    t->add_eval_metrics(name);
  if (smp::base::isDeepSpeedSchedule(training.lrSchedule)) {
    t->set_warmup_type(training.warmupType);
    t->set_warmup_min(training.warmupMin);
  }
  if (smp::base::scheduleHasCosineFloor(training.lrSchedule))
    t->set_cos_min_ratio(training.cosMinRatio);
  t->set_batch_size(training.batchSize);
  t->set_seed(training.seed);
  for (const std::string &name : training.buffers)
    t->add_buffers(name);
  for (const std::string &name : training.frozen)
    t->add_frozen(name);
  t->set_source_model(training.sourceModel);
  // The source's checksum: a copy of it elsewhere is accepted in its place
  // (smprun --source-model), any other file refused.
  if (!training.sourceModel.empty())
    if (auto buf = llvm::MemoryBuffer::getFile(training.sourceModel))
      t->set_source_model_checksum(smp::base::checksum64(
          (*buf)->getBufferStart(), (*buf)->getBufferSize()));
  if (auto origins =
          module->getAttrOfType<ArrayAttr>(SmpDialect::kParamOriginsAttr))
    for (auto entry : origins.getAsRange<DictionaryAttr>()) {
      pb::ParamOrigin *o = t->add_param_origins();
      auto text = [&](const char *key) {
        auto v = entry.getAs<StringAttr>(key);
        return v ? v.str() : std::string();
      };
      o->set_name(text("name"));
      o->set_from(text("from"));
      o->set_kind(text("kind"));
      o->set_source(text("source"));
      o->set_transposed(entry.get("transposed") != nullptr);
      if (auto uses = entry.getAs<DenseI64ArrayAttr>("uses"))
        for (int64_t u : uses.asArrayRef())
          o->add_uses(u);
      if (auto shape = entry.getAs<DenseI64ArrayAttr>("shape"))
        for (int64_t d : shape.asArrayRef())
          o->add_shape(d);
    }
}

/// The manifest's model-wide fields. Inputs: every stage's (a pipeline's
/// first stage reads the tokens, its last the labels); outputs: every stage
/// returns the step's.
pb::Manifest manifestOf(ModuleOp module,
                        const std::vector<std::unique_ptr<Lowering>> &stages,
                        const ArtifactOptions &options,
                        const DeviceGrid &grid) {
  pb::Manifest manifest;
  std::set<std::string> seen;
  for (const auto &lowering : stages)
    for (const auto &spec : lowering->manifestIO.inputs())
      if (seen.insert(spec.name()).second)
        *manifest.add_inputs() = spec;
  *manifest.mutable_outputs() = stages.front()->manifestIO.outputs();
  manifest.set_producer(options.producer);
  manifest.set_model_name(module.getSymName() ? module.getSymName()->str()
                                              : "model");
  manifest.set_target(options.target);
  manifest.set_num_ranks(static_cast<uint32_t>(grid.numRanks()));
  manifest.set_dp(grid.size[kDataAxis]);
  manifest.set_pp(grid.size[kPipelineAxis]);
  manifest.set_tp(grid.size[kTensorAxis]);
  manifest.set_placement(grid.placementLetters());
  if (grid.dpShard > 0)
    manifest.set_dp_shard(grid.dpShard);
  manifest.set_device(options.device);
  manifest.set_peak_flops(options.peakFlops);
  if (auto sched = module->getAttrOfType<StringAttr>(SmpDialect::kScheduleAttr))
    manifest.set_schedule(sched.str());
  if (options.training)
    setTraining(module, *options.training, manifest.mutable_training());
  return manifest;
}

/// Zeros of the right size: the memory plan does not need the weights.
class ZeroWeights : public WeightSource {
public:
  llvm::Expected<std::string> read(llvm::StringRef,
                                   RankedTensorType type) override {
    unsigned bits = type.getElementTypeBitWidth();
    return std::string(type.getNumElements() * std::max(1u, bits / 8), '\0');
  }
};

} // namespace

llvm::Expected<std::vector<uint64_t>> planArenaBytes(ModuleOp module) {
  auto funcs = rankFunctions(module);
  if (!funcs)
    return funcs.takeError();
  int64_t tp = 1;
  if (auto g = module.lookupSymbol<shard::GridOp>("tp"))
    for (int64_t d : g.getShape())
      tp *= d;
  ZeroWeights zeros;
  std::vector<uint64_t> bytes;
  for (func::FuncOp f : *funcs) {
    Lowering lowering(f, zeros, 0, tp);
    lowering.withWeights = false;
    if (auto err = lowering.run())
      return std::move(err);
    bytes.push_back(lowering.program.arena_bytes());
  }
  return bytes;
}

/// Every rank's program: its pipeline stage's and tensor rank's lowering
/// bound to the grid.
static llvm::Expected<std::vector<pb::RankProgram>>
rankPrograms(const DeviceGrid &grid,
             llvm::function_ref<Lowering &(int64_t, int64_t)> lowering) {
  std::vector<pb::RankProgram> programs;
  for (int64_t r = 0; r < grid.numRanks(); ++r) {
    auto coord = grid.coordOf(r);
    auto program = rankProgram(
        lowering(coord[kPipelineAxis], coord[kTensorAxis]).program, grid, r);
    if (!program)
      return program.takeError();
    programs.push_back(std::move(*program));
  }
  return programs;
}

/// What smpc prints of the artifact: the largest arena, the weights' and
/// programs' sizes over the stages.
static ArtifactSummary
summarize(const std::vector<std::unique_ptr<Lowering>> &stages) {
  ArtifactSummary summary;
  for (const auto &lowering : stages) {
    summary.arenaBytes =
        std::max<uint64_t>(summary.arenaBytes, lowering->program.arena_bytes());
    summary.weightsBytes += lowering->weightsBytes.size();
    summary.numInstructions += lowering->program.instructions_size();
    summary.numBuffers += lowering->program.buffers_size();
  }
  return summary;
}

llvm::Expected<ArtifactSummary> writeArtifact(ModuleOp module,
                                              WeightSource &weights,
                                              const ArtifactOptions &options) {
  // One function per pipeline rank, or the single step (or forward).
  auto rankFuncs = rankFunctions(module);
  if (!rankFuncs)
    return rankFuncs.takeError();
  SmallVector<func::FuncOp> funcs = std::move(*rankFuncs);
  auto gridOr = deviceGridOf(module, funcs.size());
  if (!gridOr)
    return gridOr.takeError();
  DeviceGrid grid = *gridOr;
  // One lowering per pipeline stage and tensor-parallel rank (the same
  // program, each with its slice of the weights): index p * tp + t.
  int64_t tp = grid.size[kTensorAxis];
  std::vector<std::unique_ptr<Lowering>> lowered;
  // What smprun --eval-data runs of a training step.
  EvalSubsets eval;
  if (options.training)
    eval = evalOps(funcs);
  for (auto [p, f] : llvm::enumerate(funcs))
    for (int64_t t = 0; t < tp; ++t) {
      lowered.push_back(std::make_unique<Lowering>(f, weights, t, tp,
                                                   grid.shardRanks()));
      if (options.training) {
        lowered.back()->forward = &eval.forward[p];
        lowered.back()->evalOnly = &eval.evalOnly[p];
      }
      if (auto err = lowered.back()->run())
        return std::move(err);
    }
  if (auto err = checkRankLimits(lowered, tp))
    return std::move(err);
  pb::Manifest params;
  addParameters(lowered, params);
  std::vector<std::unique_ptr<Lowering>> stages; // tensor rank 0 of each
  for (size_t p = 0; p < funcs.size(); ++p)
    stages.push_back(std::move(lowered[p * tp]));

  if (auto ec = llvm::sys::fs::create_directories(options.outputDir))
    return fail(options.outputDir + ": " + ec.message());
  auto path = [&](const std::string &name) {
    llvm::SmallString<256> p(options.outputDir);
    llvm::sys::path::append(p, name);
    return std::string(p.str());
  };
  pb::Manifest manifest = manifestOf(module, stages, options, grid);
  if (options.training) {
    *manifest.mutable_parameters() = params.parameters();
    manifest.mutable_training()->set_eval_refusal(evaluationRefusal(funcs));
    if (auto a =
            module->getAttrOfType<StringAttr>(SmpDialect::kEvalPadLabelsAttr))
      manifest.mutable_training()->set_eval_pad_labels(a.str());
    if (auto a = module->getAttrOfType<StringAttr>(SmpDialect::kEvalNoPadAttr))
      manifest.mutable_training()->set_eval_no_pad(a.str());
    if (auto a = module->getAttrOfType<DenseI64ArrayAttr>(
            SmpDialect::kEvalCountedLabelsAttr))
      for (int64_t r : a.asArrayRef())
        manifest.mutable_training()->add_eval_counted_labels(r);
    if (auto a =
            module->getAttrOfType<StringAttr>(SmpDialect::kEvalNoCountAttr))
      manifest.mutable_training()->set_eval_no_count(a.str());
    manifest.mutable_training()->set_eval_loss_sums(
        module->hasAttr(SmpDialect::kEvalLossSumsAttr));
  }
  // Weights: one file per pipeline stage and tensor-parallel rank, read by
  // the data-parallel replicas of that rank.
  auto lowering = [&](int64_t p, int64_t t) -> Lowering & {
    return t == 0 ? *stages[p] : *lowered[p * tp + t];
  };
  std::vector<std::string> weightFiles;
  std::vector<uint64_t> checksums;
  for (size_t p = 0; p < stages.size(); ++p)
    for (int64_t t = 0; t < tp; ++t) {
      std::string name = stages.size() == 1 && tp == 1 ? "rank0" : "";
      if (stages.size() > 1)
        name = "stage" + std::to_string(p);
      if (tp > 1)
        name += (name.empty() ? "" : ".") + std::string("tp") + std::to_string(t);
      weightFiles.push_back(name + ".weights.bin");
      const std::string &bytes = lowering(p, t).weightsBytes;
      checksums.push_back(smp::base::checksum64(bytes.data(), bytes.size()));
    }
  auto built = rankPrograms(grid, lowering);
  if (!built)
    return built.takeError();
  std::vector<std::string> programs;
  double stepFlops = 0; // every rank's instructions, by the cost model
  for (int64_t r = 0; r < grid.numRanks(); ++r) {
    auto coord = grid.coordOf(r);
    int64_t p = coord[kPipelineAxis], t = coord[kTensorAxis];
    const pb::RankProgram *program = &(*built)[r];
    programs.push_back(smp::base::frame(program->SerializeAsString(),
                                        smp::base::FileKind::Artifact));
    for (const pb::Instruction &inst : program->instructions())
      if (auto it = inst.attrs().find("@flops");
          it != inst.attrs().end() && !inst.eval_only()) // not the step's
        stepFlops += it->second.f();
    pb::RankFile *rank = manifest.add_ranks();
    rank->set_rank(r);
    rank->set_program_file("rank" + std::to_string(r) + ".program.pb");
    rank->set_program_bytes(programs.back().size());
    rank->set_weights_file(weightFiles[p * tp + t]);
    rank->set_weights_bytes(lowering(p, t).weightsBytes.size());
    rank->set_weights_checksum(checksums[p * tp + t]);
  }

  manifest.set_step_flops(stepFlops);

  std::string ir;
  llvm::raw_string_ostream irStream(ir);
  module.print(irStream);
  // Weights and programs first, the manifest last: a crash in between leaves
  // no manifest that points at missing files.
  for (size_t p = 0; p < stages.size(); ++p)
    for (int64_t t = 0; t < tp; ++t)
      if (auto err = writeFile(path(weightFiles[p * tp + t]),
                               lowering(p, t).weightsBytes))
        return std::move(err);
  for (int64_t r = 0; r < grid.numRanks(); ++r)
    if (auto err = writeFile(path("rank" + std::to_string(r) + ".program.pb"),
                             programs[r]))
      return std::move(err);
  if (auto err = writeFile(path("model.mlir"), ir))
    return std::move(err);
  PlanDetails details =
      collectPlanDetails(funcs, stages, options, grid, manifest);
  if (auto err = writeFile(path("plan.txt"),
                           planReport(module, funcs, stages, options, grid,
                                      manifest.training().eval_refusal()) +
                               planDetailsText(details)))
    return std::move(err);
  if (auto err = writeFile(path("plan.json"), planJson(details)))
    return std::move(err);
  if (auto err = writeFile(path("manifest.pb"),
                           smp::base::frame(manifest.SerializeAsString(),
                                            smp::base::FileKind::Artifact)))
    return std::move(err);
  return summarize(stages);
}

} // namespace smp
