"""smp.export of a model whose block is shared by several layers (ALBERT's
cross-layer sharing): the sidecar names each initializer's state_dict
tensor, so one read by several nodes is one parameter, whatever its values."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
import smp  # noqa: E402
import torch_refs  # noqa: E402

CLASSES, BATCH, SAMPLES, STEPS = 5, 8, 16, 3


class SharedBlock(torch.nn.Module):
    """One block (a fresh LayerNorm: weight all 1, bias all 0; a Linear)
    applied 3 times, and a fresh LayerNorm of its own after them (equal to
    the block's when exported: separate parameters)."""

    def __init__(self):
        super().__init__()
        self.fc_in = torch.nn.Linear(6, 12)
        self.norm = torch.nn.LayerNorm(12)
        self.fc = torch.nn.Linear(12, 12)
        self.final_norm = torch.nn.LayerNorm(12)
        self.head = torch.nn.Linear(12, CLASSES)

    def forward(self, x):
        h = self.fc_in(x)
        for _ in range(3):
            h = h + torch.tanh(self.fc(self.norm(h)))
        return self.head(self.final_norm(h))


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_shared_block_trains_as_one_parameter(tools, tmp_path, optimizer):
    """smpc had guessed that the shared norm's constant weight and bias,
    read by 3 nodes, were equal fresh tensors the exporter merged, and
    trained one parameter per node (ALBERT: 2e-5 off PyTorch by step 3,
    silently), where the sidecar says they are one tensor."""
    torch.manual_seed(0)
    model = SharedBlock()
    g = torch.Generator().manual_seed(3)
    x = torch.randn(SAMPLES, 6, generator=g)
    labels = torch.randint(0, CLASSES, (SAMPLES,), generator=g)
    exported = smp.export(model, x[:BATCH], tmp_path / "shared.onnx")
    art = smp.compile(exported, output=tmp_path / "t.smpx", batch_size=BATCH,
                      loss="cross_entropy:logits:labels", optimizer=optimizer,
                      lr=torch_refs.LRS[optimizer])
    res = smp.train(art, data={"x": x.numpy(), "labels": labels.numpy()},
                    steps=STEPS, progress=False)
    losses, norms = torch_refs.train_steps(model, (x,), labels, CLASSES,
                                           optimizer, STEPS, BATCH)
    np.testing.assert_allclose(res.losses, losses, rtol=1e-5)
    np.testing.assert_allclose([m["grad_norm"] for m in res.metrics], norms,
                               rtol=1e-5)
