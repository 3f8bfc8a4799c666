"""smp.export's sidecar (MODEL.smp-export.json) carries what ONNX cannot:
frozen parameters and buffers get no gradient in smp as in PyTorch, and an
nn.Embedding's padding_idx row gets no gradient from the lookup."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
import smp  # noqa: E402
import torch_refs  # noqa: E402

CLASSES, BATCH, SAMPLES, STEPS = 5, 8, 16, 3


class Frozen(torch.nn.Module):
    """A frozen first layer and a float buffer used in the forward."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 12)
        self.fc2 = torch.nn.Linear(12, CLASSES)
        self.register_buffer("scale", torch.linspace(0.5, 1.5, 12))
        for p in self.fc1.parameters():
            p.requires_grad_(False)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)) * self.scale)


def data():
    g = torch.Generator().manual_seed(3)
    return (torch.randn(SAMPLES, 6, generator=g),
            torch.randint(0, CLASSES, (SAMPLES,), generator=g))


def test_frozen_parameters_and_buffers(tools, tmp_path):
    torch.manual_seed(0)
    model = Frozen()
    x, labels = data()
    exported = smp.export(model, x[:BATCH], tmp_path / "frozen.onnx")
    sidecar = json.loads(exported.sidecar.read_text())
    assert sorted(sidecar["frozen"]) == ["fc1.bias", "fc1.weight", "scale"]
    assert sidecar["parameters"]["fc2.weight"] == ["fc2.weight"]
    before = {k: v.clone() for k, v in model.state_dict().items()}
    art = smp.compile(exported, output=tmp_path / "f.smpx", batch_size=BATCH,
                      loss="cross_entropy:logits:labels", lr=0.1)
    res = smp.train(art, data={"x": x.numpy(), "labels": labels.numpy()},
                    steps=STEPS, checkpoint_dir=tmp_path / "ckpt",
                    progress=False)
    losses, _ = torch_refs.train_steps(model, (x,), labels, CLASSES, "sgd",
                                       STEPS, BATCH)
    np.testing.assert_allclose(res.losses, losses, rtol=0, atol=1e-5)
    weights = smp.load_checkpoint(tmp_path / "ckpt")
    for k in ("fc1.weight", "fc1.bias", "scale"):
        np.testing.assert_array_equal(weights[k], before[k].numpy())
    assert not np.array_equal(weights["fc2.weight"], before["fc2.weight"].numpy())

    # Without the sidecar smp trains fc1 and the buffer: other losses.
    exported.sidecar.unlink()
    art = smp.compile(exported.path, output=tmp_path / "g.smpx",
                      batch_size=BATCH, loss="cross_entropy:logits:labels",
                      lr=0.1)
    other = smp.train(art, data={"x": x.numpy(), "labels": labels.numpy()},
                      steps=STEPS, progress=False)
    assert abs(other.losses[-1] - losses[-1]) > 1e-4


def train_both(model, exported, feeds, inputs, labels, optimizer, tmp_path):
    """STEPS steps of `exported` by smp (checkpoints in tmp_path/ckpt) and
    of `model` by PyTorch: smp's result, PyTorch's losses and norms."""
    art = smp.compile(exported, output=tmp_path / "t.smpx", batch_size=BATCH,
                      loss="cross_entropy:logits:labels", optimizer=optimizer,
                      lr=torch_refs.LRS[optimizer])
    res = smp.train(art, data=dict(feeds, labels=labels.numpy()), steps=STEPS,
                    checkpoint_dir=tmp_path / "ckpt", progress=False)
    losses, norms = torch_refs.train_steps(model, inputs, labels, CLASSES,
                                           optimizer, STEPS, BATCH)
    return res, losses, norms


