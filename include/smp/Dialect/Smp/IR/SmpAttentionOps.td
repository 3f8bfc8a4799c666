//===- SmpAttentionOps.td - Fused attention ----------------*- tablegen -*-===//
//
// Scaled-dot-product attention as one op, forward and backward, so that no
// pass and no kernel materialises the [S, Sk] score matrix per head. Included
// by SmpOps.td (it uses its tensor constraints and Smp_Op).
//
//===----------------------------------------------------------------------===//

#ifndef SMP_DIALECT_SMP_IR_SMPATTENTIONOPS_TD
#define SMP_DIALECT_SMP_IR_SMPATTENTIONOPS_TD

// An f32 attribute read as a float: F32Attr's APFloat would end ODS's
// defaulted trailing builder arguments (it defaults no APFloat).
def Smp_F32ValueAttr : FloatAttrBase<F32, "32-bit float attribute"> {
  let returnType = [{ float }];
  let convertFromStorage = [{ static_cast<float>($_self.getValueAsDouble()) }];
}

// Every attention op may drop its probabilities as smp.dropout would drop
// the [B, Hq, S, Sk] tensor of them: `ratio` (0: no dropout), `stream`,
// and the tensor's place in the global one (Smp_DropoutPlacement), so that
// the fused and the unfused attention draw the same mask in every plan.
defvar Smp_AttentionDropout =
    !con((ins DefaultValuedAttr<Smp_F32ValueAttr, "0.0f">:$ratio,
              DefaultValuedAttr<I64Attr, "0">:$stream),
         Smp_DropoutPlacement);

def Smp_AttentionOp : Smp_Op<"attention", [Pure, InferTypeOpAdaptor]> {
  let summary = "softmax(scale * q k^T [+ mask]) v without the score matrix";
  let description = [{
    `q` is `[B, Hq, S, D]`, `k` is `[B, Hkv, Sk, D]`, `v` is `[B, Hkv, Sk, Dv]`
    with `Hq` a multiple of `Hkv` (grouped-query and multi-query attention:
    query head `h` reads key/value head `h / (Hq / Hkv)`). `mask`, when
    given, is rank 4 with each dim 1 or the size of `[B, Hq, S, Sk]`: `i1`
    (true: the query may attend the key, as PyTorch's boolean `attn_mask`) or
    q's float type (added to the scaled scores). `causal` excludes key `j`
    for query `i` when `j > i` (top-left aligned, PyTorch's `is_causal`).

    Results: the output `[B, Hq, S, Dv]` and the log-sum-exp of each query's
    scores `[B, Hq, S, 2]` in f32 as two parts, the scores' maximum `m` and
    `log l` (l = the sum of exp(score - m)), which the backward uses to
    recompute the probabilities as exp((score - m) - log l): as exact as the
    unfused softmax's exp(score - m) / l, where one f32 `m + log l` would
    lose the low bits of large scores (|score| = 1e3 rounds it by 6e-5). A
    query with no key allowed gets 0 and both parts -inf (the unfused graph
    would give NaN).

    With `bshd`, q, k, v and the output are `[B, S, H, D]` instead (the
    projections' output viewed as heads, not transposed: FlashAttention's
    layout; `smp-attention-layout` absorbs the transposes into it); the
    log-sum-exp and the mask keep the shapes above.

    With `ratio` > 0 the probabilities are dropped before they weigh v:
    out = (Z * softmax) v with Z the mask smp.dropout with the same
    `stream` and placement attributes draws for the [B, Hq, S, Sk]
    probabilities, scaled by 1 / (1 - ratio) (`smp-raise-attention` takes
    it from a dropout between the softmax and the product). The log-sum-exp
    is the undropped softmax's; the mask is drawn again, not stored.
  }];
  let arguments = !con((ins Smp_FloatTensor:$query, Smp_FloatTensor:$key,
                            Smp_FloatTensor:$value, Optional<Smp_Tensor>:$mask,
                            F32Attr:$scale,
                            DefaultValuedAttr<BoolAttr, "false">:$causal,
                            DefaultValuedAttr<BoolAttr, "false">:$bshd),
                       Smp_AttentionDropout);
  let results = (outs Smp_FloatTensor:$result, Smp_FloatTensor:$lse);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`,` $mask^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def Smp_AttentionGradOp : Smp_Op<"attention_grad", [Pure,
                                                    InferTypeOpAdaptor]> {
  let summary = "Gradients of attention: (dq, dk, dv)";
  let description = [{
    From the forward's operands, its output and log-sum-exp and the output's
    gradient `grad`: the gradients of the query, key and value
    (FlashAttention-2's backward: the probabilities are recomputed block by
    block from the log-sum-exp). The mask's gradient, when it needs one, is
    `smp.attention_mask_grad`'s. `bshd` as the forward's: the operands and
    the gradients in that layout; the dropout attributes as the forward's
    (its mask drawn again: dv sums Z P dout, dS = P (Z dP - Dsum)).
  }];
  let arguments = !con((ins Smp_FloatTensor:$query, Smp_FloatTensor:$key,
                            Smp_FloatTensor:$value, Smp_FloatTensor:$output,
                            Smp_FloatTensor:$lse, Smp_FloatTensor:$grad,
                            Optional<Smp_Tensor>:$mask, F32Attr:$scale,
                            DefaultValuedAttr<BoolAttr, "false">:$causal,
                            DefaultValuedAttr<BoolAttr, "false">:$bshd),
                       Smp_AttentionDropout);
  let results = (outs Smp_FloatTensor:$query_grad, Smp_FloatTensor:$key_grad,
                      Smp_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $output `,` $lse `,` $grad (`,` $mask^)?
    attr-dict `:` functional-type(operands, results)
  }];
}

def Smp_AttentionMaskGradOp : Smp_Op<"attention_mask_grad", [Pure,
                                                            InferTypeOpAdaptor]> {
  let summary = "Gradient of attention's float mask";
  let description = [{
    The gradient of an additive float `mask` (a trainable bias: T5's
    relative position bias, a learned ALiBi), from the same operands as
    `smp.attention_grad`: dS = P (dP - Dsum), the gradient of the scores,
    summed over the dims the mask broadcasts along; the mask's type. Only
    the mask-sized result is written, never a [B, Hq, S, Sk] tensor (unless
    the mask is one). A separate op rather than a fourth result of
    `attention_grad`: it recomputes P and dP once more (the forward's
    products), which only models with a trainable mask pay, and its
    deterministic summation over broadcast dims wants another split of the
    work than dq's. The dropout attributes as the forward's.
  }];
  let arguments = !con((ins Smp_FloatTensor:$query, Smp_FloatTensor:$key,
                            Smp_FloatTensor:$value, Smp_FloatTensor:$output,
                            Smp_FloatTensor:$lse, Smp_FloatTensor:$grad,
                            Smp_FloatTensor:$mask, F32Attr:$scale,
                            DefaultValuedAttr<BoolAttr, "false">:$causal,
                            DefaultValuedAttr<BoolAttr, "false">:$bshd),
                       Smp_AttentionDropout);
  let results = (outs Smp_FloatTensor:$mask_grad);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $output `,` $lse `,` $grad `,` $mask
    attr-dict `:` functional-type(operands, results)
  }];
}

