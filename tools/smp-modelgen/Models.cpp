//===- Models.cpp - GPT-2/3 and LLaMA decoders on a GraphBuilder ----------===//
//
// Both follow the PyTorch modules of python/smp_models.py and what the ONNX
// importer makes of their exports (test/fixtures/train/gpt.onnx,
// llama.onnx):
//
// gpt (nanoGPT / GPT-2 names): token + learned position embeddings,
//   pre-LN blocks with a fused QKV nn.Linear ([3H, H], transposed before the
//   matmul), causal softmax attention (scores * 1/sqrt(hd), future positions
//   set to -inf by a where), a GELU(tanh) MLP, final LayerNorm and an LM head
//   tied to the token embedding (a transpose of the same argument).
// llama (Meta names): token embedding, pre-RMSNorm blocks, q/k/v/o
//   projections stored [in, out] (x @ W, as the exporter's constant folding
//   leaves nn.Linear weights), rotary embeddings (rotate-half form, cos/sin
//   tables from positions x inverse frequencies), grouped-query attention
//   (k/v heads repeated with expand + reshape when kv-heads < heads), scores
//   / sqrt(hd) plus an additive causal mask, a SwiGLU MLP, final RMSNorm and
//   an untied output projection.
//
// Large constants never appear: the causal mask is a trilu of a splat and
// the rotary tables are computed from [seq] and [head_dim/2] vectors, so
// both fold into constants only where they are small.
//
//===----------------------------------------------------------------------===//

#include "Models.h"

#include <cmath>
#include <limits>

namespace smp::modelgen {

void completeDefaults(ModelConfig &c) {
  if (c.kind == "llama") {
    if (c.kvHeads == 0)
      c.kvHeads = c.heads;
    if (c.ffn == 0 && c.hidden > 0) {
      // Meta's rule: int(2 * 4H / 3) rounded up to a multiple of 256.
      int64_t f = 2 * (4 * c.hidden) / 3;
      c.ffn = (f + 255) / 256 * 256;
      c.ffnDefaulted = true;
    }
  } else if (c.kind == "gpt") {
    if (c.ffn == 0 && c.hidden > 0) {
      c.ffn = 4 * c.hidden;
      c.ffnDefaulted = true;
    }
  }
}

using Wide = __int128;

static std::string str(int64_t v) { return std::to_string(v); }

/// The parameter count in 128-bit arithmetic (inputs are bounded by
/// kMaxSize, so nothing here overflows).
static Wide wideParameterCount(const ModelConfig &c) {
  Wide V = c.vocab, H = c.hidden, L = c.layers, F = c.ffn, S = c.seq;
  if (c.kind == "gpt")
    return V * H + S * H + L * (4 * H * H + 2 * F * H + 9 * H + F) + 2 * H;
  Wide kv = Wide(c.kvHeads) * (c.hidden / c.heads);
  return 2 * V * H + L * (2 * H * H + 2 * H * kv + 3 * H * F + 2 * H) + H;
}

std::optional<std::string> validate(const ModelConfig &c) {
  if (c.kind != "gpt" && c.kind != "llama")
    return "unknown model kind '" + c.kind + "' (expected gpt or llama)";
  struct Size {
    const char *flag;
    int64_t value;
  } sizes[] = {{"--layers", c.layers}, {"--hidden", c.hidden},
               {"--heads", c.heads},   {"--seq", c.seq},
               {"--vocab", c.vocab},   {"--ffn", c.ffn},
               {"--kv-heads", c.kind == "llama" ? c.kvHeads : 1},
               {"--batch", c.batch == 0 ? 1 : c.batch}};
  for (const Size &s : sizes) {
    if (s.value <= 0)
      return std::string(s.flag) + " must be a positive integer";
    if (s.value > kMaxSize)
      return std::string(s.flag) + " " + str(s.value) +
             (std::string(s.flag) == "--ffn" && c.ffnDefaulted
                  ? " (the default for --hidden " + str(c.hidden) + ")"
                  : std::string()) +
             " is too large (at most " + str(kMaxSize) + ")";
  }
  if (c.layers > kMaxLayers)
    return "--layers " + str(c.layers) + " is too large (at most " +
           str(kMaxLayers) + ")";
  if (c.seq > kMaxSeq)
    return "--seq " + str(c.seq) + " is too large (at most " + str(kMaxSeq) +
           ")";
  if (c.hidden % c.heads != 0)
    return "--hidden " + str(c.hidden) + " is not divisible by --heads " +
           str(c.heads) + " (every head must have the same size)";
  if (c.kind == "llama") {
    if (c.kvHeads > c.heads || c.heads % c.kvHeads != 0)
      return "--kv-heads " + str(c.kvHeads) + " does not divide --heads " +
             str(c.heads);
    if (c.headDim() % 2 != 0)
      return "llama needs an even head size for rotary embeddings, got "
             "--hidden / --heads = " +
             str(c.headDim());
  }
  // Every tensor, and the parameter total, must fit comfortably in int64.
  Wide B = c.batch == 0 ? 1 : c.batch, T = c.seq, H = c.hidden,
       V = c.vocab, F = c.ffn, N = c.heads;
  Wide biggest[] = {B * N * T * T, B * T * V, B * T * F, V * H, H * F,
                    3 * H * H, wideParameterCount(c)};
  for (Wide w : biggest)
    if (w > Wide(kMaxElements))
      return "the model is too large: a tensor or the parameter count "
             "exceeds 2^62 elements";
  return std::nullopt;
}

int64_t parameterCount(const ModelConfig &c) {
  return static_cast<int64_t>(wideParameterCount(c));
}

namespace {

/// Emits one model; holds the names and the shared constants.
struct Emitter {
  const ModelConfig &c;
  int64_t B;
  GraphBuilder &b;
  using V = GraphBuilder::V;