class Scalars(torch.nn.Module):
    """One-element state: two fresh nn.PReLU() (slope [1], equal values: the
    eval() export merges them, `p2.weight = Identity(p1.weight)`), a 0-D
    learnable scale, a 0-D buffer and a frozen 0-D parameter."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 12)
        self.p1, self.p2 = torch.nn.PReLU(), torch.nn.PReLU()
        self.fc2 = torch.nn.Linear(12, 12)
        self.fc3 = torch.nn.Linear(12, CLASSES)
        self.scale = torch.nn.Parameter(torch.tensor(1.5))
        self.register_buffer("gain", torch.tensor(0.5))
        self.fixed = torch.nn.Parameter(torch.tensor(2.0), requires_grad=False)

    def forward(self, x):
        h = self.p2(self.fc2(self.p1(self.fc1(x))))
        return self.fc3(h * self.scale * self.gain * self.fixed)


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_one_element_parameters_train(tools, tmp_path, optimizer):
    """smpc had made every one-element initializer a constant: nn.PReLU's
    slope and learnable scales never trained, silently."""
    torch.manual_seed(0)
    model = Scalars()
    x, labels = data()
    exported = smp.export(model, x[:BATCH], tmp_path / "scalars.onnx")
    sidecar = json.loads(exported.sidecar.read_text())
    assert sorted(sidecar["frozen"]) == ["fixed", "gain"]
    before = {k: v.clone() for k, v in model.state_dict().items()}
    res, losses, norms = train_both(model, exported, {"x": x.numpy()}, (x,),
                                    labels, optimizer, tmp_path)
    np.testing.assert_allclose(res.losses, losses, rtol=0, atol=1e-5)
    np.testing.assert_allclose([m["grad_norm"] for m in res.metrics], norms,
                               rtol=1e-5)
    weights = smp.load_checkpoint(tmp_path / "ckpt")
    for k in ("p1.weight", "p2.weight", "scale"):
        np.testing.assert_allclose(weights[k].reshape(-1),
                                   model.state_dict()[k].numpy().reshape(-1),
                                   rtol=1e-5)
        assert not np.array_equal(weights[k].reshape(-1),
                                  before[k].numpy().reshape(-1)), k
    for k in ("gain", "fixed"):  # frozen (the sidecar lists them)
        np.testing.assert_array_equal(weights[k].reshape(-1),
                                      before[k].numpy().reshape(-1))


class Padded(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 4, padding_idx=2)
        self.fc = torch.nn.Linear(4, CLASSES)

    def forward(self, ids):
        return self.fc(self.emb(ids).mean(1))


def padded_data():
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(0, 10, (SAMPLES, 3), generator=g)
    ids[:, 0] = 2  # every sample reads the padding row
    return ids, torch.randint(0, CLASSES, (SAMPLES,), generator=g)


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_padding_idx_row_gets_no_gradient(tools, tmp_path, optimizer):
    torch.manual_seed(0)
    model = Padded()
    ids, labels = padded_data()
    exported = smp.export(model, ids[:BATCH], tmp_path / "padded.onnx")
    assert exported.padding_rows == [{"initializer": "emb.weight", "rows": [2]}]
    before = model.emb.weight.detach().clone()
    res, losses, _ = train_both(model, exported, {"ids": ids.numpy()}, (ids,),
                                labels, optimizer, tmp_path)
    np.testing.assert_allclose(res.losses, losses, rtol=1e-5, atol=0)
    trained = smp.load_checkpoint(tmp_path / "ckpt")["emb.weight"]
    np.testing.assert_allclose(trained, model.emb.weight.detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    if optimizer == "sgd":  # AdamW's weight decay still moves the row
        np.testing.assert_array_equal(trained[2], before[2].numpy())

    # Without the sidecar the importer finds the row by its zeros (what
    # padding_idx leaves; the TorchScript exporter drops padding_idx) and
    # trains the same, warning; --no-padding-row trains it as an ordinary
    # row: another result, so the row is what keeps it.
    exported.sidecar.unlink()
    data = {"ids": ids.numpy(), "labels": labels.numpy()}
    art = smp.compile(exported.path, output=tmp_path / "q.smpx",
                      batch_size=BATCH, loss="cross_entropy:logits:labels",
                      optimizer=optimizer, lr=torch_refs.LRS[optimizer])
    same = smp.train(art, data=data, steps=STEPS, progress=False)
    np.testing.assert_allclose(same.losses, losses, rtol=1e-5, atol=0)
    art = smp.compile(exported.path, output=tmp_path / "r.smpx",
                      batch_size=BATCH, loss="cross_entropy:logits:labels",
                      optimizer=optimizer, lr=torch_refs.LRS[optimizer],
                      no_padding_row=["emb.weight"])
    other = smp.train(art, data=data, steps=STEPS, progress=False)
    assert abs(other.losses[-1] - losses[-1]) > 1e-6


def test_padding_row_of_a_table_no_gather_reads_is_refused(tools, tmp_path):
    """A sidecar row the importer cannot apply is an error, not a table that
    silently trains its padding row."""
    torch.manual_seed(0)
    ids, _ = padded_data()
    exported = smp.export(Padded(), ids[:BATCH], tmp_path / "padded.onnx")
    side = json.loads(exported.sidecar.read_text())
    side["padding_rows"] = [{"initializer": "fc.weight", "rows": [0]}]
    exported.sidecar.write_text(json.dumps(side))
    with pytest.raises(smp.SmpError) as e:
        smp.compile(exported, output=tmp_path / "p.smpx", batch_size=BATCH,
                    loss="cross_entropy:logits:labels")
    assert ("padding row 0 of 'fc.weight' (nn.Embedding padding_idx, from "
            "the smp.export sidecar) cannot be kept: no Gather on axis 0 "
            "reads 'fc.weight' directly") in str(e.value)


def test_export_check_catches_a_changed_model(tools, tmp_path, monkeypatch):
    """The check compares the file with the module: a file that computes
    something else is an error, not a silent export."""
    import smp.exporter as ex
    torch.manual_seed(0)
    x, _ = data()
    real = ex.run_onnx

    def skewed(path, inputs):
        outs, by = real(path, inputs)
        return {k: v + 1e-2 for k, v in outs.items()}, by
    monkeypatch.setattr(ex, "run_onnx", skewed)
    with pytest.raises(smp.SmpError, match="differs from the module's"):
        smp.export(Frozen(), x[:BATCH], tmp_path / "bad.onnx")


class DropNet(torch.nn.Module):
    """BatchNorm (exported in training mode, which would also write random
    Dropout nodes) and a dropout module."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 12)
        self.bn = torch.nn.BatchNorm1d(12)
        self.drop = torch.nn.Dropout(0.3)
        self.fc2 = torch.nn.Linear(12, CLASSES)

    def forward(self, x):
        return self.fc2(self.drop(torch.relu(self.bn(self.fc1(x)))))


