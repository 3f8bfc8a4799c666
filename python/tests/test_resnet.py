"""Acceptance, convolutional: a small ResNet (torchvision's resnet18 layout
scaled down, or the same blocks hand-written where torchvision is absent)
with trainable BatchNorm, exported with smp.export (training-mode
BatchNormalization), compiled with a SageMaker-style dict and trained 5
steps on 4 ranks (dp2 x pp2, 4 micro-batches) against PyTorch with the
same grouping: BatchNorm statistics per micro-batch, synchronised over the
data-parallel replicas (torch_refs.train_steps_grouped; smpc's default
--bn-stats global), and its held-out loss evaluated as model.eval() gives
it (smp.train(eval_data=...): the running statistics)."""

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
import smp  # noqa: E402
import torch_refs  # noqa: E402

BATCH, SAMPLES, STEPS = 8, 16, 5


# The ResNet of the committed fixtures (python/make_resnet.py): BasicBlocks
# with conv-BN-ReLU, a downsample with BN, global average pool and fc.
from make_resnet import CLASSES, ResNet as TinyResNet  # noqa: E402


def test_resnet_export_compile_train(tools, tmp_path):
    torch.manual_seed(0)
    model = TinyResNet()
    g = torch.Generator().manual_seed(2)
    x = torch.randn(SAMPLES, 3, 8, 8, generator=g)
    labels = torch.randint(0, CLASSES, (SAMPLES,), generator=g)
    held_x = torch.randn(BATCH, 3, 8, 8, generator=g)
    held_labels = torch.randint(0, CLASSES, (BATCH,), generator=g)
    initial = copy.deepcopy(model.state_dict())
    exported = smp.export(model, x[:BATCH], tmp_path / "resnet.onnx")
    # The file's running statistics are the module's (the training-mode
    # export's trace updated them once; smp.export writes them back).
    import onnx
    from onnx import numpy_helper
    stats = {i.name: numpy_helper.to_array(i) for i in
             onnx.load(str(exported.path)).graph.initializer
             if i.name.endswith(("running_mean", "running_var"))}
    assert len(stats) == 12
    for name, value in stats.items():
        np.testing.assert_array_equal(value, initial[name].numpy(), err_msg=name)
    artifact = smp.compile(
        exported, config={"pipeline_parallel_degree": 2, "microbatches": 4,
                          "ddp": True, "devices": 4, "batch_size": BATCH,
                          "optimizer": "sgd", "lr": torch_refs.LRS["sgd"]},
        loss="cross_entropy:logits:labels")
    result = smp.train(artifact, data={"x": x.numpy(), "labels": labels.numpy()},
                       steps=STEPS, ranks=4, checkpoint_dir=tmp_path / "ckpt",
                       save_onnx=tmp_path / "trained.onnx",
                       eval_data={"x": held_x.numpy(),
                                  "labels": held_labels.numpy()})
    losses, _ = torch_refs.train_steps_grouped(model, x, labels, CLASSES,
                                               "sgd", STEPS, BATCH, dp=2,
                                               microbatches=4)
    np.testing.assert_allclose(result.losses, losses, rtol=0, atol=1e-4)
    # The held-out loss as model.eval() gives it: BatchNorm on the running
    # statistics the 4 ranks trained (rank 0's, synchronised).
    model.eval()
    with torch.no_grad():
        held = torch.nn.functional.cross_entropy(model(held_x), held_labels)
    assert [s for s, _ in result.eval_losses] == [STEPS]
    np.testing.assert_allclose(result.eval_losses[0][1], held.item(),
                               rtol=1e-5)
    model.train()
    fresh = TinyResNet()
    fresh.load_state_dict(initial)
    smp.load_state_dict(fresh, smp.load_checkpoint(tmp_path / "ckpt"), exported)
    for k, p in model.named_parameters():
        np.testing.assert_allclose(fresh.state_dict()[k].numpy(),
                                   p.detach().numpy(), rtol=1e-3, atol=1e-4,
                                   err_msg=k)


def test_bf16_model_trains_on_bf16_tensors(tools, tmp_path):
    """A model exported after .to(torch.bfloat16) takes bf16 images. numpy
    has no bf16: smp.train writes them widened to float32 (exact) and
    smprun rounds them back, so the run equals one on the float32 images
    (smprun rounds those the same way) and follows PyTorch's
    (test/fixtures/stored-precision/resnet_bf16, make_stored_precision_refs.py)."""
    import json
    from pathlib import Path
    fx = Path(__file__).resolve().parents[2] / "test" / "fixtures"
    x = np.load(fx / "resnet" / "x.npy")
    labels = np.load(fx / "resnet" / "labels.npy")
    artifact = smp.compile(fx / "stored-precision" / "resnet_bf16.onnx",
                           loss="cross_entropy:logits:labels",
                           batch_size=BATCH, optimizer="sgd",
                           lr=torch_refs.LRS["sgd"])
    tensors = smp.train(artifact, steps=STEPS,
                        data={"x": torch.from_numpy(x).to(torch.bfloat16),
                              "labels": torch.from_numpy(labels)},
                        checkpoint_dir=tmp_path / "ck")
    arrays = smp.train(artifact, data={"x": x, "labels": labels},
                       steps=STEPS)
    assert tensors.losses == arrays.losses
    ref = json.loads((fx / "stored-precision" / "resnet_bf16" /
                      "ref_sgd.json").read_text())
    np.testing.assert_allclose(tensors.losses, ref["losses"], rtol=1e-2)
    # Its checkpoint loads into the bf16 module (numpy has no bf16: the
    # arrays are float32, exactly the trained bf16 values).
    weights = smp.load_checkpoint(tmp_path / "ck")
    assert weights["conv1.weight"].dtype == np.float32
    model = TinyResNet().to(torch.bfloat16)
    smp.load_state_dict(model, weights)
    back = model.state_dict()["conv1.weight"].float().numpy()
    np.testing.assert_array_equal(back, weights["conv1.weight"])
    assert not np.array_equal(back, TinyResNet().state_dict()[
        "conv1.weight"].to(torch.bfloat16).float().numpy())
