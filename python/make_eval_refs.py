#!/usr/bin/env python3
"""PyTorch's eval loss for smprun --eval-data (test/smprun/evaluation.test).

The model, data and masks of test/fixtures/dropout (make_dropout_refs.py):
the transformer block with five dropouts, trained 8 SGD steps (lr 0.05,
momentum 0.9) with smp's dropout masks for seed 1234. After steps 4 and 8
the model is evaluated as a PyTorch user evaluates it: model.eval() (every
dropout off) under torch.no_grad(), on held-out samples in batches of 8, the
eval loss being the mean of the batches' mean-squared errors (the Hugging
Face Trainer's eval_loss). The held-out file holds 20 samples: two whole
batches are evaluated, the last 4 left out, as smprun does where the loss
(a mean-squared error's mean over every sample) cannot leave a short
batch's padding out. GPT-2's cross-entropy can: its evaluation includes the
short batch, as the Trainer's does.

The block is rebuilt as make_dropout_refs.py built it (torch.manual_seed(0),
Block()); the script checks that its 8 training losses are ref_sgd.json's
(so it trains the model the fixture's file holds) before writing
test/fixtures/dropout/eval/{x,t}.npy and ref_sgd_eval.json. Needs torch
and numpy; regenerate with:  python3 python/make_eval_refs.py
With --gpt2 (needs transformers): the same for the Hugging Face GPT-2 of
dropout/gpt2 (gpt2_evals); with --own-loss: a Hugging Face GPT-2, T5, Llama and BART
exported with their own loss (hf-trainer/gpt2loss, t5loss, llamaloss, bartloss:
own_loss_evals; --own-loss NAME... for some); with --resnet: the ResNet of
test/fixtures/resnet, its BatchNorm evaluated with the running statistics
(resnet_evals). The GPT-2 and own-loss evaluations also hold smpc
--eval-accuracy's numbers (accuracy_of; the own losses' checked against
the Trainer's compute_metrics); --accuracy: models that learn within a few
steps, for the accuracy (hf-trainer/accuracy: accuracy_evals); the
regression and token classifier beside them: make_prediction_refs.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_dropout_refs as d  # noqa: E402

EVAL_SAMPLES, EVAL_EVERY = 20, 4


def evaluation(step, batch_loss, short=False):
    """The evaluation after `step`: batch_loss(b) is batch b's mean loss
    (model in eval mode, no gradients); the eval loss their mean weighted
    by their samples (the Hugging Face Trainer's). With `short`, the last
    EVAL_SAMPLES % BATCH samples are a short last batch, as the Trainer
    evaluates them (and smprun, padding it, for a cross-entropy); without,
    they are left out (smprun, for a loss that cannot leave padding out)."""
    bounds = list(range(0, EVAL_SAMPLES - d.BATCH + 1, d.BATCH))
    if short and EVAL_SAMPLES % d.BATCH:
        bounds.append(bounds[-1] + d.BATCH)
    with torch.no_grad():
        per_batch = [batch_loss(slice(b, min(b + d.BATCH, EVAL_SAMPLES)))
                     for b in bounds]
    sizes = [min(d.BATCH, EVAL_SAMPLES - b) for b in bounds]
    return {"step": step,
            "eval_loss": float(np.dot(per_batch, sizes) / sum(sizes)),
            "batch_losses": per_batch, "samples": sum(sizes)}


def accuracy_of(logits, labels):
    """smpc --eval-accuracy's numbers in PyTorch: of the labels that are not
    -100, those equal to logits.argmax(-1) (its first maximum), and the
    smallest gap between a counted row's label logit and the best other
    logit (how far the run's logits may drift before a hit flips)."""
    keep = labels != -100
    hits = ((logits.argmax(-1) == labels) & keep).sum().item()
    rows, lab = logits[keep].double(), labels[keep]
    target = rows.gather(-1, lab.unsqueeze(-1)).squeeze(-1)
    others = rows.scatter(-1, lab.unsqueeze(-1), float("-inf")).max(-1).values
    return {"eval_accuracy": hits / keep.sum().item(),
            "eval_labels": int(keep.sum().item()),
            "min_top_gap": (target - others).abs().min().item()}


def top_k_accuracies(logits, labels, ks):
    """smpc --eval-metrics topK_accuracy in PyTorch: of the labels that are
    not -100, the share whose label's rank (the classes with a greater
    logit, or an equal one at a lower class) is below K, checked against
    scikit-learn's top_k_accuracy_score (which breaks ties otherwise: the
    rows hold none)."""
    from sklearn.metrics import top_k_accuracy_score
    keep = labels != -100
    rows, lab = logits[keep].double(), labels[keep]
    target = rows.gather(-1, lab.unsqueeze(-1))
    cls = torch.arange(rows.shape[-1])
    rank = ((rows > target) | ((rows == target) & (cls < lab.unsqueeze(-1)))).sum(-1)
    out = {}
    for k in ks:
        out[f"top{k}_accuracy"] = (rank < k).double().mean().item()
        sk = top_k_accuracy_score(lab.numpy(), rows.numpy(), k=k,
                                  labels=np.arange(rows.shape[-1]))
        assert abs(sk - out[f"top{k}_accuracy"]) < 1e-12, (k, sk, out)
    return out


def classification_metrics(preds, labels, classes):
    """smpc --eval-metrics' numbers, as a Trainer user's compute_metrics
    takes them from scikit-learn (the GLUE metrics of `evaluate`: f1,
    matthews_correlation; the averaged f1, precision and recall): the
    argmax predictions against the labels, -100 left out. The binary f1,
    precision and recall for 2 classes only."""
    from sklearn import metrics as m
    keep = labels != -100
    p, y = np.asarray(preds)[keep], np.asarray(labels)[keep]
    out = {"matthews_correlation": float(m.matthews_corrcoef(y, p))}
    for name, fn in (("f1", m.f1_score), ("precision", m.precision_score),
                     ("recall", m.recall_score)):
        if classes == 2:
            out[name] = float(fn(y, p, zero_division=0))
        for average in ("macro", "micro", "weighted"):
            out[f"{name}_{average}"] = float(fn(y, p, average=average, zero_division=0))
    return out


def write_ref(path, losses, train_ref, flags, evals, **extra):
    """Checks the run's training losses against the fixture's reference
    `train_ref` (the same model trained) and writes the evaluations."""
    ref = json.loads(train_ref.read_text())["losses"]
    worst = max(abs(a - b) / abs(b) for a, b in zip(losses, ref))
    assert worst < 1e-5, f"not the fixture's model: training losses {worst:.2e} off {train_ref}"
    config = {"flags": flags, "eval_every": EVAL_EVERY, "eval_samples": EVAL_SAMPLES,
              "batch": d.BATCH, "torch": torch.__version__, **extra,
              "train_losses_vs_" + train_ref.stem: worst}
    path.write_text(json.dumps({"config": config, "evals": evals}, indent=2) + "\n")
    for e in evals:
        print(path.name, "step", e["step"], "eval_loss", "%.7f" % e["eval_loss"])


def gpt2_evals():
    """dropout/gpt2: the Hugging Face GPT-2 (default dropouts 0.1) trained 8
    AdamW steps with smp's masks as make_dropout_refs.make_gpt2 trains it
    (checked against its ref_adamw.json), evaluated after steps 4 and 8 on
    20 held-out sequences: model.eval(), torch.no_grad(), cross-entropy
    over every position, the batches' mean weighted by their samples (two
    whole batches and a short one of 4, as the Trainer evaluates). Writes
    gpt2/eval/{input_ids,labels}.npy and gpt2/ref_adamw_eval.json."""
    from transformers import GPT2Config, GPT2LMHeadModel
    out = d.OUT / "gpt2"
    cfg = dict(n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=16,
               eos_token_id=0, bos_token_id=0)
    torch.manual_seed(0)
    sdpa = GPT2LMHeadModel(GPT2Config(**cfg, attn_implementation="sdpa"))
    model = GPT2LMHeadModel(GPT2Config(**cfg, attn_implementation="eager"))
    model.load_state_dict(sdpa.state_dict())
    ids = torch.from_numpy(np.load(out / "data" / "input_ids.npy"))
    labels = torch.from_numpy(np.load(out / "data" / "labels.npy"))
    g = torch.Generator().manual_seed(4)
    eids = torch.randint(0, 64, (EVAL_SAMPLES, 8), generator=g)
    elabels = torch.randint(0, 64, (EVAL_SAMPLES, 8), generator=g)
    (out / "eval").mkdir(exist_ok=True)
    np.save(out / "eval" / "input_ids.npy", eids.numpy())
    np.save(out / "eval" / "labels.npy", elabels.numpy())

    def logits(i):
        return model(input_ids=i, attention_mask=torch.ones_like(i), use_cache=False,
                     return_dict=False)[0]

    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    losses, evals = [], []
    with d.StreamedDropout() as drops:
        for k in range(d.STEPS):
            model.train()
            idx = [(k * d.BATCH + i) % d.SAMPLES for i in range(d.BATCH)]
            drops.step, drops.calls = k, 0
            opt.zero_grad()
            loss = F.cross_entropy(logits(ids[idx]).reshape(-1, 64), labels[idx].reshape(-1))
            loss.backward()
            losses.append(loss.item())
            opt.step()
            if (k + 1) % EVAL_EVERY == 0:
                model.eval()
                evals.append(evaluation(k + 1, lambda b: F.cross_entropy(
                    logits(eids[b]).reshape(-1, 64), elabels[b].reshape(-1)).item(),
                    short=True))
                with torch.no_grad():  # smpc --eval-accuracy's
                    evals[-1].update(accuracy_of(logits(eids), elabels))
    import transformers
    write_ref(out / "ref_adamw_eval.json", losses, out / "ref_adamw.json",
              "--optimizer adamw --lr 0.01 --seed 1234", evals,
              transformers=transformers.__version__)


def adamw_evaluations(model, train, held, lr, losses, norms):
    """Trains `model` 12 AdamW steps (lr `lr`, batch 8) on the 64 samples of
    `train` (adamw_step: `losses`, `norms`), yielding after steps 4, 8 and 12
    the step and the losses of `held`'s batches of 8 (the last one short),
    in eval() under torch.no_grad() (the model left in eval())."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    n = len(next(iter(held.values())))
    for k in range(12):
        rows = [(k * 8 + i) % 64 for i in range(8)]
        adamw_step(model, opt, {key: v[rows] for key, v in train.items()},
                   losses, norms)
        if (k + 1) % 4:
            continue
        model.eval()
        with torch.no_grad():
            yield k + 1, [model(**{key: v[b:b + 8] for key, v in held.items()}).loss.item()
                          for b in range(0, n, 8)]


def own_loss_model(name):
    """The Hugging Face model of own_loss_evals(name), fresh from its
    config (torch.manual_seed(0)), with how it is exported."""
    import transformers as T
    torch.manual_seed(0)
    if name == "gpt2loss":
        model = T.GPT2LMHeadModel(T.GPT2Config(
            n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=16,
            resid_pdrop=0, embd_pdrop=0, attn_pdrop=0, use_cache=False))
        # transformers 5.24 finds no loss_type in the class name
        # GPT2LMHeadModel (not *ForCausalLM), so its Trainer would count
        # the unshifted labels for num_items_in_batch (a sum over 48
        # counted labels divided by 55): named, it counts the model's.
        return model, {}, ("loss", "logits"), "ForCausalLM"
    if name == "llamaloss":  # grouped-query attention, RoPE, RMSNorm
        model = T.LlamaForCausalLM(T.LlamaConfig(
            vocab_size=64, hidden_size=32, intermediate_size=64,
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=16, use_cache=False))
        return model, {}, ("loss",), None
    if name == "bartloss":  # the labels shifted into the decoder's input
        model = T.BartForConditionalGeneration(T.BartConfig(
            vocab_size=64, d_model=32, encoder_layers=1, decoder_layers=1,
            encoder_attention_heads=2, decoder_attention_heads=2,
            encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=16,
            dropout=0, attention_dropout=0, activation_dropout=0,
            use_cache=False))
        return model, {}, ("loss",), None
    # torch 2.15's dynamo export of T5 with labels fails ("Failed to
    # decompose the FX graph"): its users fall back to dynamo=False, whose
    # TorchScript export shifts the labels right into the decoder's input
    # with a ScatterND on int64 (`y[..., 1:] = labels[..., :-1]`).
    model = T.T5ForConditionalGeneration(T.T5Config(
        vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
        dropout_rate=0, decoder_start_token_id=0, pad_token_id=0,
        use_cache=False))
    return model, {"dynamo": False}, ("loss",), None


def adamw_step(model, opt, batch, losses, norms):
    """One step of `model` in train() mode on `batch` (its keyword
    inputs, labels included): its loss and the gradient norm before the
    update recorded in `losses` and `norms`."""
    model.train()
    opt.zero_grad()
    loss = model(**batch).loss
    loss.backward()
    losses.append(loss.item())
    norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf")).item())
    opt.step()


def trainer_evaluate(model, dataset, size, causal, classes=0):
    """Trainer.evaluate's metrics of `model` on `dataset` in batches of
    `size`, with trainer_accuracy's compute_metrics on the argmax (and a
    classifier's classification_metrics)."""
    import tempfile
    from transformers import Trainer, TrainingArguments
    with tempfile.TemporaryDirectory() as tmp:
        return Trainer(
            model=model, eval_dataset=dataset, args=TrainingArguments(
                output_dir=tmp, per_device_eval_batch_size=size, use_cpu=True,
                report_to=[]), compute_metrics=trainer_accuracy(causal, classes),
            preprocess_logits_for_metrics=lambda logits, _: (
                logits[0] if isinstance(logits, tuple) else logits).argmax(-1)).evaluate()


def trainer_accuracy(causal, classes=0):
    """A Trainer user's compute_metrics for a language model's accuracy
    (the Hugging Face examples' run_mlm / run_clm, -100 left out): the
    argmax predictions against the labels, shifted for a causal LM; for a
    classifier of `classes` classes its classification_metrics too (run_glue's)."""
    def metrics(p):
        preds, labels = p.predictions, p.label_ids
        if causal:
            preds, labels = preds[:, :-1], labels[:, 1:]
        keep = labels != -100
        out = {"accuracy": float(((preds == labels) & keep).sum() / keep.sum())}
        if classes:
            out.update(classification_metrics(preds, labels, classes))
        return out
    return metrics


def own_loss_evals(name):
    """test/fixtures/hf-trainer/NAME: a Hugging Face model that computes its
    own loss (fresh init, dropouts 0), exported as a Trainer user exports
    it: torch.onnx.export on a module returning model(input_ids=...,
    labels=...)'s loss (and gpt2loss's logits), the labels shifted, -100
    ignored and the mean taken inside the model. gpt2loss: GPT2LMHeadModel
    with the export's defaults; t5loss: T5ForConditionalGeneration (labels
    of 6 tokens, shifted right into the decoder's input), dynamo=False;
    llamaloss: LlamaForCausalLM (grouped-query attention) and bartloss:
    BartForConditionalGeneration (the labels shifted right into the
    decoder's input, their -100s replaced by the pad token), the export's
    defaults.
    Trained 4 AdamW steps (lr 0.01) on 16 samples whose labels are -100 at
    random (data/), evaluated after steps 2 and 4 on 12 held-out samples
    (eval/: a batch of 8 and a short one of 4) as the Trainer evaluates:
    each batch's own loss, weighted by its samples; checked against
    Trainer.evaluate() itself; and so with per_device_eval_batch_size 4
    and 12. Writes model.onnx, data/, eval/, ref_adamw.json and
    ref_adamw_eval.json (ref_adamw_eval4.json, ref_adamw_eval12.json)."""
    import transformers
    out = d.ROOT / "test" / "fixtures" / "hf-trainer" / name
    for sub in ("data", "eval"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(6)
    label_len = 6 if name == "t5loss" else 8

    def samples(n):
        ids = torch.randint(1, 64, (n, 8), generator=g)
        labels = (ids.clone() if label_len == 8
                  else torch.randint(1, 64, (n, label_len), generator=g))
        labels[torch.rand(n, label_len, generator=g) < 0.25] = -100
        return ids, labels

    ids, labels = samples(16)
    eids, elabels = samples(12)
    for sub, (i, l) in (("data", (ids, labels)), ("eval", (eids, elabels))):
        np.save(out / sub / "input_ids.npy", i.numpy())
        np.save(out / sub / "labels.npy", l.numpy())
    model, export_args, outputs, loss_type = own_loss_model(name)
    causal = name in ("gpt2loss", "llamaloss")
    model.eval()

    class WithLoss(torch.nn.Module):
        """What the exporter takes (model(input_ids=..., labels=...) with
        its keyword arguments fails in torch 2.15's dynamo export)."""

        def __init__(self, lm):
            super().__init__()
            self.lm = lm

        def forward(self, input_ids, labels):
            o = self.lm(input_ids=input_ids, labels=labels)
            return (o.loss, o.logits) if len(outputs) == 2 else o.loss

    torch.onnx.export(WithLoss(model), (ids[:8], labels[:8]), str(out / "model.onnx"),
                      input_names=["input_ids", "labels"], output_names=list(outputs),
                      dynamic_axes={"input_ids": {0: "batch"},
                                    "labels": {0: "batch"}}, **export_args)
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    dataset = [{"input_ids": eids[i], "labels": elabels[i]} for i in range(12)]
    losses, norms = [], []
    evals = {8: [], 4: [], 12: []}  # by the Trainer's per_device_eval_batch_size
    for k in range(4):
        rows = [(k * 8 + i) % 16 for i in range(8)]
        adamw_step(model, opt, {"input_ids": ids[rows], "labels": labels[rows]},
                   losses, norms)
        if (k + 1) % 2:
            continue
        model.eval()
        with torch.no_grad():
            means = {size: [model(input_ids=eids[b:b + size],
                                  labels=elabels[b:b + size]).loss.item()
                            for b in range(0, 12, size)] for size in evals}
            # smpc --eval-accuracy's: the labels the model's cross-entropy
            # reads (a causal LM's shifted), against the logits' argmax.
            logits = model(input_ids=eids, labels=elabels).logits
            acc = (accuracy_of(logits[:, :-1], elabels[:, 1:]) if causal
                   else accuracy_of(logits, elabels))
        if loss_type:
            model.loss_type = loss_type
        for size, out_evals in evals.items():
            sizes = [min(size, 12 - b) for b in range(0, 12, size)]
            want = float(np.dot(means[size], sizes) / 12)
            result = trainer_evaluate(model, dataset, size, causal)
            got = result["eval_loss"]
            assert abs(got - want) < 1e-6 * abs(want), (got, want)
            assert abs(result["eval_accuracy"] - acc["eval_accuracy"]) < 1e-12, (
                result["eval_accuracy"], acc)
            out_evals.append({"step": k + 1, "eval_loss": want, "batch_losses": means[size],
                              "samples": 12, "trainer_eval_loss": got, **acc,
                              "trainer_eval_accuracy": result["eval_accuracy"]})
            print(name, "step", k + 1, "eval batch", size, "eval_loss %.7f" % want)
    config = {"flags": "--optimizer adamw --lr 0.01", "batch": 8,
              "torch": torch.__version__, "transformers": transformers.__version__}
    (out / "ref_adamw.json").write_text(json.dumps(
        {"config": config, "losses": losses, "grad_norms": norms}, indent=2) + "\n")
    for size, out_evals in evals.items():
        extra = {} if size == 8 else {"eval_batch_size": size}
        (out / ("ref_adamw_eval%s.json" % ("" if size == 8 else size))).write_text(
            json.dumps({"config": {**config, **extra}, "evals": out_evals},
                       indent=2) + "\n")


def accuracy_evals():
    """test/fixtures/hf-trainer/accuracy: two Hugging Face models (fresh
    init from a config, dropouts 0) that learn a task within a few steps, so
    that smpc --eval-accuracy's accuracy moves: lm, a GPT2LMHeadModel on
    counting sequences (from a random start, modulo 16, of its 64 tokens;
    a quarter of the labels -100), exported with its own loss
    and logits (lm.onnx: --loss loss) and with its logits only
    (lm_logits.onnx: --loss cross_entropy:logits:next, `next` the labels
    shifted, -100 last); cls, a BertForSequenceClassification of 3 classes
    (the label: the first token modulo 3) with its own loss (cls.onnx);
    gptcls, a GPT2ForSequenceClassification (the same labels; rows
    right-padded with its pad token 0, whose logits it pools at each row's
    last other token) with its own loss (gptcls.onnx); bincls, cls's
    BERT with 2 classes (the first token modulo 2: MRPC's shape).
    Each trained 12 AdamW steps (lr 0.003 and 0.01, batch 8) on 64 samples and
    evaluated after steps 4, 8 and 12 on 20 held-out samples (batches of
    8, 8 and 4) by Trainer.evaluate with a compute_metrics of the accuracy
    (argmax against the labels the loss reads; -100 left out) and, for
    the classifiers, scikit-learn's classification_metrics: eval_loss,
    eval_accuracy and the metrics checked against accuracy_of's and
    classification_metrics'. Writes DIR/data, DIR/eval and
    DIR/ref_adamw{,_eval}.json for DIR lm, cls, gptcls and bincls."""
    import transformers as T
    root = d.ROOT / "test" / "fixtures" / "hf-trainer" / "accuracy"
    g = torch.Generator().manual_seed(11)

    def sequences(n):
        start = torch.randint(0, 16, (n, 1), generator=g)
        ids = (start + torch.arange(8)) % 16
        labels = ids.clone()
        labels[torch.rand(n, 8, generator=g) < 0.25] = -100
        return {"input_ids": ids, "labels": labels}

    def classes(n, k=3):
        ids = torch.randint(2, 64, (n, 8), generator=g)
        return {"input_ids": ids, "labels": ids[:, 0] % k}

    def padded(n):  # right-padded with the pad token 0, 3 to 8 tokens
        ids = torch.randint(1, 64, (n, 8), generator=g)
        lengths = torch.randint(3, 9, (n,), generator=g)
        ids[torch.arange(8) >= lengths[:, None]] = 0
        return {"input_ids": ids, "labels": ids[:, 0] % 3}

    torch.manual_seed(0)
    lm = T.GPT2LMHeadModel(T.GPT2Config(
        n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=16,
        resid_pdrop=0, embd_pdrop=0, attn_pdrop=0, use_cache=False))
    torch.manual_seed(0)
    cls = T.BertForSequenceClassification(T.BertConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, max_position_embeddings=16,
        hidden_dropout_prob=0, attention_probs_dropout_prob=0, num_labels=3))
    # The LM at lr 0.003: at 0.01 its AdamW steps amplify rounding (by
    # step 12 PyTorch's fp32 losses were 3e-5 off its fp64 ones, its
    # gradient norms 2.6e-4); at 0.003 within 1.3e-6.
    # A decoder classifier pools the logits of each row's last token that
    # is not the pad token: logits[arange(B), last], a GatherND.
    torch.manual_seed(0)
    gptcls = T.GPT2ForSequenceClassification(T.GPT2Config(
        n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=16,
        resid_pdrop=0, embd_pdrop=0, attn_pdrop=0, use_cache=False,
        num_labels=3, pad_token_id=0))
    torch.manual_seed(0)
    bincls = T.BertForSequenceClassification(T.BertConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, max_position_embeddings=16,
        hidden_dropout_prob=0, attention_probs_dropout_prob=0, num_labels=2))
    for name, model, make, causal, lr in (
            ("lm", lm, sequences, True, 0.003), ("cls", cls, classes, False, 0.01),
            ("gptcls", gptcls, padded, False, 0.01),
            ("bincls", bincls, lambda n: classes(n, 2), False, 0.01)):
        nclass = 0 if causal else model.config.num_labels
        out = root / name
        train, held = make(64), make(20)
        for sub, data in (("data", train), ("eval", held)):
            (out / sub).mkdir(parents=True, exist_ok=True)
            for key, value in data.items():
                np.save(out / sub / f"{key}.npy", value.numpy())
            if causal:  # the logits-only export's labels: next tokens
                nxt = torch.cat([data["labels"][:, 1:],
                                 torch.full((len(data["labels"]), 1), -100)], 1)
                np.save(out / sub / "next.npy", nxt.numpy())

        class WithLoss(torch.nn.Module):
            def __init__(self, m, logits_only=False):
                super().__init__()
                self.m, self.logits_only = m, logits_only

            def forward(self, input_ids, labels=None):
                o = self.m(input_ids=input_ids, labels=labels)
                return o.logits if self.logits_only else (o.loss, o.logits)

        model.eval()
        dyn = {"input_ids": {0: "batch"}, "labels": {0: "batch"}}
        torch.onnx.export(WithLoss(model), (train["input_ids"][:8], train["labels"][:8]),
                          str(out / f"{name}.onnx"), input_names=["input_ids", "labels"],
                          output_names=["loss", "logits"], dynamic_axes=dyn)
        if causal:
            torch.onnx.export(WithLoss(model, True), (train["input_ids"][:8],),
                              str(out / f"{name}_logits.onnx"),
                              input_names=["input_ids"], output_names=["logits"],
                              dynamic_axes={"input_ids": {0: "batch"}})
        losses, norms, evals = [], [], []
        dataset = [{k: v[i] for k, v in held.items()} for i in range(20)]
        for step, means in adamw_evaluations(model, train, held, lr, losses, norms):
            with torch.no_grad():
                logits = model(**held).logits
            labels = held["labels"]
            acc = (accuracy_of(logits[:, :-1], labels[:, 1:]) if causal
                   else accuracy_of(logits, labels))
            if nclass:
                acc["metrics"] = classification_metrics(
                    logits.argmax(-1).numpy(), labels.numpy(), nclass)
            acc.setdefault("metrics", {}).update(
                top_k_accuracies(logits[:, :-1], labels[:, 1:], [2, 5]) if causal
                else top_k_accuracies(logits, labels, [2] if nclass > 2 else []))
            if causal:  # see own_loss_model
                model.loss_type = "ForCausalLM"
            result = trainer_evaluate(model, dataset, 8, causal, nclass)
            want = float(np.dot(means, [8, 8, 4]) / 20)
            assert abs(result["eval_loss"] - want) < 1e-6 * abs(want), (result, want)
            assert abs(result["eval_accuracy"] - acc["eval_accuracy"]) < 1e-12, (result, acc)
            for key, value in acc.get("metrics", {}).items():
                if not key.startswith("top"):  # top_k_accuracies checked them
                    assert abs(result["eval_" + key] - value) < 1e-12, (key, result, acc)
            # smpc --eval-predictions: each row's argmax (every position),
            # and the smallest gap between a row's two largest logits.
            top2 = logits.double().topk(2, dim=-1).values
            evals.append({"step": step, "eval_loss": want, "batch_losses": means,
                          "samples": 20, **acc,
                          "predictions": logits.argmax(-1).tolist(),
                          "min_prediction_gap": (top2[..., 0] - top2[..., 1]).min().item(),
                          # smpc --eval-logits: the logits themselves (cls's)
                          **({"logits": logits.tolist()} if name == "cls" else {}),
                          "trainer_eval_loss": result["eval_loss"],
                          "trainer_eval_accuracy": result["eval_accuracy"]})
            print(name, "step", step, "eval_loss %.7f" % want,
                  "accuracy %.4f" % acc["eval_accuracy"], "of", acc["eval_labels"],
                  "gap %.2e" % acc["min_top_gap"])
        config = {"flags": f"--optimizer adamw --lr {lr}", "batch": 8,
                  "torch": torch.__version__, "transformers": T.__version__}
        (out / "ref_adamw.json").write_text(json.dumps(
            {"config": config, "losses": losses, "grad_norms": norms}, indent=2) + "\n")
        (out / "ref_adamw_eval.json").write_text(json.dumps(
            {"config": config, "evals": evals}, indent=2) + "\n")


def resnet_evals():
    """test/fixtures/resnet (make_resnet.py): PyTorch's eval() logits of the
    ResNet after ref_<opt>'s 5 steps (logits_<opt>.npy, on the first 8
    samples: running statistics and parameters trained) give the eval loss
    of those samples, cross-entropy against their labels. Writes
    resnet/heldout/{x,labels}.npy (those 8) and resnet/ref_<opt>_eval.json.
    numpy only: the logits are PyTorch's."""
    out = d.ROOT / "test" / "fixtures" / "resnet"
    x, labels = np.load(out / "x.npy"), np.load(out / "labels.npy")
    (out / "heldout").mkdir(exist_ok=True)
    np.save(out / "heldout" / "x.npy", x[:8])
    np.save(out / "heldout" / "labels.npy", labels[:8])
    for opt in ("sgd", "adamw"):
        z = np.load(out / f"logits_{opt}.npy").astype(np.float64)
        z -= z.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        loss = float(-logp[np.arange(8), labels[:8]].mean())
        (out / f"ref_{opt}_eval.json").write_text(json.dumps(
            {"config": {"from": f"logits_{opt}.npy", "step": 5, "batch": 8},
             "evals": [{"step": 5, "eval_loss": loss, "batch_losses": [loss]}]},
            indent=2) + "\n")
        print(f"resnet {opt} step 5 eval_loss {loss:.7f}")


def main():
    if "--resnet" in sys.argv:  # numpy only
        resnet_evals()
        return
    if "--own-loss" in sys.argv:  # needs transformers (5.24)
        names = sys.argv[sys.argv.index("--own-loss") + 1:] or [
            "gpt2loss", "t5loss", "llamaloss", "bartloss"]
        for name in names:
            own_loss_evals(name)
        return
    if "--accuracy" in sys.argv:  # needs transformers (5.24)
        accuracy_evals()
        return
    if "--gpt2" in sys.argv:  # needs transformers (the fixture's: 5.24)
        gpt2_evals()
        return
    d.check_known_answers()
    out = d.OUT
    x = torch.from_numpy(np.load(out / "data" / "x.npy"))
    t = torch.from_numpy(np.load(out / "data" / "t.npy"))
    g = torch.Generator().manual_seed(3)
    ex = torch.randn(EVAL_SAMPLES, d.SEQ, d.DIN, generator=g)
    et = torch.randn(EVAL_SAMPLES, d.SEQ, d.DOUT, generator=g)
    (out / "eval").mkdir(exist_ok=True)
    np.save(out / "eval" / "x.npy", ex.numpy())
    np.save(out / "eval" / "t.npy", et.numpy())

    torch.manual_seed(0)
    model = d.Block()
    order = {"drop_in": 0, "drop_attn": 1, "drop_res1": 2, "drop_mlp": 3,
             "drop_res2": 4}
    for module, stream in order.items():
        drop = d.SmpDropout(getattr(model, module).p)
        drop.stream = stream
        setattr(model, module, drop)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses, evals = [], []
    for k in range(d.STEPS):
        model.train()
        idx = [(k * d.BATCH + i) % d.SAMPLES for i in range(d.BATCH)]
        for m in model.modules():
            if isinstance(m, d.SmpDropout):
                m.step = k
        opt.zero_grad()
        loss = F.mse_loss(model(x[idx]), t[idx])
        loss.backward()
        losses.append(loss.item())
        opt.step()
        if (k + 1) % EVAL_EVERY == 0:
            model.eval()  # SmpDropout has no eval mode: switch it off too
            saved = {n: getattr(model, n) for n in order}
            for n in order:
                setattr(model, n, torch.nn.Identity())
            evals.append(evaluation(k + 1, lambda b: F.mse_loss(model(ex[b]), et[b]).item()))
            for n, m in saved.items():
                setattr(model, n, m)
    write_ref(out / "ref_sgd_eval.json", losses, out / "ref_sgd.json",
              "--optimizer sgd --lr 0.05 --momentum 0.9 --seed 1234", evals)

if __name__ == "__main__":
    main()