def test_dropout_is_listed_and_needs_no_dropout(tools, tmp_path):
    """smp has no random dropout yet: smp.export writes the dropout modules
    with p = 0 (its check passes), lists them in the sidecar, and smpc
    --train refuses the model until --no-dropout accepts training without
    them; then it trains PyTorch's numbers for the model with p = 0."""
    import onnx
    torch.manual_seed(0)
    model = DropNet()
    x, labels = data()
    exported = smp.export(model, x[:BATCH], tmp_path / "drop.onnx")
    assert exported.dropout == [{"module": "drop", "p": 0.3}]
    assert json.loads(exported.sidecar.read_text())["dropout"] == exported.dropout
    assert model.drop.p == 0.3  # restored
    for node in onnx.load(str(exported.path)).graph.node:
        assert node.op_type != "Dropout" or not any(
            a.name == "ratio" and a.f > 0 for a in node.attribute)
    with pytest.raises(smp.SmpError, match=r"1 dropout\(s\) \(drop p=0.3\).*--no-dropout"):
        smp.compile(exported, output=tmp_path / "r.smpx", batch_size=BATCH,
                    loss="cross_entropy:logits:labels", lr=0.1)
    art = smp.compile(exported, output=tmp_path / "d.smpx", batch_size=BATCH,
                      loss="cross_entropy:logits:labels", lr=0.1,
                      no_dropout=True)
    res = smp.train(art, data={"x": x.numpy(), "labels": labels.numpy()},
                    steps=STEPS, progress=False)
    model.drop.p = 0.0
    losses, _ = torch_refs.train_steps(model, (x,), labels, CLASSES, "sgd",
                                       STEPS, BATCH)
    np.testing.assert_allclose(res.losses, losses, rtol=0, atol=1e-5)


