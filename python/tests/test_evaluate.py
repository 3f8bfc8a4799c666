"""smp.train(eval_data=...): held-out samples evaluated as model.eval()
does, against PyTorch (test/fixtures/dropout, python/make_eval_refs.py)."""

import json
from pathlib import Path

import numpy as np
import pytest

import smp

FX = Path(__file__).resolve().parents[2] / "test" / "fixtures" / "dropout"


@pytest.fixture(scope="module")
def trained(tools, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("eval")
    art = smp.compile(FX / "block.onnx", output=tmp / "b.smpx", loss="mse:y:t",
                      batch_size=8, seed=1234, optimizer="sgd", lr=0.05,
                      momentum=0.9)
    # The held-out samples as arrays (written to .npy by smp.train).
    held_out = {n: np.load(FX / "eval" / f"{n}.npy") for n in ("x", "t")}
    return smp.train(art, data=FX / "data", steps=8, eval_data=held_out,
                     eval_every=4, progress=False)


def test_eval_losses_match_pytorch(trained):
    ref = json.loads((FX / "ref_sgd_eval.json").read_text())["evals"]
    assert [s for s, _ in trained.eval_losses] == [e["step"] for e in ref]
    for (_, got), want in zip(trained.eval_losses, ref):
        assert abs(got - want["eval_loss"]) <= 1e-5 * abs(want["eval_loss"])
    # Evaluating trains nothing: the losses stay PyTorch's.
    train_ref = json.loads((FX / "ref_sgd.json").read_text())["losses"]
    np.testing.assert_allclose(trained.losses, train_ref, rtol=1e-5)


def test_eval_rows_join_their_steps(trained, tmp_path):
    rows = trained.metrics
    assert [r["step"] for r in rows] == list(range(1, 9))
    assert [r["step"] for r in rows if "eval_loss" in r] == [4, 8]
    assert rows[3]["eval_samples"] == 16 and "loss" in rows[3]
    assert trained.eval_metrics[0]["eval_batches"] == 2
    # smp.read_metrics joins them the same way; plot_metrics draws them.
    path = tmp_path / "m.jsonl"
    lines = []
    for r in rows:
        lines.append(json.dumps({k: v for k, v in r.items()
                                 if not k.startswith("eval_")}))
        if "eval_loss" in r:
            lines.append(json.dumps({"step": r["step"], "eval_loss": r["eval_loss"]}))
    path.write_text("\n".join(lines) + "\n")
    read = smp.read_metrics(path)
    assert [r.get("eval_loss") for r in read] == [r.get("eval_loss") for r in rows]
    pytest.importorskip("matplotlib")
    assert smp.plot_metrics(path, tmp_path / "m.png", keys=["loss", "eval_loss"]).exists()


def test_eval_every_without_eval_data_is_refused(tools, trained):
    with pytest.raises(smp.SmpError) as e:
        smp.train(FX.parent / "none.smpx", data=FX / "data", steps=1,
                  eval_every=2, progress=False)
    assert "--eval-every K evaluates held-out samples; give them with " \
           "--eval-data DIR" in str(e.value)


def test_eval_on_start_and_delay(tools, tmp_path):
    """smp.compile(eval_on_start=True, eval_delay=6) (the Trainer's
    eval_on_start and eval_delay): an evaluation before the first step,
    reported as step 0 (a row without a training loss), and none before
    step 6 but the one after the last; the training losses stay 8."""
    art = smp.compile(FX / "block.onnx", output=tmp_path / "b.smpx",
                      loss="mse:y:t", batch_size=8, seed=1234,
                      optimizer="sgd", lr=0.05, momentum=0.9,
                      eval_on_start=True, eval_delay=6, eval_every=4)
    run = smp.train(art, data=FX / "data", steps=8, eval_data=FX / "eval",
                    progress=False)
    assert [s for s, _ in run.eval_losses] == [0, 8]
    assert len(run.losses) == 8
    ref = json.loads((FX / "ref_sgd_eval.json").read_text())["evals"]
    got = dict(run.eval_losses)[8]
    assert abs(got - ref[-1]["eval_loss"]) <= 1e-5 * abs(ref[-1]["eval_loss"])
    assert run.metrics[0]["step"] == 0 and "loss" not in run.metrics[0]


def test_eval_accuracy_is_the_trainers(tools, tmp_path):
    """eval_accuracy=True (smpc --eval-accuracy): the Trainer's
    compute_metrics accuracy of a Hugging Face GPT-2 that learns
    (python/make_eval_refs.py --accuracy), as (step, accuracy) pairs."""
    fx = FX.parent / "hf-trainer" / "accuracy" / "lm"
    art = smp.compile(fx / "lm.onnx", output=tmp_path / "lm.smpx", loss="loss",
                      batch_size=8, optimizer="adamw", lr=0.003,
                      eval_accuracy=True)
    assert "its accuracy too" in art.plan_text
    run = smp.train(art, data=fx / "data", steps=8, eval_data=fx / "eval",
                    eval_every=4, progress=False)
    ref = json.loads((fx / "ref_adamw_eval.json").read_text())["evals"][:2]
    assert [s for s, _ in run.eval_accuracies] == [4, 8]
    for (_, got), want in zip(run.eval_accuracies, ref):
        assert round(got * want["eval_labels"]) == round(
            want["trainer_eval_accuracy"] * want["eval_labels"])
    assert [m["eval_labels"] for m in run.eval_metrics] == [108, 108]


def test_eval_metrics_are_scikit_learns(tools, tmp_path):
    """eval_metrics=[...] (smpc --eval-metrics): a binary classifier's F1,
    precision and Matthews' correlation as a Trainer user's compute_metrics
    returned them from scikit-learn (python/make_eval_refs.py --accuracy),
    as eval_NAME in each evaluation's row."""
    fx = FX.parent / "hf-trainer" / "accuracy" / "bincls"
    names = ["f1", "precision", "matthews_correlation"]
    art = smp.compile(fx / "bincls.onnx", output=tmp_path / "b.smpx", loss="loss",
                      batch_size=8, optimizer="adamw", lr=0.01, eval_metrics=names)
    assert "its f1, precision, matthews_correlation too" in art.plan_text
    run = smp.train(art, data=fx / "data", steps=8, eval_data=fx / "eval",
                    eval_every=4, progress=False)
    ref = json.loads((fx / "ref_adamw_eval.json").read_text())["evals"][:2]
    assert [m["step"] for m in run.eval_metrics] == [4, 8]
    for got, want in zip(run.eval_metrics, ref):
        assert "eval_accuracy" not in got
        for name in names:
            assert abs(got["eval_" + name] - want["metrics"][name]) < 1e-8, name
    # plot_metrics draws them by default, after the eval loss.
    keys = smp.metrics.default_keys(run.metrics)
    assert keys[:5] == ["loss", "eval_loss", "eval_f1", "eval_precision",
                        "eval_matthews_correlation"], keys


def test_compute_metrics_gets_pytorchs_predictions(tools, tmp_path):
    """compute_metrics (the Trainer's, with eval_predictions=True): called
    with an EvalPrediction of each evaluation, PyTorch's argmax classes
    for every held-out sample (python/make_eval_refs.py --accuracy) and
    the labels input as fed; what it returns joins the evaluation's row as
    eval_NAME. A GPT-2 LM with its own loss: the predictions of every
    position and the labels unshifted, as the Trainer passes them, so
    run_clm.py's compute_metrics (which shifts them itself) gives the
    accuracy smprun counts."""
    fx = FX.parent / "hf-trainer" / "accuracy" / "lm"
    art = smp.compile(fx / "lm.onnx", output=tmp_path / "lm.smpx", loss="loss",
                      batch_size=8, optimizer="adamw", lr=0.003,
                      eval_accuracy=True, eval_predictions=True)
    seen = []

    def compute_metrics(eval_preds):  # run_clm.py's, with numpy's accuracy
        preds, labels = eval_preds  # unpacks as the Trainer's does
        assert eval_preds.predictions is preds and preds.dtype == np.float32
        seen.append((preds, labels))
        labels = labels[:, 1:].reshape(-1)
        preds = preds[:, :-1].reshape(-1)
        keep = labels != -100
        return {"token_accuracy": float((preds == labels)[keep].mean()),
                "eval_counted": int(keep.sum())}

    run = smp.train(art, data=fx / "data", steps=8, eval_data=fx / "eval",
                    eval_every=4, progress=False, compute_metrics=compute_metrics)
    ref = json.loads((fx / "ref_adamw_eval.json").read_text())["evals"][:2]
    assert [m["step"] for m in run.eval_metrics] == [4, 8]
    for (preds, labels), got, want in zip(seen, run.eval_metrics, ref):
        np.testing.assert_array_equal(preds, np.array(want["predictions"]))
        np.testing.assert_array_equal(labels, np.load(fx / "eval" / "labels.npy"))
        assert got["eval_token_accuracy"] == pytest.approx(got["eval_accuracy"], abs=1e-8)
        assert got["eval_counted"] == want["eval_labels"]


def test_run_glue_and_run_ner_compute_metrics_take_the_logits(tools, tmp_path):
    """eval_logits=True: the logits themselves, as the Trainer passes them
    without preprocess_logits_for_metrics, so the Hugging Face examples'
    compute_metrics run unchanged: run_glue.py's (np.argmax(preds, axis=1)
    on a sequence classifier's [samples, classes]) gives the Trainer's
    accuracy, run_ner.py's (np.argmax(predictions, axis=2) on a token
    classifier's [samples, positions, classes]) the argmax PyTorch's."""
    acc = FX.parent / "hf-trainer" / "accuracy"
    seen = {}

    def run(name, compute_metrics):
        art = smp.compile(acc / name / f"{name}.onnx", output=tmp_path / f"{name}.smpx",
                          loss="loss", batch_size=8, optimizer="adamw", lr=0.01,
                          eval_logits=True)
        return smp.train(art, data=acc / name / "data", steps=4,
                         eval_data=acc / name / "eval", eval_every=4, progress=False,
                         compute_metrics=compute_metrics)

    def glue_metrics(p):  # run_glue.py's, for a classification task
        preds = p.predictions[0] if isinstance(p.predictions, tuple) else p.predictions
        assert preds.shape == (20, 3)
        preds = np.argmax(preds, axis=1)
        return {"accuracy": float((preds == p.label_ids).astype(np.float32).mean())}

    def ner_metrics(p):  # run_ner.py's first line, then the tags compared
        predictions, labels = p
        seen["ner"] = np.argmax(predictions, axis=2)
        return {}

    cls = run("cls", glue_metrics)
    want = json.loads((acc / "cls" / "ref_adamw_eval.json").read_text())["evals"][0]
    assert cls.eval_metrics[0]["eval_accuracy"] == pytest.approx(want["eval_accuracy"], abs=1e-7)
    run("ner", ner_metrics)
    want = json.loads((acc / "ner" / "ref_adamw_eval.json").read_text())["evals"][0]
    np.testing.assert_array_equal(seen["ner"], np.array(want["predictions"]))


def test_compute_metrics_needs_predictions(tools, tmp_path):
    """An artifact compiled without eval_predictions is refused with what to
    do; compute_metrics without eval_data too."""
    fx = FX.parent / "hf-trainer" / "accuracy" / "cls"
    art = smp.compile(fx / "cls.onnx", output=tmp_path / "c.smpx", loss="loss",
                      batch_size=8)
    with pytest.raises(smp.SmpError, match="recompile it with smpc --eval-predictions"):
        smp.train(art, data=fx / "data", steps=1, eval_data=fx / "eval",
                  progress=False, compute_metrics=lambda p: {})
    with pytest.raises(smp.SmpError, match="give the held-out samples as eval_data"):
        smp.train(art, data=fx / "data", steps=1, progress=False,
                  compute_metrics=lambda p: {})


def _entities(tags):
    """seqeval's default (conlleval) chunks of one IOB2 sequence: (type,
    first, last); a chunk ends at an O, a B- or another type's I-."""
    out, start, kind = set(), None, None
    for i, tag in enumerate(list(tags) + ["O"]):
        prefix, _, name = tag.partition("-")
        if start is not None and (prefix in ("O", "B") or name != kind):
            out.add((kind, start, i - 1))
            start = None
        if prefix in ("B", "I") and start is None:
            start, kind = i, name
    return out


def test_compute_metrics_runs_run_ners(tools, tmp_path):
    """Token classification as run_ner.py evaluates it: its compute_metrics
    (seqeval's entity-level precision, recall and F1, here its chunking
    written out where seqeval is not installed) on the predictions of a
    Hugging Face BERT token classifier gives what Trainer.evaluate gave
    with seqeval (python/make_prediction_refs.py --ner)."""
    fx = FX.parent / "hf-trainer" / "accuracy" / "ner"
    ref = json.loads((fx / "ref_adamw_eval.json").read_text())
    tags = ref["config"]["tags"]

    def compute_metrics(p):
        pred = [[tags[int(q)] for q, l in zip(pr, la) if l != -100]
                for pr, la in zip(p.predictions, p.label_ids)]
        true = [[tags[int(l)] for q, l in zip(pr, la) if l != -100]
                for pr, la in zip(p.predictions, p.label_ids)]
        try:
            from seqeval import metrics as s
            return {"precision": s.precision_score(true, pred),
                    "recall": s.recall_score(true, pred), "f1": s.f1_score(true, pred)}
        except ImportError:
            found = {(i, e) for i, t in enumerate(pred) for e in _entities(t)}
            want = {(i, e) for i, t in enumerate(true) for e in _entities(t)}
            hit = len(found & want)
            precision = hit / len(found) if found else 0.0
            recall = hit / len(want) if want else 0.0
            f1 = 2 * precision * recall / (precision + recall) if hit else 0.0
            return {"precision": precision, "recall": recall, "f1": f1}

    art = smp.compile(fx / "ner.onnx", output=tmp_path / "ner.smpx", loss="loss",
                      batch_size=8, optimizer="adamw", lr=0.01, eval_predictions=True)
    run = smp.train(art, data=fx / "data", steps=12, eval_data=fx / "eval",
                    eval_every=4, progress=False, compute_metrics=compute_metrics)
    assert [m["step"] for m in run.eval_metrics] == [4, 8, 12]
    for got, want in zip(run.eval_metrics, ref["evals"]):
        for name in ("precision", "recall", "f1"):
            assert got["eval_" + name] == pytest.approx(want["seqeval"][name], abs=1e-12), name
        assert got["eval_loss"] == pytest.approx(want["eval_loss"], rel=1e-5)
