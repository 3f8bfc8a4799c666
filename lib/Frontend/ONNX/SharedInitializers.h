//===- SharedInitializers.h - Parameters as the framework had them -*- C++ -*-===//
//
// Exporters change how parameters are shared: torch.onnx.export merges
// initializers with equal contents (every fresh LayerNorm weight becomes one
// tensor: TorchScript writes `b = Identity(a)`, the dynamo exporter reuses
// one name), and constant folding stores a tied weight's transpose as a
// separate copy. The importer undoes both before it reads the graph; see
// docs/bring-your-own-model.md for the rules.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_LIB_FRONTEND_ONNX_SHAREDINITIALIZERS_H
#define SMP_LIB_FRONTEND_ONNX_SHAREDINITIALIZERS_H

#include "mlir/IR/BuiltinOps.h"
#include "onnx/onnx_pb.h"
#include "smp/Frontend/ONNX/Importer.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace smp::onnx_frontend {

/// What the importer did to one initializer.
struct ParamOrigin {
  /// The parameter (untied) or the initializer (tied) it concerns.
  std::string name;
  /// The initializer of the file that holds its value.
  std::string from;
  /// "restored": a zero bias the dynamo exporter's optimiser removed, put
  /// back as a zero-initialised parameter (`uses`: the node input);
  /// "buffer": a float initializer PyTorch trains nothing in (it holds
  /// infinities, the graph signature lists it as a buffer, no gradient
  /// reaches it, the dynamo optimiser folded it
  /// from constants: markBuffers, FrozenInitializers.cpp), kept frozen;
  /// "identity": an exporter's `name = Identity(from)` marker, untied;
  /// "merged": one of several nodes reading a constant-valued `from`,
  /// untied (a guess: warned about); "merged-exact": one of several
  /// initializers' groups of readers where the dynamo exporter's metadata
  /// names the PyTorch parameter (`name`) the nodes read, any value
  /// (deep-copied layers' equal weights), or, for a fold (`val_N`), the
  /// parameters of their call (`why` lists them; `name` is `from#N`); "tied": a
  /// copy of `from` (transposed or equal), read as it; "folded": `from` holds
  /// rows of an embedding the dynamo optimiser gathered at constant positions
  /// and folded, trained as they are; "folded-rows": the same where rows
  /// repeat: `name` holds the distinct rows and `from` = Gather(name, index),
  /// the index in `uses`; "cloned": node `name` is a copy of node `from`
  /// (uses[0]: its index and the copy's), its outputs renamed with the suffix
  /// `name` adds to `from`, read by the (node, input) pairs of uses[1...]
  /// (splitMergedReaders); "renamed": `name` is trained in place of
  /// PyTorch's parameter `from` (transposed: its transpose; torchShape:
  /// its shape, where the fold has unit dims more), which checkpoints
  /// export (nameFoldedWeights); "alias": `from` is
  /// PyTorch's other name of the tied parameter `name` (torch.export keeps
  /// one), which checkpoints export too; "tied-block": `from` (a fold) is
  /// Concat of the tied weight `source` (its transpose where `transposed`)
  /// in its rows uses[0] = (first, count) and the parameter `name` in the
  /// others (splitTiedBlock), written back as that fold by --save-onnx.
  std::string kind;
  bool transposed = false;
  /// merged: the (node index, input index) in the file that read `from`
  /// and now read `name`; folded-rows: (distinct row, 0) per row of `from`;
  /// tied-block: (first row, rows) of the tied weight's block.
  std::vector<std::pair<int, int>> uses;
  /// folded-rows, tied-block: the initial value of `name` (the file has no
  /// such initializer), recorded as `smp.init_value`.
  std::string initBytes;
  /// tied-block: the tied weight whose rows `from` holds.
  std::string source;
  /// buffer: why it is not trained; merged-exact of a fold: its readers'
  /// call; cloned: which calls shared it (`smpc summary` says it).
  std::string why;
  /// renamed: PyTorch's shape of `from` where the trained tensor has unit
  /// dims more (a GroupNorm's weight folded as [C, 1, 1]); empty otherwise.
  std::vector<int64_t> torchShape;
};