  int64_t H() const { return c.hidden; }
  int64_t T() const { return c.seq; }
  int64_t hd() const { return c.headDim(); }

  /// x @ W^T + bias for an nn.Linear weight [out, in] (GPT), as exported:
  /// Transpose, MatMul, then Add(bias, product).
  V linearT(const std::string &scope, V x, V weight, V bias) {
    V wt = b.transpose(scope + "/Transpose", weight, {1, 0});
    V y = b.matmul(scope + "/MatMul", x, wt);
    return b.add(scope + "/Add", bias, y);
  }

  /// [B, T, n*hd] -> [B, n, T, hd] (perm 0,2,1,3) or, for keys in GPT's
  /// k^T form, [B, n, hd, T] (perm 0,2,3,1).
  V heads(const std::string &reshapeName, const std::string &transposeName,
          V x, int64_t n, bool keyTransposed) {
    V r = b.reshape(reshapeName, x, {B, T(), n, hd()});
    return b.transpose(transposeName, r,
                       keyTransposed ? Shape{0, 2, 3, 1} : Shape{0, 2, 1, 3});
  }

  /// [B, n, T, hd] -> [B, T, n*hd].
  V mergeHeads(const std::string &scope, const std::string &suffix, V y) {
    V t = b.transpose(scope + "/Transpose" + suffix, y, {0, 2, 1, 3});
    return b.reshape(scope + "/Reshape" + suffix, t, {B, T(), H()});
  }

  std::vector<int64_t> positions() const {
    std::vector<int64_t> pos(c.seq);
    for (int64_t i = 0; i < c.seq; ++i)
      pos[i] = i;
    return pos;
  }

