//===- smp-modelgen.cpp - GPT and LLaMA models from a config --------------===//
//
// smp-modelgen gpt|llama --layers L --hidden H --heads N --seq S --vocab V
//              [--kv-heads K] [--ffn F] [--batch B] [--seed X]
//              [-o OUT.mlir|OUT.onnx] [--write-data DIR N]
//              [--no-fuse-attention]
//
// .mlir: the smp dialect module smpc import would produce, with shape-only
// parameters (GPT-3 175B prints in a fraction of a second); .onnx: the same
// model with random weights, for small configs. Errors are one line on
// stderr, exit code 1.
//
//===----------------------------------------------------------------------===//

#include "MlirWriter.h"
#include "Models.h"
#include "OnnxWriter.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "smp/Version.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
#include <vector>

using namespace smp::modelgen;

namespace {

const char *kUsage = R"(smp-modelgen - writes GPT- and LLaMA-style decoder models from a config:
smp dialect MLIR with shape-only parameters (any size, e.g. GPT-3 175B), or
ONNX with random weights (small models, to train with smpc and smprun).

USAGE
  smp-modelgen gpt   --layers L --hidden H --heads N --seq S --vocab V
                     [--ffn F] [--batch B] [-o OUT.mlir|OUT.onnx]
  smp-modelgen llama --layers L --hidden H --heads N [--kv-heads K]
                     [--ffn F] --seq S --vocab V [--batch B] [-o OUT]
  smp-modelgen KIND ... [--seed X] [--write-data DIR N] [--no-fuse-attention]
  smp-modelgen --help | --version

MODELS
  gpt       GPT-2/GPT-3 (nanoGPT names): learned position embeddings,
            pre-LayerNorm blocks, fused QKV and MLP nn.Linear layers with
            biases, causal attention, GELU (tanh), LM head tied to the token
            embedding. Parameters, with F = --ffn:
              V*H + S*H + L*(4H^2 + 2FH + 9H + F) + 2H
              (= V*H + S*H + L*(12H^2 + 13H) + 2H for F = 4H)
  llama     LLaMA (Meta names): RMSNorm, rotary embeddings, grouped-query
            attention (--kv-heads), SwiGLU MLP, no biases, untied output
            layer; projections stored [in, out]. Parameters, with
            Hkv = K * H / N:
              2*V*H + L*(2H^2 + 2*H*Hkv + 3*H*F + 2H) + H

OUTPUT (-o FILE, by extension)
  .mlir     smp dialect MLIR as smpc import writes it: func @main with the
            parameters as function arguments (smp.param, shapes only: no
            weight bytes anywhere), input idx, output logits; the module is
            marked smp.model and smp.model_config. For smpc summary, smp-opt
            and planning; it has no weights to compile. Default: stdout.
  .onnx     ONNX, opset 17, with random weights: N(0, 0.02) for matrices and
            embeddings, 1 for norm scales, 0 for biases. For smpc compile
            and smprun; at most 400000000 parameters (1.6 GB of f32, under
            protobuf's 2 GiB limit): GPT-2 small and medium fit.

OPTIONS
  --layers L           Transformer blocks.
  --hidden H           Model width (divisible by --heads).
  --heads N            Attention heads.
  --kv-heads K         llama: key/value heads (must divide --heads; default
                       --heads).
  --ffn F              MLP width (default: gpt 4H; llama Meta's rule, 2/3 of
                       4H rounded up to a multiple of 256: 11008 for 4096).
  --seq S              Sequence length (and gpt's position table).
  --vocab V            Vocabulary size.
  --batch B            The input's batch dim (default: 1 in .mlir; in .onnx
                       a symbolic dim 'batch', bound by smpc --batch-size).
  --seed X             Seed of the random weights and data (default 0).
  --write-data DIR N   Also write DIR/idx.npy and DIR/labels.npy: N random
                       token sequences, int64 [N, S], the labels being the
                       next tokens, for smprun --data DIR. Without -o only
                       the data is written.
  -o FILE              Output file, .mlir or .onnx (default: .mlir text on
                       stdout).
  --no-fuse-attention  .mlir: keep each attention as its matmuls, mask and
                       softmax, as smpc import --no-fuse-attention does
                       (default: one smp.attention per layer, as smpc import
                       writes it). An .onnx file is always the unfused graph;
                       smpc decides when it imports it.
  -h, --help           Show this help.
  --version            Show the version.

EXAMPLES
  smp-modelgen gpt --layers 96 --hidden 12288 --heads 96 --seq 2048 \
       --vocab 51200 -o gpt3.mlir && smpc summary gpt3.mlir
  smp-modelgen llama --layers 32 --hidden 4096 --heads 32 --ffn 11008 \
       --seq 4096 --vocab 32000 -o llama7b.mlir
  smp-modelgen gpt --layers 2 --hidden 64 --heads 4 --seq 32 --vocab 128 \
       -o small.onnx --write-data data 64
  smpc compile small.onnx --train --loss cross_entropy:logits:labels \
       --batch-size 8 -o small.smpx && smprun small.smpx --data data --steps 10
)";

/// Tokens --write-data writes at most (per file: 1 GiB of int64).
constexpr int64_t kMaxDataTokens = int64_t(1) << 27;

struct Options {
  ModelConfig config;
  std::string output;
  bool outputGiven = false;
  bool fuseAttention = true;
  uint64_t seed = 0;
  std::string dataDir;
  int64_t dataSamples = 0;
};

int fail(const llvm::Twine &msg) {
  llvm::errs() << "smp-modelgen: error: " << msg << "\n";
  return 1;
}

/// Parses argv; returns an exit code when the program should stop.
std::optional<int> parseArgs(int argc, char **argv, Options &opts) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    llvm::errs() << kUsage;
    return 1;
  }
  ModelConfig &c = opts.config;
  bool kindGiven = false;
  struct SizeFlag {
    const char *flag;
    int64_t *value;
  } sizes[] = {{"--layers", &c.layers}, {"--hidden", &c.hidden},
               {"--heads", &c.heads},   {"--kv-heads", &c.kvHeads},
               {"--ffn", &c.ffn},       {"--seq", &c.seq},
               {"--vocab", &c.vocab},   {"--batch", &c.batch}};
  for (size_t i = 0; i < args.size(); ++i) {
    llvm::StringRef a = args[i];
    auto value = [&](llvm::StringRef flag) -> std::optional<std::string> {
      if (a.starts_with(flag.str() + "="))
        return a.drop_front(flag.size() + 1).str();
      if (i + 1 < args.size())
        return args[++i];
      return std::nullopt;
    };
    auto is = [&](llvm::StringRef flag) {
      return a == flag || a.starts_with(flag.str() + "=");
    };
    if (a == "-h" || a == "--help") {
      llvm::outs() << kUsage;
      return 0;
    }
    if (a == "--version") {
      llvm::outs() << "smp-modelgen " << SMP_VERSION << " (LLVM/MLIR "
                   << LLVM_VERSION_STRING << ")\n";
      return 0;
    }
    bool matched = false;
    for (SizeFlag &s : sizes) {
      if (!is(s.flag))
        continue;
      matched = true;
      auto v = value(s.flag);
      int64_t n;
      if (!v)
        return fail(llvm::Twine(s.flag) + " needs a value");
      if (llvm::StringRef(*v).getAsInteger(10, n) || n <= 0)
        return fail(llvm::Twine(s.flag) + " expects a positive integer, got '" +
                    *v + "'");
      *s.value = n;
      break;
    }
    if (matched)
      continue;
    if (is("-o")) {
      auto v = value("-o");
      if (!v || v->empty())
        return fail("-o needs a file name");
      opts.output = *v;
      opts.outputGiven = true;
    } else if (is("--seed")) {
      auto v = value("--seed");
      if (!v || llvm::StringRef(*v).getAsInteger(10, opts.seed))
        return fail("--seed expects a non-negative integer");
    } else if (a == "--no-fuse-attention") {
      opts.fuseAttention = false;
    } else if (a == "--write-data") {
      if (i + 2 >= args.size())
        return fail("--write-data needs DIR and N (the number of samples)");
      opts.dataDir = args[++i];
      llvm::StringRef n = args[++i];
      if (opts.dataDir.empty())
        return fail("--write-data needs a directory name");
      if (n.getAsInteger(10, opts.dataSamples) || opts.dataSamples <= 0)
        return fail("--write-data expects a positive number of samples, got '" +
                    n + "'");
    } else if (a.starts_with("-") && a != "-") {
      return fail("unknown option '" + a + "' (see smp-modelgen --help)");
    } else if (!kindGiven) {
      c.kind = a.str();
      kindGiven = true;
    } else {
      return fail("unexpected argument '" + a + "'");
    }
  }
  if (!kindGiven)
    return fail("needs a model kind, gpt or llama (see smp-modelgen --help)");
  if (c.kind != "gpt" && c.kind != "llama")
    return fail("unknown model kind '" + c.kind + "' (expected gpt or llama)");
  struct Required {
    const char *flag, *what;
    int64_t value;
  } required[] = {{"--layers", "the number of blocks", c.layers},
                  {"--hidden", "the model width", c.hidden},
                  {"--heads", "the attention heads", c.heads},
                  {"--seq", "the sequence length", c.seq},
                  {"--vocab", "the vocabulary size", c.vocab}};
  for (const Required &r : required)
    if (r.value == 0)
      return fail(c.kind + " needs " + r.flag + " (" + r.what + ")");
  if (c.kind == "gpt" && c.kvHeads != 0)
    return fail("--kv-heads applies to llama only (gpt's fused QKV has a "
                "key/value head per query head)");
  if (opts.outputGiven && opts.output != "-") {
    llvm::StringRef out = opts.output;
    if (!out.ends_with(".mlir") && !out.ends_with(".onnx"))
      return fail("-o " + opts.output +
                  ": the output must end in .mlir or .onnx");
  }
  if (!opts.outputGiven)
    opts.output = opts.dataDir.empty() ? "-" : "";
  if (!opts.fuseAttention && !llvm::StringRef(opts.output).ends_with(".mlir") &&
      opts.output != "-")
    return fail("--no-fuse-attention applies to .mlir output only: an .onnx "
                "model is fused or not when smpc imports it (pass "
                "--no-fuse-attention to smpc compile instead)");
  completeDefaults(c);
  if (auto err = validate(c))
    return fail(*err);
  if (!opts.dataDir.empty() &&
      opts.dataSamples > kMaxDataTokens / c.seq)
    return fail("--write-data " + opts.dataDir + " " +
                std::to_string(opts.dataSamples) + ": " +
                std::to_string(opts.dataSamples) + " x --seq " +
                std::to_string(c.seq) + " tokens is too many (at most " +
                std::to_string(kMaxDataTokens) + ")");
  return std::nullopt;
}