/// Whether raw element bytes (of size `es`: a float type) hold an infinity
/// or the type's lowest finite value (torch.finfo(dtype).min, what HF's
/// masks hold): a mask, never a parameter.
bool holdsMaskValue(llvm::StringRef bytes, int64_t es);

/// Whether a float initializer [..., P, D] (raw bytes, element size `es`) is a
/// sinusoidal position table: sin and cos of the row times one frequency
/// per column pair, in halves or interleaved (SinusoidTables.cpp).
bool holdsSinusoidTable(llvm::ArrayRef<int64_t> dims, llvm::StringRef bytes,
                        int64_t es);

/// A node's `metadata_props` entry (read from the protobuf unknown fields:
/// Debian's ONNX library predates them), or "".
std::string nodeMetadata(const onnx::NodeProto &n, llvm::StringRef key);

/// The inputs of the kinds `kinds` (PARAMETER, BUFFER, CONSTANT_TENSOR) of
/// the torch.export graph signature the dynamo exporter stores in the
/// graph's metadata: variable (`p_x_y`) -> target ("x.y"); empty for other
/// files (ExportSignature.cpp, as the four below).
std::map<std::string, std::string>
signatureInputs(const onnx::GraphProto &g,
                llvm::ArrayRef<llvm::StringRef> kinds);
/// What onnxscript's optimiser folded each initializer from (its
/// `value_info` entry's `pkg.onnxscript.optimizer.folded_from`): the FX
/// values (`view`, `getitem`), PyTorch parameters and buffers by target
/// name, and ONNX temporaries (`val_3`) it computed the fold from; absent
/// for a fold an older exporter wrote.
std::map<std::string, std::vector<std::string>>
foldSources(const onnx::GraphProto &g);
/// signatureInputs(g, {"PARAMETER"}).
std::map<std::string, std::string> signatureParams(const onnx::GraphProto &g);
/// Whether `m` is a dynamo export (producer pytorch, most nodes named
/// node_<op>_<n> as onnxscript names them) whose metadata a tool removed:
/// no graph signature (`sig`, signatureParams of its graph) and no node's
/// pkg.torch.onnx entries.
bool strippedDynamoExport(const onnx::ModelProto &m,
                          const std::map<std::string, std::string> &sig);
/// The PyTorch parameter node `n`'s call read where the node reads the
/// merged initializer `init`, or "" (the call's one parameter named like
/// `init`, else, for Add/Sub/Mul/Div, the one in `init`'s place).
std::string torchParameterRead(const onnx::NodeProto &n, llvm::StringRef init,
                               const std::map<std::string, std::string> &sig);
/// The PyTorch parameters node `n`'s call takes, sorted, joined by ", ".
std::string torchCallParameters(const onnx::NodeProto &n,
                                const std::map<std::string, std::string> &sig);
/// Whether node `n` (a normalisation) reads its input `input` (1: scale,
/// 2: bias) where its aten call passes None (`nn.LayerNorm(...,
/// elementwise_affine=False)`, `nn.InstanceNorm1d`) or where the exporter's
/// translation reads its own constant (GroupNorm's InstanceNormalization of
/// ones and zeros per group): the exporter's ones or zeros, which its
/// optimiser may have merged with an equal parameter, not a parameter of
/// the call.
bool readsExporterConstant(const onnx::NodeProto &n, int input);
/// Whether the FX call `fx` is a norm (kNormSources: layer_norm, group_norm,
/// rms_norm, instance_norm, batch_norm) that passes None for its weight or
/// bias (the exporter feeds ones and zeros of its own in their place).
bool normWithoutAffine(llvm::StringRef fx);
/// Whether the parameter lists (torchCallParameters) are each equal or
/// share no parameter.
bool disjointCalls(llvm::ArrayRef<std::string> calls);