  void gpt() {
    const int64_t F = c.ffn, Vv = c.vocab;
    V idx = b.inputIds("idx", {B, T()});
    V wte = b.param("transformer.wte.weight", {Vv, H()}, Init::Normal);
    V wpe = b.param("transformer.wpe.weight", {T(), H()}, Init::Normal);
    struct Layer {
      V ln1w, ln1b, attnW, attnB, projW, projB, ln2w, ln2b, fcW, fcB, mlpW,
          mlpB;
    };
    std::vector<Layer> layers;
    for (int64_t l = 0; l < c.layers; ++l) {
      std::string p = "transformer.h." + str(l) + ".";
      Layer ly;
      ly.ln1w = b.param(p + "ln_1.weight", {H()}, Init::Ones);
      ly.ln1b = b.param(p + "ln_1.bias", {H()}, Init::Zeros);
      ly.attnW = b.param(p + "attn.c_attn.weight", {3 * H(), H()}, Init::Normal);
      ly.attnB = b.param(p + "attn.c_attn.bias", {3 * H()}, Init::Zeros);
      ly.projW = b.param(p + "attn.c_proj.weight", {H(), H()}, Init::Normal);
      ly.projB = b.param(p + "attn.c_proj.bias", {H()}, Init::Zeros);
      ly.ln2w = b.param(p + "ln_2.weight", {H()}, Init::Ones);
      ly.ln2b = b.param(p + "ln_2.bias", {H()}, Init::Zeros);
      ly.fcW = b.param(p + "mlp.c_fc.weight", {F, H()}, Init::Normal);
      ly.fcB = b.param(p + "mlp.c_fc.bias", {F}, Init::Zeros);
      ly.mlpW = b.param(p + "mlp.c_proj.weight", {H(), F}, Init::Normal);
      ly.mlpB = b.param(p + "mlp.c_proj.bias", {H()}, Init::Zeros);
      layers.push_back(ly);
    }
    V lnfw = b.param("transformer.ln_f.weight", {H()}, Init::Ones);
    V lnfb = b.param("transformer.ln_f.bias", {H()}, Init::Zeros);

    // Shared constants: positions, the causal mask (true above the
    // diagonal: a future position), -inf and the score scale.
    V pos = b.constI64("/Range", {T()}, positions());
    V future = b.trilu("/Trilu", b.fillBool("/ConstantOfShape", {T(), T()}, true),
                       /*upper=*/true, /*k=*/1);
    V negInf = b.constF32("/NegInf", {},
                          {-std::numeric_limits<float>::infinity()});
    V scale = b.constF32("/Scale", {},
                         {static_cast<float>(1.0 / std::sqrt(double(hd())))});

    V tok = b.gather("/wte/Gather", wte, idx);
    V x = b.add("/Add", tok, b.gather("/wpe/Gather", wpe, pos));
    for (int64_t l = 0; l < c.layers; ++l) {
      const Layer &ly = layers[l];
      std::string s = "/h." + str(l);
      std::string a = s + "/attn";
      V h = b.layerNorm(s + "/ln_1/LayerNormalization", x, ly.ln1w, ly.ln1b, 2,
                        c.eps);
      V qkv = linearT(a + "/c_attn", h, ly.attnW, ly.attnB);
      auto parts = b.split(a + "/Split", qkv, 2, {H(), H(), H()});
      V q = heads(a + "/Reshape", a + "/Transpose", parts[0], c.heads, false);
      V kT = heads(a + "/Reshape_1", a + "/Transpose_2", parts[1], c.heads,
                   true);
      V v = heads(a + "/Reshape_2", a + "/Transpose_1", parts[2], c.heads,
                  false);
      V att = b.mul(a + "/Mul", b.matmul(a + "/MatMul", q, kT), scale);
      att = b.where(a + "/Where", future, negInf, att);
      att = b.softmax(a + "/Softmax", att, 3);
      V y = mergeHeads(a, "_3", b.matmul(a + "/MatMul_1", att, v));
      y = linearT(a + "/c_proj", y, ly.projW, ly.projB);
      x = b.add(s + "/Add", x, y);
      h = b.layerNorm(s + "/ln_2/LayerNormalization", x, ly.ln2w, ly.ln2b, 2,
                      c.eps);
      h = linearT(s + "/mlp/c_fc", h, ly.fcW, ly.fcB);
      h = b.geluTanh(s + "/mlp/gelu", h);
      h = linearT(s + "/mlp/c_proj", h, ly.mlpW, ly.mlpB);
      x = b.add(s + "/Add_1", x, h);
    }
    x = b.layerNorm("/ln_f/LayerNormalization", x, lnfw, lnfb, 2, c.eps);
    V head = b.transpose("/lm_head/Transpose", wte, {1, 0});
    b.output("logits", b.matmul("/lm_head/MatMul", x, head), {B, T(), Vv});
  }