std::string describe(const ModelConfig &c) {
  std::string s = c.kind + ", " + std::to_string(c.layers) + " layers, hidden " +
                  std::to_string(c.hidden) + ", " + std::to_string(c.heads) +
                  " heads";
  if (c.kind == "llama" && c.kvHeads != c.heads)
    s += " (" + std::to_string(c.kvHeads) + " kv)";
  s += ", ffn " + std::to_string(c.ffn) + ", seq " + std::to_string(c.seq) +
       ", vocab " + std::to_string(c.vocab);
  return s + ": " + std::to_string(parameterCount(c)) + " parameters";
}

int writeMlir(const Options &opts) {
  mlir::MLIRContext ctx;
  auto module = buildMlirModule(ctx, opts.config, opts.fuseAttention);
  if (!module)
    return fail(llvm::toString(module.takeError()));
  std::string err;
  auto out = mlir::openOutputFile(opts.output, &err);
  if (!out)
    return fail(opts.output + ": " + err);
  (*module)->print(out->os());
  out->os().flush();
  if (out->os().has_error())
    return fail(opts.output + ": " + out->os().error().message());
  out->keep();
  if (opts.output != "-")
    llvm::outs() << "wrote " << opts.output << ": " << describe(opts.config)
                 << "\n";
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  Options opts;
  if (auto code = parseArgs(argc, argv, opts))
    return *code;
  if (!opts.output.empty()) {
    if (llvm::StringRef(opts.output).ends_with(".onnx")) {
      if (auto err = writeOnnxModel(opts.config, opts.seed, opts.output))
        return fail(llvm::toString(std::move(err)));
      llvm::outs() << "wrote " << opts.output << ": "
                   << describe(opts.config) << "\n";
    } else if (int code = writeMlir(opts)) {
      return code;
    }
  }
  if (!opts.dataDir.empty()) {
    if (auto err = writeTrainingData(opts.config, opts.seed, opts.dataDir,
                                     opts.dataSamples))
      return fail(llvm::toString(std::move(err)));
    if (opts.output != "-")
      llvm::outs() << "wrote " << opts.dataDir << "/idx.npy and "
                   << opts.dataDir << "/labels.npy: " << opts.dataSamples
                   << " samples of " << opts.config.seq << " tokens\n";
  }
  return 0;
}
