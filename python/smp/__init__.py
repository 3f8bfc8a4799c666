"""smp from Python: export a torch.nn.Module, compile it with a SageMaker-
style config, train it on N ranks, and read the trained weights back.

    import smp
    exported = smp.export(model, example_ids, "model.onnx")
    artifact = smp.compile(exported, config={"pipeline_parallel_degree": 2,
                                             "microbatches": 4, "ddp": True},
                           devices=4, batch_size=8,
                           loss="cross_entropy:logits:labels")
    result = smp.train(artifact, data={"input_ids": ids, "labels": labels},
                       steps=100, checkpoint_dir="ckpt")
    smp.load_state_dict(model, smp.load_checkpoint("ckpt"), exported)
    logits = smp.run(smp.compile("trained.onnx", batch_size=8),
                     {"input_ids": ids})["logits"]   # batch by batch
    smp.plot_metrics(result.metrics, "run.png")   # or an --metrics file

The package drives the built tools (smpc, smprun, smp-checkpoint) as
subprocesses; it finds them through $SMP_BIN_DIR, the PATH, or the checkout's
build/bin. docs/python.md has the details.
"""

from ._tools import SmpError, bin_dir
from .compiler import Artifact, Plan, compile, plan
from .exporter import ExportedModel, export, run_onnx, sidecar_path
from .metrics import plot_metrics, read_metrics
from .runner import (EvalPrediction, TrainResult, load_checkpoint,
                     load_state_dict, run, train)
from . import checkpoint

__version__ = "0.1.0"

__all__ = ["SmpError", "Artifact", "Plan", "ExportedModel", "TrainResult",
           "EvalPrediction",
           "export", "compile", "plan", "train", "run", "load_checkpoint",
           "load_state_dict", "run_onnx", "sidecar_path", "bin_dir",
           "read_metrics", "plot_metrics", "checkpoint"]