  /// HF's rotate-half rotary embedding of [B, n, T, hd].
  V rope(const std::string &a, const std::string &sfx, V x, V cos, V sin) {
    V xc = b.mul(a + "/Mul" + sfx + "_cos", x, cos);
    V x1 = b.slice(a + "/Slice" + sfx + "_lo", x, 4, 3, 0, hd() / 2);
    V x2 = b.slice(a + "/Slice" + sfx + "_hi", x, 4, 3, hd() / 2, hd());
    V rot = b.concat(a + "/Concat" + sfx,
                     {b.unary(Unary::Neg, a + "/Neg" + sfx, x2), x1}, 3);
    V xs = b.mul(a + "/Mul" + sfx + "_sin", rot, sin);
    return b.add(a + "/Add" + sfx, xc, xs);
  }

  /// [B, kv, T, hd] -> [B, heads, T, hd], each kv head repeated
  /// heads/kv times (HF's repeat_kv).
  V repeatKV(const std::string &a, const std::string &sfx, V x) {
    int64_t kv = c.kvHeads, rep = c.heads / c.kvHeads;
    if (rep == 1)
      return x;
    V r = b.reshape(a + "/repeat_kv" + sfx + "/Reshape", x,
                    {B, kv, 1, T(), hd()});
    V e = b.expand(a + "/repeat_kv" + sfx + "/Expand", r,
                   {B, kv, rep, T(), hd()});
    return b.reshape(a + "/repeat_kv" + sfx + "/Reshape_1", e,
                     {B, c.heads, T(), hd()});
  }