/// The modules a node ran in, innermost last (its
/// `pkg.torch.onnx.name_scopes` without its last entry, the FX node itself:
/// "['', 'model', 'model.embed', 'embedding']" -> "", "model", "model.embed").
std::vector<std::string> nodeScopes(const onnx::NodeProto &n);

/// The `%name` tokens (without the '%') of the arguments of a dynamo
/// exporter's fx_node text (after "args = ("), those that start with
/// `prefix` ("%p_": parameters), each ending at one of `ends`.
std::vector<std::string> fxArgs(llvm::StringRef fx, llvm::StringRef prefix,
                                llvm::StringRef ends);
/// The top-level arguments of an fx_node text, each as written (`args =
/// (%x, [8], None, 1e-05)` -> "%x", "[8]", "None", "1e-05").
std::vector<std::string> fxArgTexts(llvm::StringRef fx);
/// Whether an fx_node text calls `target` ("aten.linear.default").
bool fxCalls(llvm::StringRef fx, llvm::StringRef target);
/// Whether node `n` is the InstanceNormalization of an `aten.group_norm`
/// call's translation (each group normalised with the exporter's ones and
/// zeros; the call's weight and bias applied after by a Mul and an Add).
bool groupNormInstanceNorm(const onnx::NodeProto &n);

/// Under --train, for a file with the dynamo exporter's graph signature
/// `sig` (variable -> PyTorch parameter): copies back the calls that read
/// parameters its optimiser merged (common subexpression elimination)
/// where the metadata tells their parameters, and refuses the others and
/// a parameter folded into a value smp cannot train as PyTorch does;
/// rewrites embeddings gathered at constant positions into their distinct
/// rows (FoldedParameters.cpp); adds to `frozen` folded values of buffers.
llvm::Error resolveFoldedParameters(
    onnx::GraphProto &g, llvm::StringRef path,
    const std::map<std::string, std::string> &sig,
    std::vector<ParamOrigin> &origins, std::vector<std::string> &warnings,
    std::set<std::string> &frozen, mlir::MLIRContext *ctx,
    llvm::StringRef modelDir);

/// Under --train, for a dynamo export stripped of its metadata
/// (strippedDynamoExport): refuses a Gemm the optimiser left without its
/// zero bias, which nothing names any more (RemovedBiases.cpp).
llvm::Error refuseStrippedRemovals(const onnx::GraphProto &g,
                                   llvm::StringRef path);

/// Under --train, for a file with the dynamo exporter's graph signature
/// `sig`: puts back, as zero-initialised parameters named as the node's
/// metadata says, the zero biases of Linears and convolutions that its
/// optimiser removed (RemovedBiases.cpp); refuses a removal it cannot undo.
llvm::Error restoreRemovedBiases(onnx::GraphProto &g, llvm::StringRef path,
                                 const std::map<std::string, std::string> &sig,
                                 std::vector<ParamOrigin> &origins);

/// For a file with the dynamo graph signature `sig`: a node without
/// metadata (one the optimiser made) that reads a parameter initializer in
/// `params` and whose consumers run in modules of several PyTorch
/// parameters named like it (common subexpression elimination merged their
/// calls' nodes: the Split of deep-copied cross-attentions' packed biases)
/// is copied once per such parameter, its consumers rewired to their copy
/// (MergedReaders.cpp); `origins` records each copy ("cloned").
void splitMergedReaders(onnx::GraphProto &g,
                        const std::map<std::string, std::string> &sig,
                        const llvm::StringSet<> &params,
                        std::vector<ParamOrigin> &origins);

/// The one PyTorch parameter named like `init` in the modules of the
/// consumers of node `i` (a node without metadata that reads `init`), or
/// "" (MergedReaders.cpp).
std::string consumersParameter(const onnx::GraphProto &g, int i,
                               llvm::StringRef init,
                               const std::map<std::string, std::string> &sig);

