#!/usr/bin/env python3
"""PyTorch's and the Trainer's evaluations of the models smpc
--eval-predictions and --eval-metrics pearson,spearmanr are checked on
(test/smprun/eval-predictions.test, python/tests/test_evaluate.py), beside
make_eval_refs.py --accuracy's classifiers in test/fixtures/hf-trainer/accuracy:

  --regression  reg: a Hugging Face BERT regression (regression_evals;
                needs transformers 5.24 and scipy)
  --ner         ner: a Hugging Face BERT token classifier scored by
                seqeval as run_ner.py scores it (ner_evals; needs
                transformers 5.24 and seqeval)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_eval_refs import adamw_evaluations, d  # noqa: E402


class WithLoss(torch.nn.Module):
    """A Hugging Face model's loss and logits, as a Trainer user exports
    it (the labels an input)."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, labels):
        o = self.m(input_ids=input_ids, labels=labels)
        return o.loss, o.logits


def write_refs(out, config, losses, norms, evals):
    """out/ref_adamw.json (the training) and out/ref_adamw_eval.json."""
    (out / "ref_adamw.json").write_text(json.dumps(
        {"config": config, "losses": losses, "grad_norms": norms}, indent=2) + "\n")
    (out / "ref_adamw_eval.json").write_text(json.dumps(
        {"config": config, "evals": evals}, indent=2) + "\n")


def regression_evals():
    """test/fixtures/hf-trainer/accuracy/reg: GLUE's STS-B in small, a
    BertForSequenceClassification of num_labels=1 (a regression: the
    Trainer's loss is the mean-squared error of its one logit and the
    float label; fresh init, dropouts 0) on scores from -2.5 to 2.4 (the
    first token's parity times 4 plus the second's last digit / 10,
    centred, so that 12 steps learn more than their mean), exported
    with its logits only (reg.onnx: --loss mse:logits:labels, the labels
    [samples, 1] as the logits) and with its own loss (reg_loss.onnx:
    --loss loss, the model's MSELoss of the squeezed logits and labels). Trained 12 AdamW steps (lr 0.01, batch 8)
    on 64 samples, evaluated after steps 4, 8 and 12 on 16 held-out ones
    by Trainer.evaluate with run_glue's compute_metrics for STS-B (scipy's
    pearsonr and spearmanr of the squeezed predictions against the
    labels, as evaluate's glue metric): eval_loss, pearson, spearmanr and
    the predictions; "first13": the same of the first 13 held-out samples
    (batches of 8 and 5). Writes reg/data, reg/eval and
    reg/ref_adamw{,_eval}.json."""
    import tempfile
    import transformers as T
    from scipy.stats import pearsonr, spearmanr
    out = d.ROOT / "test" / "fixtures" / "hf-trainer" / "accuracy" / "reg"
    g = torch.Generator().manual_seed(12)

    def scores(n):
        ids = torch.randint(2, 64, (n, 8), generator=g)
        y = (ids[:, 0] % 2).float() * 4 + (ids[:, 1] % 10).float() / 10
        return {"input_ids": ids, "labels": y - 2.5}

    torch.manual_seed(0)
    model = T.BertForSequenceClassification(T.BertConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, max_position_embeddings=16,
        hidden_dropout_prob=0, attention_probs_dropout_prob=0, num_labels=1))
    assert model.config.problem_type in (None, "regression")
    train, held = scores(64), scores(16)
    for sub, data in (("data", train), ("eval", held)):
        (out / sub).mkdir(parents=True, exist_ok=True)
        np.save(out / sub / "input_ids.npy", data["input_ids"].numpy())
        np.save(out / sub / "labels.npy", data["labels"].numpy()[:, None])

    class Logits(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids):
            return self.m(input_ids=input_ids).logits

    model.eval()
    torch.onnx.export(Logits(model), (train["input_ids"][:8],), str(out / "reg.onnx"),
                      input_names=["input_ids"], output_names=["logits"],
                      dynamic_axes={"input_ids": {0: "batch"}})
    torch.onnx.export(WithLoss(model).eval(),
                      (train["input_ids"][:8], train["labels"][:8, None]),
                      str(out / "reg_loss.onnx"), input_names=["input_ids", "labels"],
                      output_names=["loss", "logits"],
                      dynamic_axes={"input_ids": {0: "batch"}, "labels": {0: "batch"}})

    def metrics(p):  # run_glue's, for STS-B
        preds = np.squeeze(p.predictions)
        return {"pearson": float(pearsonr(preds, p.label_ids)[0]),
                "spearmanr": float(spearmanr(preds, p.label_ids)[0])}

    losses, norms, evals = [], [], []
    dataset = [{k: v[i] for k, v in held.items()} for i in range(16)]
    for step, means in adamw_evaluations(model, train, held, 0.01, losses, norms):
        with torch.no_grad():
            preds = model(input_ids=held["input_ids"]).logits[:, 0]
        with tempfile.TemporaryDirectory() as tmp:
            trainer = T.Trainer(model=model, eval_dataset=dataset, compute_metrics=metrics,
                                args=T.TrainingArguments(
                                    output_dir=tmp, per_device_eval_batch_size=8,
                                    use_cpu=True, report_to=[]))
            result = trainer.evaluate()
            # The first 13 held-out samples: a short last batch of 5.
            short = trainer.evaluate(eval_dataset=dataset[:13])
        want = float(np.mean(means))
        assert abs(result["eval_loss"] - want) < 1e-6 * abs(want), (result, want)
        mine = metrics(type("P", (), {"predictions": preds.numpy(),
                                      "label_ids": held["labels"].numpy()}))
        for key in ("pearson", "spearmanr"):
            assert abs(result["eval_" + key] - mine[key]) < 1e-12, (key, result, mine)
        evals.append({"step": step, "eval_loss": want, "batch_losses": means,
                      "samples": 16, "metrics": mine,
                      "predictions": preds.tolist(),
                      "trainer_eval_loss": result["eval_loss"],
                      "first13": {k[5:]: short[k] for k in ("eval_loss", "eval_pearson",
                                                           "eval_spearmanr")}})
        print("reg step", step, "eval_loss %.7f" % want, mine, "first 13", evals[-1]["first13"])
    config = {"flags": "--optimizer adamw --lr 0.01", "batch": 8,
              "torch": torch.__version__, "transformers": T.__version__}
    write_refs(out, config, losses, norms, evals)