  void llama() {
    const int64_t F = c.ffn, Vv = c.vocab, KV = c.kvHeads * hd();
    V idx = b.inputIds("idx", {B, T()});
    V emb = b.param("tok_embeddings.weight", {Vv, H()}, Init::Normal);
    struct Layer {
      V attnNorm, wq, wk, wv, wo, ffnNorm, w1, w2, w3;
    };
    std::vector<Layer> layers;
    for (int64_t l = 0; l < c.layers; ++l) {
      std::string p = "layers." + str(l) + ".";
      Layer ly;
      ly.attnNorm = b.param(p + "attention_norm.weight", {H()}, Init::Ones);
      ly.wq = b.param(p + "attention.wq.weight", {H(), H()}, Init::Normal);
      ly.wk = b.param(p + "attention.wk.weight", {H(), KV}, Init::Normal);
      ly.wv = b.param(p + "attention.wv.weight", {H(), KV}, Init::Normal);
      ly.wo = b.param(p + "attention.wo.weight", {H(), H()}, Init::Normal);
      ly.ffnNorm = b.param(p + "ffn_norm.weight", {H()}, Init::Ones);
      ly.w1 = b.param(p + "feed_forward.w1.weight", {H(), F}, Init::Normal);
      ly.w2 = b.param(p + "feed_forward.w2.weight", {F, H()}, Init::Normal);
      ly.w3 = b.param(p + "feed_forward.w3.weight", {H(), F}, Init::Normal);
      layers.push_back(ly);
    }
    V normW = b.param("norm.weight", {H()}, Init::Ones);
    V outW = b.param("output.weight", {H(), Vv}, Init::Normal);

    // Rotary tables: angles[t, i] = t * theta^(-2i/hd), duplicated to hd.
    std::vector<float> pos(c.seq), invFreq(hd() / 2);
    for (int64_t t = 0; t < c.seq; ++t)
      pos[t] = static_cast<float>(t);
    for (int64_t i = 0; i < hd() / 2; ++i)
      invFreq[i] = static_cast<float>(
          1.0 / std::pow(c.ropeTheta, double(2 * i) / double(hd())));
    V posV = b.constF32("/rotary/positions", {T(), 1}, pos);
    V freqs = b.mul("/rotary/Mul", posV,
                    b.constF32("/rotary/inv_freq", {1, hd() / 2}, invFreq));
    V angles = b.concat("/rotary/Concat", {freqs, freqs}, 1);
    V cos = b.unary(Unary::Cos, "/rotary/Cos", angles);
    V sin = b.unary(Unary::Sin, "/rotary/Sin", angles);
    // Additive causal mask: -inf above the diagonal, 0 elsewhere.
    V mask = b.trilu("/Trilu",
                     b.fillF32("/ConstantOfShape", {T(), T()},
                               -std::numeric_limits<float>::infinity()),
                     /*upper=*/true, /*k=*/1);
    V sqrtHd = b.constF32("/SqrtHeadDim", {},
                          {static_cast<float>(std::sqrt(double(hd())))});

    V x = b.gather("/tok_embeddings/Gather", emb, idx);
    for (int64_t l = 0; l < c.layers; ++l) {
      const Layer &ly = layers[l];
      std::string s = "/layers." + str(l);
      std::string a = s + "/attention";
      V h = b.rmsNorm(s + "/attention_norm", x, ly.attnNorm, 2, c.eps);
      V q = b.matmul(a + "/wq/MatMul", h, ly.wq);
      V k = b.matmul(a + "/wk/MatMul", h, ly.wk);
      V v = b.matmul(a + "/wv/MatMul", h, ly.wv);
      q = b.transpose(a + "/Transpose",
                      b.reshape(a + "/Reshape", q, {B, T(), c.heads, hd()}),
                      {0, 2, 1, 3});
      k = b.transpose(a + "/Transpose_1",
                      b.reshape(a + "/Reshape_1", k, {B, T(), c.kvHeads, hd()}),
                      {0, 2, 1, 3});
      v = b.transpose(a + "/Transpose_2",
                      b.reshape(a + "/Reshape_2", v, {B, T(), c.kvHeads, hd()}),
                      {0, 2, 1, 3});
      q = rope(a, "_q", q, cos, sin);
      k = rope(a, "_k", k, cos, sin);
      k = repeatKV(a, "_k", k);
      v = repeatKV(a, "_v", v);
      V kT = b.transpose(a + "/Transpose_3", k, {0, 1, 3, 2});
      V att = b.div(a + "/Div", b.matmul(a + "/MatMul", q, kT), sqrtHd);
      att = b.add(a + "/Add_mask", att, mask);
      att = b.softmax(a + "/Softmax", att, 3);
      V y = mergeHeads(a, "_4", b.matmul(a + "/MatMul_1", att, v));
      y = b.matmul(a + "/wo/MatMul", y, ly.wo);
      x = b.add(s + "/Add", x, y);
      h = b.rmsNorm(s + "/ffn_norm", x, ly.ffnNorm, 2, c.eps);
      std::string f = s + "/feed_forward";
      V gate = b.silu(f + "/silu", b.matmul(f + "/w1/MatMul", h, ly.w1));
      V up = b.matmul(f + "/w3/MatMul", h, ly.w3);
      V down = b.matmul(f + "/w2/MatMul", b.mul(f + "/Mul_1", gate, up), ly.w2);
      x = b.add(s + "/Add_1", x, down);
    }
    x = b.rmsNorm("/norm", x, normW, 2, c.eps);
    b.output("logits", b.matmul("/output/MatMul", x, outW), {B, T(), Vv});
  }
};

} // namespace

void buildModel(const ModelConfig &c, int64_t batch, GraphBuilder &b) {
  Emitter e{c, batch, b};
  if (c.kind == "gpt")
    e.gpt();
  else
    e.llama();
}

} // namespace smp::modelgen
