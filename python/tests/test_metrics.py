"""smp.read_metrics and smp.plot_metrics on a real run's --metrics file."""

import json
import sys

import numpy as np
import pytest

import smp


@pytest.fixture(scope="module")
def run_metrics(tools, tmp_path_factory):
    """6 steps of the test MLP (float features: samples/s, no tokens)."""
    import subprocess
    from pathlib import Path
    fixtures = Path(__file__).resolve().parents[2] / "test" / "fixtures"
    tmp = tmp_path_factory.mktemp("metrics")
    subprocess.run([str(tools / "smpc"), "compile",
                    str(fixtures / "train" / "mlp.onnx"), "--train", "--loss",
                    "cross_entropy:logits:labels", "--lr-schedule", "cosine",
                    "--batch-size", "8", "-o", str(tmp / "m.smpx")],
                   check=True, capture_output=True)
    subprocess.run([str(tools / "smprun"), str(tmp / "m.smpx"), "--data",
                    str(fixtures / "train" / "mlp"), "--steps", "6",
                    "--metrics", str(tmp / "m.jsonl")],
                   check=True, capture_output=True)
    return tmp / "m.jsonl"


def test_read_metrics(run_metrics, tmp_path):
    rows = smp.read_metrics(run_metrics)
    assert [r["step"] for r in rows] == list(range(1, 7))
    assert rows[0]["tokens_per_s"] is None and rows[0]["samples_per_s"] > 0
    # A resumed run appends: the later row of a step wins.
    lines = run_metrics.read_text().splitlines()
    again = json.loads(lines[3])
    again["loss"] = 123.0
    twice = tmp_path / "twice.jsonl"
    twice.write_text("\n".join(lines + [json.dumps(again)]) + "\n")
    rows = smp.read_metrics(twice)
    assert len(rows) == 6 and rows[3]["loss"] == 123.0


def test_read_metrics_errors(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"step": 1, "loss": 2}\nnot json\n')
    with pytest.raises(smp.SmpError, match=r"bad.jsonl:2: not a metrics row"):
        smp.read_metrics(bad)
    with pytest.raises(smp.SmpError, match=r"none.jsonl: cannot read"):
        smp.read_metrics(tmp_path / "none.jsonl")


def test_plot_metrics(run_metrics, tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib.image
    out = smp.plot_metrics(run_metrics, tmp_path / "run.png")
    image = matplotlib.image.imread(str(out))
    # One panel per series the run has: loss, lr, grad_norm, samples/s,
    # MFU (figsize 8 x 2.2 per panel at 100 dpi).
    assert image.shape[0] == 5 * 220 and image.shape[1] == 800
    assert np.std(image) > 0  # something drawn
    # The rows smp.train returns plot too; an explicit key list.
    rows = smp.read_metrics(run_metrics)
    smp.plot_metrics(rows, tmp_path / "loss.svg", keys=["loss"])
    assert (tmp_path / "loss.svg").read_text().startswith("<?xml")
    with pytest.raises(smp.SmpError, match=r"no values of tokens_per_s "
                                           r"\(it has .*samples_per_s"):
        smp.plot_metrics(run_metrics, tmp_path / "x.png",
                         keys=["tokens_per_s"])


def test_plot_metrics_without_matplotlib(run_metrics, tmp_path, monkeypatch):
    # As on a python3 without matplotlib: a clear error, no traceback from
    # inside the package.
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(smp.SmpError, match=r"smp.plot_metrics needs "
                                           r"matplotlib: pip install"):
        smp.plot_metrics(run_metrics, tmp_path / "run.png")