/// For a file with the dynamo graph signature `sig`: each trained
/// initializer in `trained` that no parameter is named after and that
/// every reader reads as one call's parameter P only moved (the transpose
/// of an `aten.linear` weight: the right operand of its MatMul; an
/// `aten.group_norm` weight or bias unsqueezed: its Mul's or Add's
/// operand), P gone from the file, gets a "renamed" origin naming P
/// (FoldedWeights.cpp): checkpoints export it as P.
void nameFoldedWeights(const onnx::GraphProto &g,
                       const std::map<std::string, std::string> &sig,
                       const std::set<std::string> &trained,
                       std::vector<ParamOrigin> &origins);

/// Under --train: refuses a file in which an exporter folded a BatchNorm
/// into the convolution before it (FoldedBatchNorms.cpp): the dynamo
/// optimiser's FuseBatchNormIntoConv, or TorchScript's eval() export, whose
/// convolutions read `onnx::Conv_<N>` values instead of parameters.
llvm::Error refuseFoldedBatchNorms(const onnx::GraphProto &g,
                                   llvm::StringRef path);
/// Of `candidates` (float initializers that would become parameters), the
/// ones no training may change, with why (FrozenInitializers.cpp): those no
/// gradient reaches, and, where `paramTargets` (the dynamo graph signature's
/// PARAMETER targets) is not empty, the values its optimiser folded from
/// constants and buffers.
std::map<std::string, std::string>
frozenByUse(const onnx::GraphProto &g, llvm::ArrayRef<std::string> candidates,
            const std::set<std::string> &paramTargets);

/// The initializers every reader of which is a node of an aten call
/// taking no parameter (no `%p_...` in its metadata) and no FX value of
/// that name: what the dynamo optimiser folds from constants and buffers
/// (an attention mask), or from parameters an aten call before it read
/// (ParameterImages.cpp).
std::set<std::string> dynamoConstantFolds(const onnx::GraphProto &g);

/// Under training with the dynamo graph signature: refuses a constant
/// fold (dynamoConstantFolds) whose values are a strictly monotone function
/// of a parameter's in the file (`F.linear(x, w * 0.5)`, folded to the
/// transpose of w scaled): PyTorch trains w through it, smp would freeze
/// it (ParameterImages.cpp).
llvm::Error
refuseFoldedParameterImages(const onnx::GraphProto &g, llvm::StringRef path,
                            const std::map<std::string, std::string> &sig,
                            mlir::MLIRContext *ctx, llvm::StringRef modelDir);

/// The initializers nodes read only as settings, not data (a Resize's
/// scales and roi: `F.interpolate(scale_factor=2)`'s [1, 1, 2, 2], which
/// the exporters store as a float initializer): constants, never
/// parameters.
std::set<std::string> settingInitializers(const onnx::GraphProto &g);

/// Of `names`, those a node reads whose dynamo metadata shows an aten call
/// taking a parameter (`%p_...`): a folded parameter may hide there.
std::set<std::string> readByParameterCalls(const onnx::GraphProto &g,
                                           llvm::ArrayRef<std::string> names);

/// Whether float initializer `name` is a value the TorchScript exporter's
/// constant folding computed (`onnx::Add_932`) that some node reads other
/// than as a moved parameter: not as a MatMul's or Gemm's operand (the
/// folded transpose of a Linear's weight), a Conv's weight or a PRelu's
/// slope, nor only through the exporter's Identity markers
/// (FrozenInitializers.cpp). A buffer (BART's final_logits_bias) or a
/// parameter's gather (Swin's relative position bias) looks the same.
bool torchScriptComputedFold(const onnx::GraphProto &g,
                             const std::string &name);

/// A float initializer that would be trained as a parameter, with its raw
/// little-endian values.
struct FoldCandidate {
  std::string name;
  const std::string *bytes;
  int64_t elementSize;
  bool scalar = false;   // one element
  bool constant = false; // one value everywhere
  bool slope = false;    // a PRelu's slope
};
/// The warnings for the TorchScript computed folds among `candidates` (a
/// file without the dynamo signature or an smp.export sidecar), which smp
/// trains as parameters of their own though the file cannot say what they
/// were: one for those whose values repeat (at most half of them distinct:
/// a fresh constant, a buffer of zeros, a table gathered at repeating
/// positions), one for the others (a parameter's rows, which train as its
/// rows do, and a parameter's arithmetic, which does not, look the same).
std::vector<std::string>
torchScriptFoldsWarnings(const onnx::GraphProto &g,
                         llvm::ArrayRef<FoldCandidate> candidates);

