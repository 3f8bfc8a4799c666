#!/usr/bin/env python3
"""Writes test/fixtures/real/: Hugging Face architectures built from small
random configs (dropout 0), exported the way users export them, with
PyTorch's training references.

For each architecture:
  <arch>.onnx        torch.onnx.export(model, (input_ids,), path) with default
                     flags (the dynamo exporter and its optimiser), no dynamic
                     shapes: batch 8 fixed in the file, as users get it
  <arch>_dyn.onnx    the way docs/bring-your-own-model.md tells users to
                     export: the same with dynamic_shapes (a symbolic batch
                     dim "batch")
  <arch>/ref_sgd.json, <arch>/ref_adamw.json
                     PyTorch's per-step losses and grad norms: 5 steps of
                     SGD (lr 0.1) and AdamW (lr 1e-2) on batches of 8, in
                     train() mode, cross-entropy of every position's logits
                     against the labels (test/train/compare_losses.py)
  input_ids.npy, labels.npy (shared): 16 samples of 8 tokens, vocab 64

The model is wrapped so that its forward takes input_ids and returns the
logits (return_dict=False, use_cache=False). Which architectures train and
which are refused (and why) is asserted by test/smprun/real-models.test.

Needs torch and transformers (PyPI); CI only reads the committed files.
"""

import argparse
import warnings
from pathlib import Path

import numpy as np
import torch
import transformers as T

import torch_refs

VOCAB, SEQ, BATCH, SAMPLES, STEPS = 64, 8, 8, 16, 5


def configs():
    small = dict(vocab_size=VOCAB)
    yield "gpt2", lambda: T.GPT2LMHeadModel(T.GPT2Config(
        n_layer=2, n_head=2, n_embd=16, n_positions=32, resid_pdrop=0,
        embd_pdrop=0, attn_pdrop=0, **small))
    yield "bert", lambda: T.BertForMaskedLM(T.BertConfig(
        num_hidden_layers=2, num_attention_heads=2, hidden_size=16,
        intermediate_size=32, max_position_embeddings=32,
        hidden_dropout_prob=0, attention_probs_dropout_prob=0, **small))
    yield "distilbert", lambda: T.DistilBertForMaskedLM(T.DistilBertConfig(
        n_layers=2, n_heads=2, dim=16, hidden_dim=32,
        max_position_embeddings=32, dropout=0, attention_dropout=0, **small))
    yield "roberta", lambda: T.RobertaForMaskedLM(T.RobertaConfig(
        num_hidden_layers=2, num_attention_heads=2, hidden_size=16,
        intermediate_size=32, max_position_embeddings=40,
        hidden_dropout_prob=0, attention_probs_dropout_prob=0, **small))
    yield "llama", lambda: T.LlamaForCausalLM(T.LlamaConfig(
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        hidden_size=16, intermediate_size=32, max_position_embeddings=32,
        **small))
    yield "mistral", lambda: T.MistralForCausalLM(T.MistralConfig(
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        hidden_size=16, intermediate_size=32, max_position_embeddings=32,
        sliding_window=None, **small))
    yield "gptneox", lambda: T.GPTNeoXForCausalLM(T.GPTNeoXConfig(
        num_hidden_layers=2, num_attention_heads=2, hidden_size=16,
        intermediate_size=32, max_position_embeddings=32, hidden_dropout=0,
        attention_dropout=0, **small))
    yield "opt", lambda: T.OPTForCausalLM(T.OPTConfig(
        num_hidden_layers=2, num_attention_heads=2, hidden_size=16,
        ffn_dim=32, max_position_embeddings=32, word_embed_proj_dim=16,
        dropout=0, attention_dropout=0, **small))


class LogitsOnly(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        kw = {} if self.model.config.model_type in (
            "bert", "distilbert", "roberta") else {"use_cache": False}
        return self.model(input_ids=input_ids, return_dict=False, **kw)[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent.parent /
                                         "test" / "fixtures" / "real"))
    ap.add_argument("--only", nargs="*")
    out = Path(ap.parse_args().out)
    only = ap.parse_args().only
    out.mkdir(parents=True, exist_ok=True)
    warnings.filterwarnings("ignore")
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, VOCAB, (SAMPLES, SEQ), generator=g)
    labels = torch.randint(0, VOCAB, (SAMPLES, SEQ), generator=g)
    np.save(out / "input_ids.npy", ids.numpy())
    np.save(out / "labels.npy", labels.numpy())
    for name, build in configs():
        if only and name not in only:
            continue
        torch.manual_seed(0)
        model = LogitsOnly(build()).eval()
        init = {k: v.clone() for k, v in model.state_dict().items()}
        torch.onnx.export(model, (ids[:BATCH],), str(out / f"{name}.onnx"),
                          input_names=["input_ids"], output_names=["logits"],
                          external_data=False)
        torch.onnx.export(model, (ids[:BATCH],), str(out / f"{name}_dyn.onnx"),
                          input_names=["input_ids"], output_names=["logits"],
                          dynamic_shapes={"input_ids": {
                              0: torch.export.Dim("batch")}},
                          external_data=False)
        (out / name).mkdir(exist_ok=True)
        for opt_name, lr in torch_refs.LRS.items():
            model.load_state_dict(init)
            losses, norms = torch_refs.train_steps(model, (ids,), labels, VOCAB,
                                                   opt_name, STEPS, BATCH)
            torch_refs.write_ref(out / name / f"ref_{opt_name}.json",
                                 {"name": opt_name, "optimizer": opt_name,
                                  "lr": lr, "batch_size": BATCH,
                                  "steps": STEPS, "samples": SAMPLES},
                                 losses, norms)
        print("wrote", name)


if __name__ == "__main__":
    main()