NER_TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def ner_evals():
    """test/fixtures/hf-trainer/accuracy/ner: token classification as the
    Hugging Face example run_ner.py trains it, a
    BertForTokenClassification of 5 IOB2 tags (NER_TAGS; fresh init,
    dropouts 0) with its own loss (ner.onnx: --loss loss), on 12 tokens
    per sample where tokens 5..14 start a PER span of two and 15..24 a LOC
    span of one, the first position's label -100 (a [CLS]). Trained 12
    AdamW steps (lr 0.01, batch 8) on 64 samples, evaluated after steps 4,
    8 and 12 on 20 held-out ones by Trainer.evaluate with run_ner's
    compute_metrics (seqeval's entity-level precision, recall, F1 and its
    accuracy over the tags whose label is not -100): eval_loss, those
    metrics and the argmax predictions. Needs seqeval. Writes ner/data,
    ner/eval and ner/ref_adamw{,_eval}.json."""
    import tempfile
    import transformers as T
    from seqeval.metrics import accuracy_score, f1_score, precision_score, recall_score
    out = d.ROOT / "test" / "fixtures" / "hf-trainer" / "accuracy" / "ner"
    g = torch.Generator().manual_seed(5)

    def tagged(n):
        ids = torch.randint(5, 64, (n, 12), generator=g)
        tags = torch.zeros(n, 12, dtype=torch.long)
        for i in range(n):
            j = 0
            while j < 12:
                t = ids[i, j].item()
                if 5 <= t < 15 and j + 1 < 12:
                    tags[i, j], tags[i, j + 1] = 1, 2
                    j += 2
                else:
                    tags[i, j] = 3 if 15 <= t < 25 else 0
                    j += 1
        tags[:, 0] = -100
        return {"input_ids": ids, "labels": tags}

    def metrics(p):  # run_ner.py's compute_metrics
        predictions, labels = p
        if predictions.ndim == 3:
            predictions = np.argmax(predictions, axis=2)
        pred = [[NER_TAGS[int(q)] for q, l in zip(pr, la) if l != -100]
                for pr, la in zip(predictions, labels)]
        true = [[NER_TAGS[int(l)] for q, l in zip(pr, la) if l != -100]
                for pr, la in zip(predictions, labels)]
        return {"precision": precision_score(true, pred), "recall": recall_score(true, pred),
                "f1": f1_score(true, pred), "accuracy": accuracy_score(true, pred)}

    torch.manual_seed(0)
    model = T.BertForTokenClassification(T.BertConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, max_position_embeddings=16,
        hidden_dropout_prob=0, attention_probs_dropout_prob=0, num_labels=5))
    train, held = tagged(64), tagged(20)
    for sub, data in (("data", train), ("eval", held)):
        (out / sub).mkdir(parents=True, exist_ok=True)
        for key, value in data.items():
            np.save(out / sub / f"{key}.npy", value.numpy())

    model.eval()
    torch.onnx.export(WithLoss(model).eval(), (train["input_ids"][:8], train["labels"][:8]),
                      str(out / "ner.onnx"), input_names=["input_ids", "labels"],
                      output_names=["loss", "logits"],
                      dynamic_axes={"input_ids": {0: "batch"}, "labels": {0: "batch"}})
    losses, norms, evals = [], [], []
    dataset = [{k: v[i] for k, v in held.items()} for i in range(20)]
    for step, means in adamw_evaluations(model, train, held, 0.01, losses, norms):
        with torch.no_grad():
            logits = model(input_ids=held["input_ids"]).logits
        with tempfile.TemporaryDirectory() as tmp:
            result = T.Trainer(model=model, eval_dataset=dataset, compute_metrics=metrics,
                               args=T.TrainingArguments(
                                   output_dir=tmp, per_device_eval_batch_size=8,
                                   use_cpu=True, report_to=[])).evaluate()
        want = float(np.dot(means, [8, 8, 4]) / 20)
        assert abs(result["eval_loss"] - want) < 1e-6 * abs(want), (result, want)
        mine = metrics((logits.numpy(), held["labels"].numpy()))
        for key, value in mine.items():
            assert abs(result["eval_" + key] - value) < 1e-12, (key, result, mine)
        top2 = logits.double().topk(2, dim=-1).values
        evals.append({"step": step, "eval_loss": want, "batch_losses": means,
                      "samples": 20, "seqeval": mine,
                      "predictions": logits.argmax(-1).tolist(),
                      "min_prediction_gap": (top2[..., 0] - top2[..., 1]).min().item(),
                      "trainer_eval_loss": result["eval_loss"]})
        print("ner step", step, "eval_loss %.7f" % want, mine)
    config = {"flags": "--optimizer adamw --lr 0.01", "batch": 8, "tags": NER_TAGS,
              "torch": torch.__version__, "transformers": T.__version__}
    write_refs(out, config, losses, norms, evals)


def main():
    if "--regression" in sys.argv:
        regression_evals()
    elif "--ner" in sys.argv:
        ner_evals()
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