/// For a file without the dynamo signature or an smp.export sidecar, the
/// warnings about the float initializers smp trains (`trained`) that the
/// file cannot say are parameters (UnsignedFiles.cpp): TorchScript folds
/// (torchScriptFoldsWarnings), one-element ones and
/// constant-valued ones that are no module's weight or bias.
std::vector<std::string>
unsignedFileWarnings(const onnx::GraphProto &g,
                     llvm::ArrayRef<FoldCandidate> trained);
/// Whether node `n`, named by the TorchScript exporter after its modules
/// (`/enc/ffn_1/Add`), runs in the module that owns parameter `param`
/// (`enc.ffn.bias`), a repeated call's scope suffix (`_1`) allowed: every
/// reader of a shared module's parameter does (ALBERT's layer, called once
/// a layer), a separate module's does not (UnsignedFiles.cpp).
bool readByItsModule(const onnx::NodeProto &n, llvm::StringRef param);

/// Whether the TorchScript exporter's `copy = Identity(source)` marker is
/// a repeated call's read of one tensor, not a merged copy of another
/// parameter: `copy` is a name the exporter made up (a merged parameter's
/// marker carries its state_dict name), and every reader of `copy` runs
/// where a reader of `source` does,
/// with a call's scope suffix (`/block/fc1_2/MatMul` beside
/// `/block/fc1/MatMul`: a shared block's transposed weight, folded once a
/// call, the equal folds written as markers; UnsignedFiles.cpp).
bool repeatedCallCopy(const onnx::GraphProto &g,
                      const onnx::NodeProto &identity);

/// Appends node `name`: `out` = `in` as it is (Identity) or, `transposed`,
/// the matrix's transpose (Transpose, perm [1, 0]): how the importer reads
/// a tied copy from its weight.
void addCopyNode(onnx::GraphProto &g, const std::string &name,
                 const std::string &in, const std::string &out,
                 bool transposed);
/// Gives initializer i the name `name`, the dims `dims` and the raw bytes
/// `raw` (its typed and external storage cleared), and takes its old name
/// off the graph's inputs: a node computes that value from it now
/// (FoldedParameters.cpp).
void refillInitializer(onnx::GraphProto &g, int i, const std::string &name,
                       llvm::ArrayRef<int64_t> dims, std::string raw);

/// The transpose of a row-major [rows, cols] matrix's bytes.
std::string transposeMatrix(llvm::StringRef bytes, int64_t rows, int64_t cols,
                            int64_t elementSize);
/// A float matrix initializer, for findTiedBlocks.
struct MatrixView {
  llvm::StringRef name;
  int64_t rows = 0, cols = 0, elementSize = 0;
  int32_t type = 0; // onnx::TensorProto::DataType
  llvm::StringRef bytes;
};
/// Rows [firstRow, firstRow + rows) of initializer `holder` (holderRows
/// rows) hold `source`'s values, or their transpose.
struct TiedBlock {
  std::string holder, source;
  bool transposed = false;
  int64_t firstRow = 0, rows = 0, holderRows = 0;
};
/// The initializers among `inits` that `holder` accepts (folds: a name an
/// exporter made up, or a dynamo fold whose record names the source) and
/// whose leading or trailing rows hold another of `inits`, or its
/// transpose, beside other rows (TiedBlocks.cpp: MobileBERT's folded
/// `cat([decoder.weight.t(), dense.weight])`, its decoder tied to the
/// word embeddings).
std::vector<TiedBlock> findTiedBlocks(
    llvm::ArrayRef<MatrixView> inits,
    llvm::function_ref<bool(const MatrixView &holder, const MatrixView &source)>
        holder);
