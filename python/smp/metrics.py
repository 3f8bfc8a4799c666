"""Reading and plotting a training run's metrics (smprun --metrics FILE,
one JSON object per step; docs/training-runs.md lists the fields).

    rows = smp.read_metrics("m.jsonl")
    smp.plot_metrics("m.jsonl", "run.png")   # needs matplotlib
"""

import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

from ._tools import SmpError

PathLike = Union[str, Path]

# What plot_metrics draws by default, one panel each, when the run has it
# (and, after eval_accuracy, every other metric of smpc --eval-metrics).
DEFAULT_KEYS = ("loss", "eval_loss", "eval_accuracy", "lr", "grad_norm",
                "tokens_per_s", "mfu", "loss_scale")
# An evaluation's row's bookkeeping, not a metric.
_EVAL_COUNTS = ("eval_labels", "eval_samples", "eval_batches", "eval_time")


def default_keys(rows: Sequence[Dict[str, Any]]) -> List[str]:
    """The keys plot_metrics draws by default for these rows: DEFAULT_KEYS
    the run has, the --eval-metrics ones (eval_f1, eval_top5_accuracy, ...)
    after eval_accuracy in the order the run wrote them, samples_per_s for
    a run without tokens_per_s."""
    def has(key):
        return any(r.get(key) is not None for r in rows)
    metrics = []
    for r in rows:
        for k in r:
            if (k.startswith("eval_") and k not in DEFAULT_KEYS and
                    k not in _EVAL_COUNTS and k not in metrics and has(k)):
                metrics.append(k)
    keys = []
    for k in DEFAULT_KEYS:
        if has(k):
            keys.append(k)
        if k == "eval_accuracy":
            keys += metrics
    if "tokens_per_s" not in keys and has("samples_per_s"):
        keys.insert(min(3, len(keys)), "samples_per_s")
    return keys


def read_metrics(path: PathLike) -> List[Dict[str, Any]]:
    """The rows of a --metrics file by step: a resumed run appends, so a
    step written twice (a run killed between checkpoints and resumed)
    keeps its later row; an evaluation's row (eval_loss, --eval-data) joins
    its step's row. Raises SmpError naming the file and line."""
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise SmpError(f"{path}: cannot read the metrics: {e.strerror}")
    rows = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            int(row["step"])
        except (ValueError, KeyError, TypeError):
            raise SmpError(f"{path}:{n}: not a metrics row (one JSON object "
                           f"with a \"step\" per line, as smprun --metrics "
                           f"writes)")
        rows.append(row)
    if not rows:
        raise SmpError(f"{path}: holds no steps")
    return by_step(rows)


def by_step(rows: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """--metrics rows by step, in step order: a step written again (a
    resumed run appends) keeps its later row, and an evaluation's row
    (eval_loss, --eval-data) joins its step's."""
    steps: Dict[int, Dict[str, Any]] = {}
    for row in rows:
        step = int(row["step"])
        if "eval_loss" in row and step in steps:
            steps[step] = {**steps[step], **row}
        else:
            steps[step] = row
    return [steps[s] for s in sorted(steps)]


def plot_metrics(metrics: Union[PathLike, Sequence[Dict[str, Any]]],
                 out: PathLike, keys: Optional[Sequence[str]] = None) -> Path:
    """Plots a run's metrics (an --metrics file, or the rows of one, e.g.
    smp.train(...).metrics) against the step into the image `out` (PNG,
    SVG or PDF by its suffix): one panel per key of `keys` (default:
    loss, eval_loss, eval_accuracy and the other --eval-metrics, lr,
    grad_norm, tokens/s, MFU, loss scale: default_keys), skipping keys the run
    does not have (tokens_per_s falls back to samples_per_s for a model
    without token ids). Needs matplotlib; raises SmpError without it, for
    an unknown key, or for a file that is not smprun's metrics. Returns
    `out`."""
    if isinstance(metrics, (str, Path)):
        rows, path = read_metrics(metrics), str(metrics)
    else:
        rows, path = list(metrics), "the metrics"
        if not rows or not all(isinstance(r, dict) and "step" in r
                                for r in rows):
            raise SmpError("smp.plot_metrics: expected an --metrics file or "
                           "its rows (dicts with a \"step\")")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SmpError("smp.plot_metrics needs matplotlib: pip install "
                       "matplotlib (Debian: apt install python3-matplotlib)")

    def has(key):
        return any(r.get(key) is not None for r in rows)

    if keys is None:
        keys = default_keys(rows)
    else:
        missing = [k for k in keys if not has(k)]
        if missing:
            known = sorted({k for r in rows for k, v in r.items()
                            if isinstance(v, (int, float))
                            and not isinstance(v, bool)})
            raise SmpError(f"{path}: no values of {', '.join(missing)} "
                           f"(it has {', '.join(known)})")
    steps = [r["step"] for r in rows]
    fig, axes = plt.subplots(len(keys), 1, sharex=True, squeeze=False,
                             figsize=(8, 2.2 * len(keys)))
    for ax, key in zip(axes[:, 0], keys):
        ys = [r.get(key) for r in rows]
        if not all(key in r for r in rows):
            # A key of some steps only (evaluations): their points, joined.
            pts = [(x, float("nan") if r[key] is None else r[key])
                   for x, r in zip(steps, rows) if key in r]
            ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o",
                    markersize=3, linewidth=1)
        else:
            ax.plot(steps, [float("nan") if y is None else y for y in ys],
                    linewidth=1)
        ax.set_ylabel(key)
        ax.grid(True, alpha=0.3)
    axes[-1, 0].set_xlabel("step")
    fig.suptitle(Path(path).name if path != "the metrics" else "training run")
    fig.tight_layout()
    out = Path(out)
    try:
        fig.savefig(out)
    except (OSError, ValueError) as e:
        raise SmpError(f"{out}: cannot write the plot: {e}")
    finally:
        plt.close(fig)
    return out