def Smp_PackedAttentionOp : Smp_Op<"packed_attention", [Pure,
                                                      InferTypeOpAdaptor]> {
  let summary = "attention reading q, k and v from one packed projection";
  let description = [{
    `smp.attention` with `bshd` whose query, key and value are heads
    `[0, Hq)`, `[Hq, Hq + Hkv)` and `[Hq + Hkv, Hq + 2 Hkv)` of one
    `qkv` of `[B, S, Hq + 2 Hkv, D]` (`kv_heads` = Hkv, `Hq` a multiple of
    it): the output of a fused QKV projection (GPT-2's `c_attn`) viewed as
    heads, read in place instead of split into three copies. Results and
    mask as `smp.attention`'s: `[B, S, Hq, D]` and the log-sum-exp
    `[B, Hq, S, 2]` in f32. Made by `smp-pack-attention`; the dropout
    attributes as smp.attention's.
  }];
  let arguments = !con((ins Smp_FloatTensor:$qkv, Optional<Smp_Tensor>:$mask,
                            F32Attr:$scale,
                            DefaultValuedAttr<BoolAttr, "false">:$causal,
                            I64Attr:$kv_heads),
                       Smp_AttentionDropout);
  let results = (outs Smp_FloatTensor:$result, Smp_FloatTensor:$lse);
  let assemblyFormat = [{
    $qkv (`,` $mask^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Smp_PackedAttentionGradOp : Smp_Op<"packed_attention_grad", [Pure,
                                                      InferTypeOpAdaptor]> {
  let summary = "Gradient of packed_attention: dq, dk, dv as one packed tensor";
  let description = [{
    `smp.attention_grad` of `smp.packed_attention`: the gradients of the
    query, key and value heads written into one tensor of `qkv`'s type and
    layout (the gradient of the fused projection's output, without a
    concatenation). The dropout attributes as the forward's.
  }];
  let arguments = !con((ins Smp_FloatTensor:$qkv, Smp_FloatTensor:$output,
                            Smp_FloatTensor:$lse, Smp_FloatTensor:$grad,
                            Optional<Smp_Tensor>:$mask, F32Attr:$scale,
                            DefaultValuedAttr<BoolAttr, "false">:$causal,
                            I64Attr:$kv_heads),
                       Smp_AttentionDropout);
  let results = (outs Smp_FloatTensor:$qkv_grad);
  let assemblyFormat = [{
    $qkv `,` $output `,` $lse `,` $grad (`,` $mask^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

#endif // SMP_DIALECT_SMP_IR_SMPATTENTIONOPS_TD