/// Rewrites the fold `b.holder` (`bytes`, elements of `elementSize`) as
/// Concat of the tied source (transposed where it is) and a new parameter
/// `<holder>#rest` holding its other rows, which replaces the holder's
/// initializer in place (same index); records a "tied-block" origin (and a
/// "renamed" one naming PyTorch's parameter `torchName` where given) and
/// warns (naming --untie unless the exporter's record names the weight:
/// `recorded`). Returns the new parameter's name and bytes.
std::pair<std::string, std::string>
splitTiedBlock(onnx::GraphProto &g, const TiedBlock &b, llvm::StringRef bytes,
               int64_t elementSize, bool recorded, llvm::StringRef torchName,
               std::vector<ParamOrigin> &origins,
               std::vector<std::string> &warnings);

/// The refusal of `--untie NAME` where NAME is a fold the dynamo exporter's
/// record says holds a tied weight (a "tied-block" origin in `origins`,
/// which only splitFoldedTiedBlocks makes for files with that record: in
/// other files --untie keeps the fold whole), or "".
std::string recordedTieUntied(llvm::ArrayRef<ParamOrigin> origins,
                              llvm::StringRef untie);

/// Whether `name` is one an exporter made up (`onnx::Mul_7`, `val_3`), not
/// a module's parameter name (ScalarParameters.cpp).
bool generatedName(llvm::StringRef name);

/// Whether the one-element float initializer `name` is a parameter (under
/// --train): with an smp.export sidecar (`exported`), one it maps to a
/// state_dict key; with the dynamo graph signature (`sigTargets`, its
/// PARAMETER targets), one it lists; otherwise one named as a state_dict
/// key, not a name an exporter made up (ScalarParameters.cpp).
bool scalarParameter(llvm::StringRef name,
                     const std::optional<llvm::StringSet<>> &exported,
                     const std::set<std::string> &sigTargets);

/// The initializers PRelu nodes read as their slope, directly or through
/// an Identity copy: parameters whatever their name or size
/// (ScalarParameters.cpp).
std::set<std::string> preluSlopes(const onnx::GraphProto &g);

/// Rewrites `model` in memory so that every parameter is as the framework
/// had it (the rules above, overridden by `options.tie`/`options.untie`);
/// returns what it changed and appends a warning for each guess. Under
/// training, adds to `scalarParameters` the one-element float initializers
/// that are parameters (others are constants): named as a PyTorch
/// state_dict key, or a PARAMETER of the dynamo signature; not frozen.
llvm::Expected<std::vector<ParamOrigin>>
resolveSharedInitializers(onnx::ModelProto &model, llvm::StringRef path,
                          mlir::MLIRContext *ctx, const ImportOptions &options,
                          std::vector<std::string> &warnings,
                          std::set<std::string> &scalarParameters);

/// Under training: for each embedding table (a float initializer read by
/// a Gather on axis 0 at indices from the data) whose one all-zero row is
/// what nn.Embedding(padding_idx=row) leaves and the file does not name,
/// adds the row to `options.paddingRows` with a warning; skips the tables
/// in `options.noPaddingRows` (PaddingRows.cpp).
llvm::Error inferPaddingRows(const onnx::GraphProto &g,
                             llvm::StringRef modelDir, mlir::MLIRContext *ctx,
                             ImportOptions &options,
                             std::vector<std::string> &warnings);

/// Records `origins` on the imported module: `smp.init_from` on each untied
/// parameter and the `smp.param_origins` module attribute.
void recordParamOrigins(mlir::ModuleOp module,
                        const std::vector<ParamOrigin> &origins);

/// Marks each frozen argument whose initializer holds a causal mask (every
/// trailing [S, S] slice: one value on and below the diagonal, another
/// above) with smp.causal_values, read from the file's bytes
/// (CausalBuffers.cpp).
llvm::Error recordCausalBuffers(mlir::ModuleOp module,
                                const onnx::GraphProto &graph,
                                llvm::StringRef modelDir);

} // namespace smp::onnx_frontend

#endif // SMP_LIB_FRONTEND_ONNX_SHAREDINITIALIZERS_H
