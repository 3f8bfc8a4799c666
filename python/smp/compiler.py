"""smp.compile and smp.plan: smpc driven with a config dict and flags."""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

from . import _tools


def _model_path(model) -> str:
    path = getattr(model, "path", model)
    return str(path)


def _json_file_args(value, flag: str, name: str, workdir: Path,
                    what: str) -> List[str]:
    """FLAG FILE: a dict is written to workdir/NAME (smpc parses and checks
    it, as it does the file given on its command line); a path is passed
    on."""
    if value is None:
        return []
    if isinstance(value, (str, os.PathLike)):
        return [flag, str(value)]
    if not isinstance(value, dict):
        raise TypeError(f"{what} or a JSON file's path")
    path = workdir / name
    path.write_text(json.dumps(value, indent=2) + "\n")
    return [flag, str(path)]


def _config_args(config, workdir: Path) -> List[str]:
    """--config FILE: SageMaker-style keys and smpc flag names."""
    return _json_file_args(config, "--config", "smp-config.json", workdir,
                           "config= takes a dict of SageMaker-style keys")


def _deepspeed_args(deepspeed, workdir: Path) -> List[str]:
    """--deepspeed FILE: a DeepSpeed config (the Hugging Face Trainer's
    `deepspeed=` takes a dict or a path too)."""
    return _json_file_args(deepspeed, "--deepspeed", "ds_config.json", workdir,
                           "deepspeed= takes a DeepSpeed config dict")


def _training_args_args(training_args, workdir: Path) -> List[str]:
    """--training-args FILE: the Hugging Face Trainer's TrainingArguments
    (the object itself, its to_dict()/JSON as a dict, or a JSON file)."""
    if hasattr(training_args, "to_json_string"):
        training_args = json.loads(training_args.to_json_string())
    # The Trainer takes its DeepSpeed config as a dict too: smpc reads it
    # from a file beside the arguments.
    if isinstance(training_args, dict) and isinstance(
            training_args.get("deepspeed"), dict):
        path = workdir / "trainer_ds_config.json"
        path.write_text(json.dumps(training_args["deepspeed"], indent=2) + "\n")
        training_args = dict(training_args, deepspeed=str(path))
    return _json_file_args(training_args, "--training-args",
                           "training_args.json", workdir,
                           "training_args= takes transformers' "
                           "TrainingArguments, its dict")


@dataclass
class Artifact:
    """What `smpc compile` wrote: the directory smprun runs."""
    path: Path
    ranks: int
    plan_text: str
    log: str

    def __fspath__(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"Artifact({str(self.path)!r}, ranks={self.ranks})"


def compile(model, config: Union[Dict[str, Any], str, os.PathLike, None] = None,
            output: Union[str, os.PathLike, None] = None,
            deepspeed: Union[Dict[str, Any], str, os.PathLike, None] = None,
            training_args: Any = None,
            **options) -> Artifact:
    """Compiles `model` (an .onnx/.mlir path or what smp.export returned)
    with smpc. `config` is a dict (or a JSON file) of SageMaker
    model-parallel keys and smpc flag names; `deepspeed` a DeepSpeed config
    (dict or ds_config.json: its batch sizes, optimizer, scheduler,
    precision and ZeRO stage, by DeepSpeed's rules); `training_args` the
    Hugging Face Trainer's TrainingArguments (the object, a dict or a JSON
    file: its batch, AdamW and weight-decay groups, clipping, schedule and
    precision, as the Trainer trains them); `options` are smpc
    flags by name (batch_size=8, loss="cross_entropy:logits:labels",
    dim={"seq": 16}, eval_metrics=["accuracy", "f1"]: a list or a
    comma-separated string).
    A `loss` implies train=True. Returns an Artifact; raises SmpError with
    smpc's message when smpc refuses."""
    if options.get("loss") and "train" not in options:
        options["train"] = True
    if isinstance(options.get("eval_metrics"), (list, tuple)):
        options["eval_metrics"] = ",".join(options["eval_metrics"])
    if output is None:
        stem = Path(_model_path(model)).stem
        output = Path(tempfile.mkdtemp(prefix="smp-")) / f"{stem}.smpx"
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    args = ["compile", _model_path(model), "-o", str(output)]
    args += _config_args(config, output.parent)
    args += _training_args_args(training_args, output.parent)
    args += _deepspeed_args(deepspeed, output.parent)
    args += _tools.flag_args(options)
    log = _tools.run("smpc", args)
    plan_text = (output / "plan.txt").read_text() if (output / "plan.txt").exists() else ""
    m = re.search(r"^ranks: (\d+)", plan_text, re.M)
    return Artifact(path=output, ranks=int(m.group(1)) if m else 1,
                    plan_text=plan_text, log=log)


@dataclass
class Plan:
    """The planner's answer as data (what `smpc plan --json` writes)."""
    data: Dict[str, Any]
    text: str = ""

    @property
    def best(self) -> Dict[str, Any]:
        return self.data["best"]

    @property
    def runners_up(self) -> List[Dict[str, Any]]:
        return self.data["runners_up"]

    @property
    def degrees(self) -> Dict[str, int]:
        return {k: self.best[k] for k in ("dp", "tp", "pp")}

    @property
    def schedule(self) -> str:
        return self.best["schedule"]

    @property
    def step_seconds(self) -> float:
        return self.best["step_seconds"]

    @property
    def stage_memory_bytes(self) -> List[float]:
        return [s["memory_bytes"] for s in self.best["stages"]]

    def summary(self) -> str:
        """The plan line smpc prints ("plan for N x DEVICE ...: dp=...")."""
        return self.text.splitlines()[0] if self.text else ""

    def to_pandas(self):
        """The best plan and the runners-up, one row each (needs pandas)."""
        try:
            import pandas as pd
        except ImportError as e:  # pragma: no cover - depends on the env
            raise ImportError("Plan.to_pandas() needs pandas "
                              "(pip install pandas)") from e
        rows = []
        for rank, p in enumerate([self.best] + self.runners_up):
            row = {k: v for k, v in p.items() if k not in ("stages", "cuts")}
            row["rank"] = rank
            row["stage_memory_bytes"] = [s["memory_bytes"] for s in p["stages"]]
            rows.append(row)
        return pd.DataFrame(rows).set_index("rank")


def plan(model, config: Union[Dict[str, Any], str, os.PathLike, None] = None,
         **options) -> Plan:
    """Runs `smpc plan` on `model` (devices=N, cluster="a100-sxm-80g",
    global_batch=B, precision="bf16", ... as smpc flags, or in `config`) and
    returns the plan as data."""
    with tempfile.TemporaryDirectory(prefix="smp-plan-") as d:
        out = Path(d) / "plan.json"
        args = ["plan", _model_path(model), "--json", str(out)]
        args += _config_args(config, Path(d))
        args += _tools.flag_args(options)
        text = _tools.run("smpc", args)
        return Plan(data=json.loads(out.read_text()), text=text)