class _Config:
    def __init__(self, **values):
        self.values = values

    def to_dict(self):
        return dict(self.values)


class FunctionalDropoutLM(torch.nn.Module):
    """A Hugging Face-style model (a class of a transformers.* module with a
    config) whose dropout is functional, as Llama's attention_dropout:
    no module shows it."""

    def __init__(self):
        super().__init__()
        self.config = _Config(attention_dropout=0.1, hidden_dropout=0.0,
                              classifier_dropout=None, vocab_size=10)
        self.emb = torch.nn.Embedding(10, 8)
        self.fc = torch.nn.Linear(8, CLASSES)

    def forward(self, input_ids, attention_mask=None, return_dict=None):
        h = torch.nn.functional.dropout(
            self.emb(input_ids), p=self.config.values["attention_dropout"],
            training=self.training)
        return (self.fc(h),)


FunctionalDropoutLM.__module__ = "transformers.models.fake.modeling_fake"


def test_functional_dropout_of_a_hugging_face_config_is_listed(tools, tmp_path):
    """The eval() export drops functional dropout without a trace: smp.export
    lists the config's probabilities > 0 and smpc --train asks for
    --no-dropout."""
    ids = torch.randint(0, 10, (BATCH, 3), generator=torch.Generator().manual_seed(1))
    exported = smp.export(FunctionalDropoutLM(), ids, tmp_path / "lm.onnx")
    assert exported.dropout == [{"module": "config.attention_dropout", "p": 0.1}]
    with pytest.raises(smp.SmpError, match=r"config.attention_dropout p=0.1.*--no-dropout"):
        smp.compile(exported, output=tmp_path / "r.smpx", batch_size=BATCH,
                    loss="cross_entropy:logits:labels", lr=0.1)


class FunctionalDropout(torch.nn.Module):
    """F.dropout(x, p, self.training): no module shows it."""

    def __init__(self, batchnorm=False):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 12)
        self.bn = torch.nn.BatchNorm1d(12) if batchnorm else torch.nn.Identity()
        self.fc2 = torch.nn.Linear(12, CLASSES)

    def forward(self, x):
        h = torch.nn.functional.dropout(self.bn(self.fc1(x)), 0.2, self.training)
        return self.fc2(h)


def test_functional_dropout_is_found_by_its_randomness(tools, tmp_path):
    """Two train() forwards that differ tell a random op no module shows:
    listed as "forward" (smpc --train asks for --no-dropout); with BatchNorm
    (a training-mode export would write random nodes) smp.export refuses."""
    x, _ = data()
    torch.manual_seed(0)
    model = FunctionalDropout()
    rng = torch.get_rng_state()
    exported = smp.export(model, x[:BATCH], tmp_path / "f.onnx")
    assert torch.equal(torch.get_rng_state(), rng)  # the probe forked it
    assert exported.dropout == [{"module": "forward", "p": None}]
    with pytest.raises(smp.SmpError, match=r"forward \(a random op\).*--no-dropout"):
        smp.compile(exported, output=tmp_path / "r.smpx", batch_size=BATCH,
                    loss="cross_entropy:logits:labels", lr=0.1)
    with pytest.raises(smp.SmpError, match="random apart from its dropout modules"):
        smp.export(FunctionalDropout(batchnorm=True), x[:BATCH], tmp_path / "g.onnx")
    # A deterministic model lists nothing (DropNet's module is set to p = 0).
    assert smp.export(Frozen(), x[:BATCH], tmp_path / "h.onnx").dropout == []
