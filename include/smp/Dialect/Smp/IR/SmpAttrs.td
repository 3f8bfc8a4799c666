//===- SmpAttrs.td - smp dialect attributes ----------------*- tablegen -*-===//

#ifndef SMP_DIALECT_SMP_IR_SMPATTRS_TD
#define SMP_DIALECT_SMP_IR_SMPATTRS_TD

include "smp/Dialect/Smp/IR/SmpBase.td"
include "mlir/IR/EnumAttr.td"

def Smp_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "GELU approximation", [
      I32EnumAttrCase<"none", 0>,
      I32EnumAttrCase<"tanh", 1>
    ]> {
  let cppNamespace = "::smp";
  let genSpecializedAttr = 0;
}
def Smp_GeluApproximationAttr
    : EnumAttr<Smp_Dialect, Smp_GeluApproximation, "gelu_approximation">;

def Smp_Reduction : I32EnumAttr<"Reduction", "loss reduction", [
      I32EnumAttrCase<"none", 0>,
      I32EnumAttrCase<"sum", 1>,
      I32EnumAttrCase<"mean", 2>
    ]> {
  let cppNamespace = "::smp";
  let genSpecializedAttr = 0;
}
def Smp_ReductionAttr : EnumAttr<Smp_Dialect, Smp_Reduction, "reduction">;

def Smp_LayoutAttr : AttrDef<Smp_Dialect, "Layout"> {
  let mnemonic = "layout";
  let summary = "How a value is split over the device grid's tp and dp axes";
  let description = [{
    The layout of a function argument or result (the attribute
    `smp.layout`): which part of a global tensor each rank holds, as
    upstream's `#shard.sharding` says how a value is split over a grid's
    axes. The value's type is this rank's part. Two axes split values:

    `tp = split(dim = D[, blocks = B][, full = F])`: tensor parallelism.
    Dim D of the global tensor is viewed as [B, tp, n] and this rank holds
    [:, tp_rank, :] (B > 1: a fused QKV-style weight, each block split on
    its own). `full = F` is the global extent of dim D where tp does not
    divide it (a vocabulary: each rank holds ceil(F / tp) rows, the last
    zero-padded); without it the global extent is tp times the local one.

    `dp = chunk(of = [S...])`: ZeRO-1 over the data-parallel ranks. The
    value is this rank's chunk of a tensor of shape S (the tensor-parallel
    slice when `tp` is given too) flattened and zero-padded to a multiple of
    dp: a 1-D tensor of ceil(prod(S) / dp) elements.

    ```mlir
    %w: tensor<768x768xf32> {smp.layout = #smp.layout<tp = split(dim = 1, blocks = 3)>}
    %e: tensor<25129x768xf32> {smp.layout = #smp.layout<tp = split(dim = 0, full = 50257)>}
    %m: tensor<294912xf32> {smp.layout = #smp.layout<tp = split(dim = 1), dp = chunk(of = [768, 768])>}
    ```

    See docs/layouts.md.
  }];
  let parameters = (ins
    "int64_t":$tpDim,
    "int64_t":$tpBlocks,
    "int64_t":$tpFull,
    "bool":$dpChunked,
    ArrayRefParameter<"int64_t", "the shape a dp chunk is a chunk of">:$dpChunkOf
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Split over tp on `dim` (blocks fused blocks; `full` the global
    /// extent where tp does not divide it, 0 otherwise).
    static LayoutAttr split(::mlir::MLIRContext *ctx, int64_t dim,
                            int64_t blocks = 1, int64_t full = 0);
    /// A ZeRO-1 chunk over dp of a tensor of shape `of`.
    static LayoutAttr chunk(::mlir::MLIRContext *ctx,
                            ::llvm::ArrayRef<int64_t> of);
    /// This layout's tp split (null when it has none) with a dp chunk of
    /// `of` added.
    static LayoutAttr chunkOf(LayoutAttr tp, ::mlir::MLIRContext *ctx,
                              ::llvm::ArrayRef<int64_t> of);
    /// Whether the value is split over tp.
    bool hasTpSplit() const { return getTpDim() >= 0; }
    /// The global extent of the split dim whose local extent is `local`
    /// over `tp` ranks.
    int64_t fullExtent(int64_t local, int64_t tp) const {
      return getTpFull() ? getTpFull() : local * tp;
    }
    /// The global shape of a tensor-parallel slice of shape `local`.
    ::llvm::SmallVector<int64_t> fullShape(::llvm::ArrayRef<int64_t> local,
                                           int64_t tp) const;
  }];
}

#endif // SMP_DIALECT_SMP_IR_SMPATTRS_TD
