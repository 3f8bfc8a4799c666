"""smp.plan returns what `smpc plan` prints: GPT-3 175B (smp-modelgen's
shapes-only model: 96 layers, hidden 12288, 96 heads, seq 2048, vocab 51200)
on 1024 x a100-sxm-80g, global batch 1536, bf16 (docs/benchmarks.md)."""

import json
import subprocess

import pytest

import smp


@pytest.fixture(scope="module")
def gpt3(tools, tmp_path_factory):
    path = tmp_path_factory.mktemp("gpt3") / "gpt3.mlir"
    subprocess.run([str(tools / "smp-modelgen"), "gpt", "--layers", "96",
                    "--hidden", "12288", "--heads", "96", "--seq", "2048",
                    "--vocab", "51200", "-o", str(path)], check=True)
    return path


def test_gpt3_175b_plan_equals_smpc_plan(tools, gpt3, tmp_path):
    flags = ["--devices", "1024", "--cluster", "a100-sxm-80g",
             "--global-batch", "1536", "--precision", "bf16"]
    cli = subprocess.run([str(tools / "smpc"), "plan", str(gpt3), *flags,
                          "--json", str(tmp_path / "cli.json")],
                         check=True, capture_output=True, text=True).stdout
    want = json.loads((tmp_path / "cli.json").read_text())
    got = smp.plan(gpt3, devices=1024, cluster="a100-sxm-80g",
                   global_batch=1536, precision="bf16")
    for d in (want, got.data):
        d.pop("planner_seconds")  # wall time
    assert got.data == want
    assert got.summary() == cli.splitlines()[0]
    print(got.summary())
    assert got.degrees == {k: want["best"][k] for k in ("dp", "tp", "pp")}
    assert got.schedule == want["best"]["schedule"]
    assert len(got.stage_memory_bytes) == want["best"]["pp"]
    assert got.step_seconds > 0 and len(got.runners_up) >= 1


def test_plan_to_pandas(tools, gpt3):
    """One row per plan, the best first, with the degrees, schedule and
    per-stage memory smpc's JSON has."""
    pytest.importorskip("pandas")
    got = smp.plan(gpt3, devices=1024, cluster="a100-sxm-80g",
                   global_batch=1536, precision="bf16")
    frame = got.to_pandas()
    plans = [got.best] + got.runners_up
    assert list(frame.index) == list(range(len(plans)))
    for col in ("dp", "tp", "pp", "schedule"):
        assert list(frame[col]) == [p[col] for p in plans]
    assert list(frame["stage_memory_bytes"].iloc[0]) == got.stage_memory_bytes
    assert "stages" not in frame.columns and "cuts" not in frame.columns


def test_plan_config_dict(tools, gpt3):
    """A SageMaker-style config pins what it names; the rest is searched."""
    got = smp.plan(gpt3, config={"tensor_parallel_degree": 8,
                                 "pipeline_parallel_degree": 16,
                                 "bf16": True},
                   devices=1024, cluster="a100-sxm-80g", global_batch=1536)
    assert got.degrees == {"dp": 8, "tp": 8, "pp": 16}
