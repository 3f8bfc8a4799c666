//===- SmpOps.td - smp dialect operations ------------------*- tablegen -*-===//
//
// Every op verifies its operands and infers its result type, so the type a
// frontend or pass writes is always checked against the op's semantics.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_DIALECT_SMP_IR_SMPOPS_TD
#define SMP_DIALECT_SMP_IR_SMPOPS_TD

include "smp/Dialect/Smp/IR/SmpBase.td"
include "smp/Dialect/Smp/IR/SmpAttrs.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ViewLikeInterface.td"

def Smp_Tensor : RankedTensorOf<[AnyType]>;
def Smp_FloatTensor : RankedTensorOf<[AnyFloat]>;
def Smp_IntTensor : RankedTensorOf<[AnySignlessInteger]>;
def Smp_BoolTensor : RankedTensorOf<[I1]>;
/// The 16-bit floats (the types cuBLASLt's GELU epilogues are used for).
def Smp_HalfTensor : RankedTensorOf<[F16, BF16]>;

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

def Smp_ConstantOp : Smp_Op<"constant", [ConstantLike, Pure,
    AllTypesMatch<["value", "result"]>]> {
  let summary = "A small constant tensor (shapes, masks, scalars)";
  let description = [{
    Holds a constant whose bytes live in the IR. Frontends only create these
    for small values; parameters are function arguments instead.
  }];
  let arguments = (ins TypedAttrInterface:$value);
  let results = (outs Smp_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class Smp_UnaryOp<string mnemonic, Type type, list<Trait> traits = []>
    : Smp_Op<mnemonic, !listconcat([Pure, SameOperandsAndResultType,
                                    Elementwise], traits)> {
  let arguments = (ins type:$input);
  let results = (outs type:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasFolder = 1;
}

def Smp_NegOp : Smp_UnaryOp<"neg", Smp_Tensor> { let summary = "-x"; }
def Smp_AbsOp : Smp_UnaryOp<"abs", Smp_Tensor> { let summary = "|x|"; }
def Smp_ExpOp : Smp_UnaryOp<"exp", Smp_FloatTensor> { let summary = "e^x"; }
def Smp_LogOp : Smp_UnaryOp<"log", Smp_FloatTensor> { let summary = "ln x"; }
def Smp_SqrtOp : Smp_UnaryOp<"sqrt", Smp_FloatTensor> { let summary = "sqrt"; }
def Smp_RsqrtOp : Smp_UnaryOp<"rsqrt", Smp_FloatTensor> {
  let summary = "1 / sqrt(x)";
}
def Smp_ReciprocalOp : Smp_UnaryOp<"reciprocal", Smp_FloatTensor> {
  let summary = "1 / x";
}
def Smp_TanhOp : Smp_UnaryOp<"tanh", Smp_FloatTensor> { let summary = "tanh"; }
def Smp_ErfOp : Smp_UnaryOp<"erf", Smp_FloatTensor> { let summary = "erf"; }
def Smp_SigmoidOp : Smp_UnaryOp<"sigmoid", Smp_FloatTensor> {
  let summary = "1 / (1 + e^-x)";
}
def Smp_SiluOp : Smp_UnaryOp<"silu", Smp_FloatTensor> {
  let summary = "x * sigmoid(x)";
}
def Smp_ReluOp : Smp_UnaryOp<"relu", Smp_Tensor> { let summary = "max(x, 0)"; }
def Smp_SinOp : Smp_UnaryOp<"sin", Smp_FloatTensor> { let summary = "sin"; }
def Smp_CosOp : Smp_UnaryOp<"cos", Smp_FloatTensor> { let summary = "cos"; }
def Smp_NotOp : Smp_UnaryOp<"not", Smp_BoolTensor> { let summary = "!x"; }

def Smp_LeakyReluOp : Smp_Op<"leaky_relu", [Pure, SameOperandsAndResultType,
                                            Elementwise]> {
  let summary = "x >= 0 ? x : alpha * x";
  let arguments = (ins Smp_FloatTensor:$input, F32Attr:$alpha);
  let results = (outs Smp_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

// Where a dropout's tensor sits in the global one (smp.dropout's
// description): smp.dropout's attributes, and those of the fused attention
// ops' dropout on their probabilities. Passes read and write them on any op
// through DropoutKey.h.
defvar Smp_DropoutPlacement = (ins DefaultValuedAttr<I64Attr, "0">:$samples,
                                   DefaultValuedAttr<I64Attr, "0">:$sample_offset,
                                   DefaultValuedAttr<I64Attr, "0">:$shard_samples,
                                   DefaultValuedAttr<I64Attr, "-1">:$tp_dim,
                                   DefaultValuedAttr<I64Attr, "1">:$tp_parts,
                                   DefaultValuedAttr<I64Attr, "1">:$tp_blocks);

def Smp_DropoutOp : Smp_Op<"dropout", [Pure, SameOperandsAndResultType,
                                       Elementwise]> {
  let summary = "keep ? x / (1 - ratio) : 0 with a counter-based random mask";
  let description = [{
    Training-mode dropout (ONNX Dropout with training_mode = 1, PyTorch's
    nn.Dropout in train()). The mask is a function of the run's seed, the
    step, `stream` (which dropout of the model) and the element's index in
    the global tensor: Philox4x32-10 (kernels/common/Dropout.h), so it is
    drawn again rather than stored: the gradient is this op on dy, and a
    recomputed forward draws the same mask. The other attributes place this
    op's tensor in the global one, so that every plan draws the mask one
    device draws: `samples` samples along dim 0 (0: none, or no split of
    them), the first of them `sample_offset` within the rank's
    `shard_samples` (the artifact writer adds the rank's data shard), and a
    tensor-parallel split of dim `tp_dim` (-1: none) into `tp_parts` of
    `tp_blocks` blocks each (the writer binds each rank's `tp_index`).
  }];
  let arguments = !con((ins Smp_FloatTensor:$input, F32Attr:$ratio,
                            I64Attr:$stream),
                       Smp_DropoutPlacement);
  let results = (outs Smp_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Smp_GeluOp : Smp_Op<"gelu", [Pure, SameOperandsAndResultType,
                                 Elementwise]> {
  let summary = "Gaussian error linear unit (exact or tanh approximation)";
  let arguments = (ins Smp_FloatTensor:$input,
                   DefaultValuedAttr<Smp_GeluApproximationAttr,
                       "::smp::GeluApproximation::none">:$approximate);
  let results = (outs Smp_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Smp_CastOp : Smp_Op<"cast", [Pure, SameOperandsAndResultShape,
                                 Elementwise]> {
  let summary = "Element type conversion (ONNX Cast semantics)";
  let arguments = (ins Smp_Tensor:$input);
  let results = (outs Smp_Tensor:$result);
  let assemblyFormat =
      "$input attr-dict `:` type($input) `to` type($result)";
  let hasFolder = 1;
}

def Smp_CastMultiOp : Smp_Op<"cast_multi", [Pure]> {
  let summary = "smp.cast of many tensors at once (one kernel launch)";
  let description = [{
    results[i] = cast(inputs[i]) for each i: the bits of the separate casts
    (between float types); on a GPU one launch instead of one a tensor.
    `smp-multi-tensor` forms it from the casts of the step's arguments
    (mixed precision's 16-bit copies of the f32 parameters).
  }];
  let arguments = (ins Variadic<Smp_FloatTensor>:$inputs);
  let results = (outs Variadic<Smp_FloatTensor>:$results);
  let assemblyFormat = [{
    $inputs attr-dict `:` functional-type($inputs, $results)
  }];
  let hasVerifier = 1;
}

def Smp_AddMultiOp : Smp_Op<"add_multi", [Pure]> {
  let summary = "f32 sums of many pairs of same-shape tensors at once";
  let description = [{
    With N results, inputs[i] and inputs[N + i] are the i-th pair:
    results[i] = f32(inputs[i]) + f32(inputs[N + i]), each operand f32, f16
    or bf16 of its result's shape (widening is exact: the bits of the casts
    and the add it replaces); on a GPU one launch instead of one a tensor.
    `smp-multi-tensor` forms it from the accumulation of 16-bit gradients
    over micro-batches (`add(acc, cast(g))`: a cast and an add a parameter
    and micro-batch). A result may take its f32 first operand's storage.
  }];
  let arguments = (ins Variadic<Smp_FloatTensor>:$inputs);
  let results = (outs Variadic<Smp_FloatTensor>:$results);
  let assemblyFormat = [{
    $inputs attr-dict `:` functional-type($inputs, $results)
  }];
  let extraClassDeclaration = [{
    /// The first and second operands of pair `i`.
    ::mlir::Value getLhs(unsigned i) { return getInputs()[i]; }
    ::mlir::Value getRhs(unsigned i) {
      return getInputs()[getResults().size() + i];
    }
  }];
  let hasVerifier = 1;
}

def Smp_AllSliceMultiOp : Smp_Op<"all_slice_multi", [Pure]> {
  let summary = "shard.all_slice of many tensors along dim 0 at once";
  let description = [{
    results[i] = this rank's chunk of inputs[i]: dim 0 cut in equal parts,
    one per rank of `grid` along `grid_axes`, as `shard.all_slice` with
    slice_axis 0 takes it; one instruction (on a GPU one launch) instead of
    one a tensor. `smp-multi-tensor` forms it from ZeRO-1/2's slices of
    the parameters for their update (GPT-2 124M: 148).
  }];
  let arguments = (ins Variadic<Smp_Tensor>:$inputs, FlatSymbolRefAttr:$grid,
                   DenseI16ArrayAttr:$grid_axes);
  let results = (outs Variadic<Smp_Tensor>:$results);
  let assemblyFormat = [{
    $inputs `on` $grid `grid_axes` `=` $grid_axes attr-dict `:`
    functional-type($inputs, $results)
  }];
  let hasVerifier = 1;
}

/// Binary elementwise ops broadcast their operands numpy-style.
class Smp_BinaryOp<string mnemonic, Type operandType, Type resultType,
                   list<Trait> traits = []>
    : Smp_Op<mnemonic, !listconcat([Pure, InferTypeOpAdaptor,
                                    Smp_BroadcastingElementwise], traits)> {
  let arguments = (ins operandType:$lhs, operandType:$rhs);
  let results = (outs resultType:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
  let hasFolder = 1;
}

class Smp_ArithOp<string mnemonic, list<Trait> traits = []>
    : Smp_BinaryOp<mnemonic, Smp_Tensor, Smp_Tensor, traits>;
class Smp_CompareOp<string mnemonic>
    : Smp_BinaryOp<mnemonic, Smp_Tensor, Smp_BoolTensor>;
class Smp_LogicalOp<string mnemonic>
    : Smp_BinaryOp<mnemonic, Smp_BoolTensor, Smp_BoolTensor>;

def Smp_AddOp : Smp_ArithOp<"add", [Commutative]> { let summary = "a + b"; }
def Smp_SubOp : Smp_ArithOp<"sub"> { let summary = "a - b"; }
def Smp_MulOp : Smp_ArithOp<"mul", [Commutative]> { let summary = "a * b"; }
def Smp_DivOp : Smp_ArithOp<"div"> {
  let summary = "a / b (integer division truncates)";
}
def Smp_PowOp : Smp_ArithOp<"pow"> { let summary = "a ^ b"; }
/// max and min: NaN wins. Their gradient goes to the operand that wins; a
/// tie splits it in half (torch.maximum / torch.minimum), or with `strict`
/// gives it to neither (a clamp's bound: nn.ReLU6 and nn.Hardtanh pass no
/// gradient at their bounds). `strict` changes only the gradient.
class Smp_MinMaxOp<string mnemonic> : Smp_ArithOp<mnemonic, [Commutative]> {
  let arguments = (ins Smp_Tensor:$lhs, Smp_Tensor:$rhs, UnitAttr:$strict);
}
def Smp_MaxOp : Smp_MinMaxOp<"max"> { let summary = "max(a, b)"; }
def Smp_MinOp : Smp_MinMaxOp<"min"> { let summary = "min(a, b)"; }
def Smp_EqualOp : Smp_CompareOp<"equal"> { let summary = "a == b"; }
def Smp_LessOp : Smp_CompareOp<"less"> { let summary = "a < b"; }
def Smp_GreaterOp : Smp_CompareOp<"greater"> { let summary = "a > b"; }
def Smp_AndOp : Smp_LogicalOp<"and"> { let summary = "a && b"; }
def Smp_OrOp : Smp_LogicalOp<"or"> { let summary = "a || b"; }

def Smp_ModOp : Smp_Op<"mod", [Pure, InferTypeOpAdaptor,
                               Smp_BroadcastingElementwise]> {
  let summary = "Remainder of a / b (ONNX Mod), broadcasting";
  let description = [{
    With `fmod` false: the floor remainder, a - floor(a / b) * b, whose sign
    is the divisor's (Python's `%`, ONNX Mod with fmod=0). With `fmod` true:
    C's fmod, a - trunc(a / b) * b, whose sign is the dividend's. Integers or
    floats; an integer remainder by zero is a runtime error, a float one NaN.
  }];
  let arguments = (ins Smp_Tensor:$lhs, Smp_Tensor:$rhs,
                   DefaultValuedAttr<BoolAttr, "false">:$fmod);
  let results = (outs Smp_Tensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
  let hasFolder = 1;
  let hasVerifier = 1;
}

def Smp_WhereOp : Smp_Op<"where", [Pure, InferTypeOpAdaptor,
                                   Smp_BroadcastingElementwise]> {
  let summary = "cond ? a : b, broadcasting all three";
  let arguments = (ins Smp_BoolTensor:$condition, Smp_Tensor:$lhs,
                   Smp_Tensor:$rhs);
  let results = (outs Smp_Tensor:$result);
  let assemblyFormat = [{
    $condition `,` $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Reductions and normalisation
//===----------------------------------------------------------------------===//

class Smp_ReduceOp<string mnemonic> : Smp_Op<mnemonic, [Pure,
                                                        InferTypeOpAdaptor]> {
  let arguments = (ins Smp_Tensor:$input, DenseI64ArrayAttr:$axes,
                   DefaultValuedAttr<BoolAttr, "true">:$keepdims);
  let results = (outs Smp_Tensor:$result);
  let assemblyFormat = [{
    $input attr-dict `:` type($input) `->` type($result)
  }];
}
def Smp_ReduceSumOp : Smp_ReduceOp<"reduce_sum"> { let summary = "sum"; }

def Smp_SumSquaresOp : Smp_Op<"sum_squares", [Pure]> {
  let summary = "The sum of the squares of every element of its inputs";
  let description = [{
    For each f32 input in order, the sum of its squared elements as
    `reduce_sum(mul(x, x))` over every dim computes it (each square rounded
    to f32, summed in double, rounded to f32), and those sums added in order
    in f32: the chain of adds `smp-fuse-sum-squares` replaces
    (the gradient norm's, one term per parameter). One op instead of three
    per input: on a GPU a few launches instead of three per parameter. An
    f16 or bf16 input is read widened to f32 (the bits of its f32 copy's
    term; `smp-fuse-grad-casts` drops those copies).
  }];
  let arguments = (ins Variadic<Smp_FloatTensor>:$inputs);
  let results = (outs Smp_FloatTensor:$result);
  let assemblyFormat = [{
    $inputs attr-dict `:` functional-type($inputs, results)
  }];
  let hasVerifier = 1;
}
def Smp_ReduceMeanOp : Smp_ReduceOp<"reduce_mean"> { let summary = "mean"; }
def Smp_ReduceMaxOp : Smp_ReduceOp<"reduce_max"> { let summary = "max"; }

class Smp_SoftmaxLikeOp<string mnemonic>
    : Smp_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let arguments = (ins Smp_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Smp_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}
def Smp_SoftmaxOp : Smp_SoftmaxLikeOp<"softmax"> {
  let summary = "softmax along one axis";
}
def Smp_LogSoftmaxOp : Smp_SoftmaxLikeOp<"log_softmax"> {
  let summary = "log(softmax) along one axis";
}

def Smp_CumSumOp : Smp_Op<"cumsum", [Pure, SameOperandsAndResultType]> {
  let summary = "Cumulative sum along one axis (ONNX CumSum)";
  let description = [{
    result[.., i, ..] = sum of input[.., j, ..] over j <= i along `axis`
    (negative counts from the end); `exclusive` leaves out j = i, `reverse`
    sums from the end (j >= i). Floats accumulate in double, integers wrap.
  }];
  let arguments = (ins Smp_Tensor:$input, I64Attr:$axis,
                   DefaultValuedAttr<BoolAttr, "false">:$exclusive,
                   DefaultValuedAttr<BoolAttr, "false">:$reverse);
  let results = (outs Smp_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasFolder = 1;
  let hasVerifier = 1;
}

def Smp_LayerNormOp : Smp_Op<"layer_norm", [Pure,
                                            InferTypeOpAdaptor]> {
  let summary = "Layer normalisation over the dims from `axis` to the end";
  let arguments = (ins Smp_FloatTensor:$input, Smp_FloatTensor:$scale,
                   Optional<Smp_FloatTensor>:$bias, I64Attr:$axis,
                   F32Attr:$epsilon);
  let results = (outs Smp_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Smp_RmsNormOp : Smp_Op<"rms_norm", [Pure, InferTypeOpAdaptor]> {
  let summary = "x * rsqrt(mean(x^2, last dim) + eps) * scale";
  let arguments = (ins Smp_FloatTensor:$input, Smp_FloatTensor:$scale,
                   F32Attr:$epsilon);
  let results = (outs Smp_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale attr-dict `:` functional-type(operands, results)
  }];
}

def Smp_BatchNormOp : Smp_Op<"batch_norm", [Pure, InferTypeOpAdaptor]> {
  let summary = "Batch normalisation over channel dim 1 with given statistics";
  let description = [{
    `(x - mean) * rsqrt(variance + epsilon) * scale + bias`, per channel. In
    `@main` the statistics are the running ones (inference). The training
    step (`smp-build-train-step`) passes the batch's statistics instead and
    updates the running ones with `momentum` (ONNX's convention:
    `running = running * momentum + batch * (1 - momentum)`, PyTorch's
    momentum 0.1 exports as 0.9); the VJP covers every operand, so the
    gradient flows through batch statistics too.
  }];
  let arguments = (ins Smp_FloatTensor:$input, Smp_FloatTensor:$scale,
                   Smp_FloatTensor:$bias, Smp_FloatTensor:$mean,
                   Smp_FloatTensor:$variance, F32Attr:$epsilon,
                   DefaultValuedAttr<F32Attr, "0.9f">:$momentum);
  let results = (outs Smp_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale `,` $bias `,` $mean `,` $variance attr-dict `:`
    functional-type(operands, results)
  }];
}

def Smp_CrossEntropyOp : Smp_Op<"cross_entropy", [Pure,
    InferTypeOpAdaptorWithIsCompatible]> {
  let summary = "Softmax cross-entropy of logits [..., C] against labels [...]";
  let description = [{
    Labels equal to `ignore_index` contribute nothing; `mean` divides by the
    number of labels that are not ignored (PyTorch semantics). With class
    `weights` ([C]) each loss is scaled by its label's weight and `mean`
    divides by the sum of those weights. The loss has the logits' element
    type, or f32 for f16/bf16 logits (`smp-fuse-loss-casts`: the loss of a
    bf16 model's logits without their f32 copy). With `classes` = C, only
    the first C values of each row of logits are its logits (labels and
    weights range over C); the rest of the last dim is padding that no loss
    reads (`smp-pad-classes` pads a product's vocabulary for aligned
    GEMMs).
  }];
  let arguments = (ins Smp_FloatTensor:$logits, Smp_IntTensor:$labels,
                   Optional<Smp_FloatTensor>:$weights,
                   DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
                   DefaultValuedAttr<Smp_ReductionAttr,
                       "::smp::Reduction::mean">:$reduction,
                   OptionalAttr<I64Attr>:$classes);
  let results = (outs Smp_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels (`,` $weights^)? attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def Smp_ReshapeOp : Smp_Op<"reshape", [Pure,
    DeclareOpInterfaceMethods<ViewLikeOpInterface>]> {
  let summary = "Reshape to the (static) result type";
  let arguments = (ins Smp_Tensor:$input);
  let results = (outs Smp_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Smp_TransposeOp : Smp_Op<"transpose", [Pure, InferTypeOpAdaptor]> {
  let summary = "Permute dimensions: result dim i = input dim perm[i]";
  let arguments = (ins Smp_Tensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs Smp_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasFolder = 1;
  // The transpose of a matrix product becomes the product of the swapped,
  // flag-flipped operands (no transposed copy of a weight gradient).
  let hasCanonicalizer = 1;
}

def Smp_ExpandOp : Smp_Op<"expand", [Pure]> {
  let summary = "Broadcast to the (static) result type";
  let arguments = (ins Smp_Tensor:$input);
  let results = (outs Smp_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Smp_TileOp : Smp_Op<"tile", [Pure, InferTypeOpAdaptor]> {
  let summary = "Repeat the input repeats[d] times along each dim (ONNX Tile)";
  let description = [{
    result dim d = input dim d * repeats[d] (repeats non-negative, one per
    dim); result[i..] = input[i[d] mod input dim d ..].
  }];
  let arguments = (ins Smp_Tensor:$input, DenseI64ArrayAttr:$repeats);
  let results = (outs Smp_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasFolder = 1;
}

def Smp_SliceOp : Smp_Op<"slice", [Pure, InferTypeOpAdaptor]> {
  let summary = "Strided slice with static, normalised bounds per dimension";
  let description = [{
    For each dimension d, takes indices start[d], start[d] + step[d], ... up
    to (excluding) limit[d]. Negative steps walk backwards; bounds are already
    clamped to the dimension (ONNX normalisation happens in the frontend).
  }];
  let arguments = (ins Smp_Tensor:$input, DenseI64ArrayAttr:$starts,
                   DenseI64ArrayAttr:$limits, DenseI64ArrayAttr:$steps);
  let results = (outs Smp_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasFolder = 1;
}

def Smp_ConcatOp : Smp_Op<"concat", [Pure, InferTypeOpAdaptor]> {
  let summary = "Concatenate along one axis";
  let arguments = (ins Variadic<Smp_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs Smp_Tensor:$result);
  let assemblyFormat = [{
    $inputs attr-dict `:` functional-type($inputs, results)
  }];
  let hasFolder = 1;
}

def Smp_SplitOp : Smp_Op<"split", [Pure, InferTypeOpAdaptor]> {
  let summary = "Split along one axis into pieces of the given sizes";
  let arguments = (ins Smp_Tensor:$input, I64Attr:$axis,
                   DenseI64ArrayAttr:$sizes);
  let results = (outs Variadic<Smp_Tensor>:$results);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($results)";
  // A constant splits into constants (shape computations: torch 1.13's
  // repeat_interleave builds its Expand shape through one).
  let hasFolder = 1;
}

def Smp_GatherOp : Smp_Op<"gather", [Pure, InferTypeOpAdaptor]> {
  let summary = "Gather slices of data along axis (embedding lookup at 0)";
  let description = [{
    result = data[:axis] ++ indices.shape ++ data[axis+1:]. Negative indices
    count from the end as in ONNX. `padding_idx` (axis 0 only): positions
    whose index equals it give `data` no gradient, as PyTorch's
    `nn.Embedding(padding_idx=...)` (read from the dynamo exporter's
    metadata); the forward is unchanged.
  }];
  let arguments = (ins Smp_Tensor:$data, Smp_IntTensor:$indices,
                   I64Attr:$axis, OptionalAttr<I64Attr>:$padding_idx);
  let results = (outs Smp_Tensor:$result);
  let builders = [
    OpBuilder<(ins "::mlir::Value":$data, "::mlir::Value":$indices,
                   "::mlir::IntegerAttr":$axis), [{
      build($_builder, $_state, data, indices, axis, ::mlir::IntegerAttr());
    }]>
  ];
  let assemblyFormat = [{
    $data `,` $indices attr-dict `:` functional-type(operands, results)
  }];
  let hasFolder = 1;
}

def Smp_GatherNdOp : Smp_Op<"gather_nd", [Pure, InferTypeOpAdaptor]> {
  let summary = "Gather slices of data at index tuples (ONNX GatherND)";
  let description = [{
    With b = `batch_dims` and k = the last dim of `indices`:
    result = indices.shape[:-1] ++ data.shape[b + k:], where result[i..] is
    the slice data[i[:b], indices[i..][0], ..., indices[i..][k-1], :] (the
    first b dims of data and indices are shared batch dims). Negative
    indices count from the end.
  }];
  let arguments = (ins Smp_Tensor:$data, Smp_IntTensor:$indices,
                   DefaultValuedAttr<I64Attr, "0">:$batch_dims);
  let results = (outs Smp_Tensor:$result);
  let assemblyFormat = [{
    $data `,` $indices attr-dict `:` functional-type(operands, results)
  }];
  let hasFolder = 1;
}

def Smp_GatherElementsOp : Smp_Op<"gather_elements", [Pure,
                                                       InferTypeOpAdaptor]> {
  let summary = "Gather single elements along one axis (ONNX GatherElements)";
  let description = [{
    result has the shape of `indices` (same rank as data; every dim but
    `axis` at most data's): result[i..] = data[i.. with i[axis] replaced by
    indices[i..]], PyTorch's torch.gather. Negative indices count from the
    end.
  }];
  let arguments = (ins Smp_Tensor:$data, Smp_IntTensor:$indices,
                   I64Attr:$axis);
  let results = (outs Smp_Tensor:$result);
  let assemblyFormat = [{
    $data `,` $indices attr-dict `:` functional-type(operands, results)
  }];
  let hasFolder = 1;
}

def Smp_TriluOp : Smp_Op<"trilu", [Pure, SameOperandsAndResultType]> {
  let summary = "Keep the upper or lower triangle (with diagonal offset k)";
  let arguments = (ins Smp_Tensor:$input, BoolAttr:$upper, I64Attr:$k);
  let results = (outs Smp_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Convolution and pooling (NC + spatial layout)
//===----------------------------------------------------------------------===//

def Smp_ConvOp : Smp_Op<"conv", [Pure,
                                 InferTypeOpAdaptor]> {
  let summary = "N-d grouped convolution, input [N, C, spatial...]";
  let description = [{
    `pads` holds the begin pads of every spatial dim followed by the end pads
    (ONNX order).
  }];
  let arguments = (ins Smp_FloatTensor:$input, Smp_FloatTensor:$weight,
                   Optional<Smp_FloatTensor>:$bias,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                   DenseI64ArrayAttr:$dilations, I64Attr:$group);
  let results = (outs Smp_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
}

class Smp_PoolOp<string mnemonic> : Smp_Op<mnemonic, [Pure,
                                                      InferTypeOpAdaptor]> {
  let arguments = (ins Smp_FloatTensor:$input,
                   DenseI64ArrayAttr:$kernel, DenseI64ArrayAttr:$strides,
                   DenseI64ArrayAttr:$pads, DenseI64ArrayAttr:$dilations,
                   DefaultValuedAttr<BoolAttr, "false">:$ceil_mode,
                   DefaultValuedAttr<BoolAttr, "false">:$count_include_pad);
  let results = (outs Smp_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}
def Smp_MaxPoolOp : Smp_PoolOp<"max_pool"> {
  let summary = "N-d max pooling, input [N, C, spatial...]";
}
def Smp_AvgPoolOp : Smp_PoolOp<"avg_pool"> {
  let summary = "N-d average pooling, input [N, C, spatial...]";
}

//===----------------------------------------------------------------------===//
// Point-to-point communication between pipeline ranks
//===----------------------------------------------------------------------===//

def Smp_SendOp : Smp_Op<"send", [MemoryEffects<[MemWrite]>]> {
  let summary = "Send a tensor to another pipeline rank";
  let description = [{
    Sends `input` to the pipeline rank `peer` (the rank's coordinate on the
    grid's pp axis; the other coordinates are this rank's). The message is
    matched by the `smp.recv` with the same `tag` on the peer. The send is
    eager: the runtime copies the bytes and returns, so a send never waits
    for its receiver.
  }];
  let arguments = (ins Smp_Tensor:$input, I64Attr:$peer, I64Attr:$tag);
  let assemblyFormat = [{
    $input `to` $peer `tag` $tag attr-dict `:` type($input)
  }];
}

def Smp_RecvOp : Smp_Op<"recv", [MemoryEffects<[MemWrite]>]> {
  let summary = "Receive a tensor from another pipeline rank";
  let description = [{
    Waits for the tensor that pipeline rank `peer` sends with `tag`; its
    type must be the sent one.
  }];
  let arguments = (ins I64Attr:$peer, I64Attr:$tag);
  let results = (outs Smp_Tensor:$result);
  let assemblyFormat = [{
    `from` $peer `tag` $tag attr-dict `:` type($result)
  }];
}

//===----------------------------------------------------------------------===//
// Tensor parallelism
//===----------------------------------------------------------------------===//

def Smp_TpCopyOp : Smp_Op<"tp_copy", [SameOperandsAndResultType,
    DeclareOpInterfaceMethods<ViewLikeOpInterface>]> {
  let summary = "Enter a tensor-parallel region (Megatron's f)";
  let description = [{
    The identity in the forward; its gradient is summed over the ranks of
    grid `@tp` (each rank's column-parallel layers see the whole input but
    contribute only part of its gradient). The exit of a region (Megatron's
    g) is a `shard.all_reduce` on `@tp`, whose gradient is the identity.
  }];
  let arguments = (ins Smp_Tensor:$input);
  let results = (outs Smp_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Smp_TpRankOp : Smp_Op<"tp_rank", [Pure]> {
  let summary = "This rank's coordinate on grid @tp (an i64 scalar)";
  let description = [{
    The index of this rank among its tensor-parallel peers: the artifact
    writer, which writes each tensor-parallel rank's program, turns it into
    that rank's constant. Vocab-parallel layers use it to find the rows of
    the vocabulary this rank holds.
  }];
  let results = (outs RankedTensorOf<[I64]>:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Activation offloading
//===----------------------------------------------------------------------===//

def Smp_OffloadOp : Smp_Op<"offload", [SameOperandsAndResultType,
                                       MemoryEffects<[MemWrite]>]> {
  let summary = "Copy an activation to host memory";
  let description = [{
    The result lives in the rank's host pool, not in device memory, until a
    `smp.prefetch` copies it back for the backward. Written by
    smp-build-train-step{offload}.
  }];
  let arguments = (ins Smp_Tensor:$input);
  let results = (outs Smp_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Smp_PrefetchOp : Smp_Op<"prefetch", [SameOperandsAndResultType,
                                         MemoryEffects<[MemWrite]>]> {
  let summary = "Copy an offloaded activation back to device memory";
  let arguments = (ins Smp_Tensor:$input);
  let results = (outs Smp_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

include "smp/Dialect/Smp/IR/SmpLinalgOps.td"
include "smp/Dialect/Smp/IR/SmpTrainingOps.td"
include "smp/Dialect/Smp/IR/SmpAttentionOps.td"

#endif // SMP_DIALECT_SMP_IR_SMPOPS_TD
