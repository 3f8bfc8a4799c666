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


def test_export_check_names_a_file_that_does_not_run(tools, tmp_path,
                                                    monkeypatch):
    """A file the checking runtime cannot run (onnxruntime raising its own
    exception: transformers' Cohere through the TorchScript exporter, a
    Reshape of the wrong size) is an SmpError saying what to do."""
    import smp.exporter as ex
    torch.manual_seed(0)
    x, _ = data()

    class Fail(Exception):
        pass

    def failing(path, inputs):
        raise Fail("[ONNXRuntimeError] : 1 : FAIL : Non-zero status code "
                   "returned while running Reshape node.\nmore")
    monkeypatch.setattr(ex, "run_onnx", failing)
    with pytest.raises(smp.SmpError) as e:
        smp.export(Frozen(), x[:BATCH], tmp_path / "bad.onnx")
    msg = str(e.value)
    assert ("bad.onnx: the export does not run in onnxruntime (Fail: "
            "[ONNXRuntimeError] : 1 : FAIL : Non-zero status code returned "
            "while running Reshape node.)") in msg
    assert "torch.onnx.export(module, args, path) (the dynamo exporter)" in msg


class _FakeConfig:
    def to_dict(self):
        return {"model_type": "fake", "hidden_dropout_prob": 0.0}


class FakeImageModel(torch.nn.Module):
    """Stands for a transformers image classifier (no transformers needed):
    a config, main_input_name pixel_values, keyword inputs only, a tuple
    out with return_dict=False."""
    main_input_name = "pixel_values"

    def __init__(self):
        super().__init__()
        self.config = _FakeConfig()
        self.fc = torch.nn.Linear(6, CLASSES)

    def forward(self, pixel_values=None, labels=None, return_dict=None):
        assert pixel_values is not None, "pixel_values is None"
        return (self.fc(torch.tanh(pixel_values)),)


FakeImageModel.__module__ = "transformers.models.fake.modeling_fake"


def test_export_feeds_a_hugging_face_model_its_main_input(tools, tmp_path):
    """A Hugging Face vision model takes pixel_values (its
    main_input_name), not input_ids: smp.export had passed the images as
    input_ids, and HF's ViT, DINOv2, Swin, ResNet... failed inside their
    forward with pixel_values None. The file's input is named after it and
    trains to PyTorch's losses."""
    torch.manual_seed(0)
    model = FakeImageModel()
    x, labels = data()
    exported = smp.export(model, x[:BATCH], tmp_path / "img.onnx")
    assert exported.input_names == ["pixel_values"]
    art = smp.compile(exported, output=tmp_path / "img.smpx", batch_size=BATCH,
                      loss="cross_entropy:logits:labels", lr=0.1)
    res = smp.train(art, data={"pixel_values": x.numpy(),
                               "labels": labels.numpy()},
                    steps=STEPS, progress=False)
    plain = torch.nn.Sequential(torch.nn.Tanh(), model.fc)
    losses, _ = torch_refs.train_steps(plain, (x,), labels, CLASSES, "sgd",
                                       STEPS, BATCH)
    np.testing.assert_allclose(res.losses, losses, rtol=0, atol=1e-5)


class _FakeSeq2SeqConfig(_FakeConfig):
    is_encoder_decoder = True


class FakeSeq2Seq(torch.nn.Module):
    """Stands for T5: an encoder-decoder whose forward needs
    decoder_input_ids beside input_ids."""
    main_input_name = "input_ids"

    def __init__(self):
        super().__init__()
        self.config = _FakeSeq2SeqConfig()
        self.enc = torch.nn.Embedding(10, 4)
        self.dec = torch.nn.Embedding(10, 4)
        self.head = torch.nn.Linear(4, CLASSES)

    def forward(self, input_ids=None, attention_mask=None,
                decoder_input_ids=None, use_cache=None, return_dict=None):
        if decoder_input_ids is None:
            raise ValueError("You have to specify decoder_input_ids\nmore")
        h = self.enc(input_ids).mean(1, keepdim=True) + self.dec(decoder_input_ids)
        return (self.head(h),)


FakeSeq2Seq.__module__ = "transformers.models.fake.modeling_fake"


def test_export_feeds_an_encoder_decoder_both_inputs(tools, tmp_path):
    """T5 takes input_ids and decoder_input_ids: two example inputs are fed
    as those; one is an SmpError naming what was fed and what to do (the
    model's own ValueError had escaped), and so are three unnamed inputs
    and a name its forward does not take."""
    torch.manual_seed(0)
    model = FakeSeq2Seq()
    ids = torch.randint(0, 10, (BATCH, 5))
    dec = torch.randint(0, 10, (BATCH, 3))
    exported = smp.export(model, (ids, dec), tmp_path / "s2s.onnx")
    assert exported.input_names == ["input_ids", "decoder_input_ids"]
    with pytest.raises(smp.SmpError) as e:
        smp.export(model, ids, tmp_path / "one.onnx")
    assert ("smp.export: FakeSeq2Seq's forward fails on the example inputs "
            "fed as ['input_ids'] (ValueError: You have to specify "
            "decoder_input_ids): pass the inputs it needs and name them, "
            "input_names=[...]") in str(e.value)
    with pytest.raises(smp.SmpError, match="3 example inputs for a Hugging "
                       "Face model \\(FakeSeq2Seq\\)"):
        smp.export(model, (ids, dec, dec), tmp_path / "three.onnx")
    with pytest.raises(smp.SmpError) as e:
        smp.export(model, ids, tmp_path / "bad.onnx", input_names=["idz"])
    assert ("input_names ['idz'] for 1 example input(s) of FakeSeq2Seq, "
            "whose forward takes ['input_ids', 'attention_mask', "
            "'decoder_input_ids', 'use_cache', 'return_dict']") in str(e.value)


class Diffs(torch.nn.Module):
    """torch.diff, which the TorchScript exporter does not export."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, CLASSES)

    def forward(self, x):
        return self.fc(torch.nn.functional.pad(torch.diff(x), (0, 1)))


def test_export_names_what_the_torchscript_exporter_cannot(tools, tmp_path):
    """The exporter's own exception (Whisper's mask built with aten::diff)
    is an SmpError naming the module and the dynamo exporter."""
    x, _ = data()
    with pytest.raises(smp.SmpError) as e:
        smp.export(Diffs(), x[:BATCH], tmp_path / "diff.onnx")
    assert ("diff.onnx: the TorchScript exporter cannot export Diffs "
            "(") in str(e.value)
    assert "aten::diff" in str(e.value)
    assert ("export it with torch.onnx.export(module, args, path) (the "
            "dynamo exporter)") in str(e.value)


class DropNet(torch.nn.Module):
    """BatchNorm (exported in training mode) and a dropout module."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 12)
        self.bn = torch.nn.BatchNorm1d(12)
        self.drop = torch.nn.Dropout(0.3)
        self.fc2 = torch.nn.Linear(12, CLASSES)

    def forward(self, x):
        return self.fc2(self.drop(torch.relu(self.bn(self.fc1(x)))))


def dropout_nodes(path):
    """The file's Dropout nodes: {name: (ratio, training_mode)} from their
    Constant inputs."""
    import onnx
    from onnx import numpy_helper
    graph = onnx.load(str(path)).graph
    consts = {n.output[0]: numpy_helper.to_array(n.attribute[0].t)
              for n in graph.node if n.op_type == "Constant"}
    return {n.name: (consts[n.input[1]], consts[n.input[2]])
            for n in graph.node if n.op_type == "Dropout"}


def test_dropout_modules_are_training_mode_dropout_nodes(tools, tmp_path):
    """smp.export writes an nn.Dropout as Dropout(ratio=p,
    training_mode=true) named after the module (also in the training-mode
    export of a model with BatchNorm), lists it under "dropout_nodes" (not
    "dropout": the file holds it) and checks the file against the module's
    dropout-free forward; smpc --train draws its masks from --seed (the
    losses differ from the run without dropout, the same seed gives the
    same ones, another seed others), and with --no-dropout it trains
    PyTorch's numbers for the model with p = 0."""
    torch.manual_seed(0)
    model = DropNet()
    x, labels = data()
    exported = smp.export(model, x[:BATCH], tmp_path / "drop.onnx")
    nodes = dropout_nodes(exported.path)
    assert list(nodes) == ["/drop/Dropout"]
    ratio, training = nodes["/drop/Dropout"]
    assert ratio.dtype == np.float32 and ratio.shape == () and ratio == np.float32(0.3)
    assert training.dtype == np.bool_ and training.shape == () and bool(training)
    assert exported.dropout == []
    assert exported.dropout_nodes == [{"module": "drop", "p": 0.3,
                                       "node": "/drop/Dropout"}]
    sidecar = json.loads(exported.sidecar.read_text())
    assert sidecar["dropout"] == [] and sidecar["dropout_nodes"] == exported.dropout_nodes
    assert exported.checked_with in ("onnxruntime", "smprun")
    assert exported.max_abs_diff < 1e-5, exported.max_abs_diff
    # Restored: p, the forward, the mode.
    assert model.drop.p == 0.3 and "forward" not in vars(model.drop)
    assert model.training

    feeds = {"x": x.numpy(), "labels": labels.numpy()}

    def run(name, **flags):
        art = smp.compile(exported, output=tmp_path / f"{name}.smpx",
                          batch_size=BATCH, loss="cross_entropy:logits:labels",
                          lr=0.1, **flags)
        return smp.train(art, data=feeds, steps=STEPS, progress=False).losses

    dropped = run("d")
    assert np.all(np.isfinite(dropped))
    np.testing.assert_array_equal(run("same", seed=0), dropped)  # --seed 0: the default
    other_seed = run("s", seed=7)
    no_dropout = run("n", no_dropout=True)
    model.drop.p = 0.0
    losses, _ = torch_refs.train_steps(model, (x,), labels, CLASSES, "sgd",
                                       STEPS, BATCH)
    np.testing.assert_allclose(no_dropout, losses, rtol=0, atol=1e-5)
    assert np.max(np.abs(np.subtract(dropped, no_dropout))) > 1e-4
    assert np.max(np.abs(np.subtract(dropped, other_seed))) > 1e-4


class ChannelDrop(torch.nn.Module):
    """A per-channel dropout (not ONNX Dropout's element-wise mask), an
    nn.Dropout the forward never calls and BatchNorm."""

    def __init__(self, fail=False):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 12)
        self.bn = torch.nn.BatchNorm1d(12)
        self.chan = torch.nn.Dropout2d(0.2)
        self.spare = torch.nn.Dropout(0.4)
        self.fc2 = torch.nn.Linear(12, CLASSES)
        self.fail = fail

    def forward(self, x):
        h = self.chan(self.bn(self.fc1(x))[:, :, None, None])[:, :, 0, 0]
        if self.fail:
            raise ValueError("failing forward")
        return self.fc2(h)


def test_dropout_the_file_cannot_hold_is_listed(tools, tmp_path):
    """Dropout modules that are not ONNX Dropout (nn.Dropout2d's channels)
    and an nn.Dropout the trace never calls are the identity in the file and
    listed under "dropout": smpc --train asks for --no-dropout. The modules
    are restored after the export, also when it fails."""
    torch.manual_seed(0)
    x, _ = data()
    model = ChannelDrop()
    exported = smp.export(model, x[:BATCH], tmp_path / "c.onnx")
    assert exported.dropout == [{"module": "chan", "p": 0.2},
                                {"module": "spare", "p": 0.4}]
    assert exported.dropout_nodes == [] and dropout_nodes(exported.path) == {}
    with pytest.raises(smp.SmpError, match=r"chan p=0.2, spare p=0.4.*--no-dropout"):
        smp.compile(exported, output=tmp_path / "r.smpx", batch_size=BATCH,
                    loss="cross_entropy:logits:labels", lr=0.1)
    smp.compile(exported, output=tmp_path / "n.smpx", batch_size=BATCH,
                loss="cross_entropy:logits:labels", lr=0.1, no_dropout=True)
    model = ChannelDrop(fail=True)
    with pytest.raises(ValueError, match="failing forward"):
        smp.export(model, x[:BATCH], tmp_path / "f.onnx")
    for m in (model.chan, model.spare):
        assert "forward" not in vars(m)
    assert (model.chan.p, model.spare.p) == (0.2, 0.4)


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


def random_dropout_nodes(path):
    """The file's random Dropout nodes in file order: (name, ratio, tagged):
    tagged, training_mode true (F.dropout's and the modules' nodes);
    untagged, a ratio and no training_mode (sdpa's dropout_p)."""
    import onnx
    from onnx import numpy_helper
    graph = onnx.load(str(path)).graph
    consts = {n.output[0]: numpy_helper.to_array(n.attribute[0].t)
              for n in graph.node if n.op_type == "Constant"}
    found = []
    for n in graph.node:
        if n.op_type != "Dropout" or len(n.input) < 2:
            continue
        ratio = float(consts[n.input[1]])
        tagged = len(n.input) > 2 and bool(n.input[2])
        if ratio > 0 and (not tagged or bool(consts[n.input[2]])):
            found.append((n.name, ratio, tagged))
    return found


def train_losses(exported, feeds, tmp_path, name, **flags):
    art = smp.compile(exported, output=tmp_path / f"{name}.smpx",
                      batch_size=BATCH, loss="cross_entropy:logits:labels",
                      lr=0.1, **flags)
    return smp.train(art, data=feeds, steps=STEPS, progress=False).losses


def test_functional_dropout_of_a_hugging_face_config_is_held(tools, tmp_path):
    """Functional dropout (F.dropout(x, config.attention_dropout,
    self.training), as Llama's attention) is written by a training-mode
    export: Dropout(ratio=0.1, training_mode=true), listed under
    "dropout_nodes" as "functional", nothing under "dropout", and smpc
    --train trains it without --no-dropout."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 10, (SAMPLES, 3), generator=g)
    labels = torch.randint(0, CLASSES, (SAMPLES, 3), generator=g)
    model = FunctionalDropoutLM()
    exported = smp.export(model, ids[:BATCH], tmp_path / "lm.onnx")
    assert exported.dropout == []
    nodes = random_dropout_nodes(exported.path)
    assert [(r, t) for _, r, t in nodes] == [(np.float32(0.1), True)]
    assert exported.dropout_nodes == [{
        "module": "functional", "p": 0.1, "node": nodes[0][0],
        "call": "torch.nn.functional.dropout"}]
    assert json.loads(exported.sidecar.read_text())["dropout"] == []
    assert exported.max_abs_diff < 1e-5, exported.max_abs_diff
    assert model.training  # restored
    feeds = {"input_ids": ids.numpy(), "labels": labels.numpy()}
    dropped = train_losses(exported, feeds, tmp_path, "d", train=True)
    assert np.all(np.isfinite(dropped))
    other_seed = train_losses(exported, feeds, tmp_path, "s", seed=7)
    no_dropout = train_losses(exported, feeds, tmp_path, "n", no_dropout=True)
    assert np.max(np.abs(np.subtract(dropped, no_dropout))) > 1e-4
    assert np.max(np.abs(np.subtract(dropped, other_seed))) > 1e-4


class FunctionalDropout(torch.nn.Module):
    """F.dropout(x, p, self.training): no module shows it. `noise`: another
    random op in train() (Gaussian noise); `train_branch`: train() changes
    more than the dropout (a deterministic train-only scale)."""

    def __init__(self, batchnorm=False, noise=False, train_branch=False):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 12)
        self.bn = torch.nn.BatchNorm1d(12) if batchnorm else torch.nn.Identity()
        self.fc2 = torch.nn.Linear(12, CLASSES)
        self.noise, self.train_branch = noise, train_branch

    def forward(self, x):
        h = torch.nn.functional.dropout(self.bn(self.fc1(x)), 0.2, self.training)
        if self.noise and self.training:
            h = h + 0.1 * torch.randn_like(h)
        if self.train_branch and self.training:
            h = h * 2
        return self.fc2(h)


@pytest.mark.parametrize("batchnorm", [False, True])
def test_functional_dropout_is_held(tools, tmp_path, batchnorm):
    """F.dropout with training and p > 0 is written by a training-mode
    export (a model with BatchNorm has one anyway) as Dropout(ratio=0.2,
    training_mode=true): held when the file's random Dropout nodes are the
    train() forward's dropout calls, one for one. The check compares the
    file (its Dropout nodes the identity) with the dropout-free forward
    (eval(); BatchNorm's train()); the RNG is left as it was."""
    x, labels = data()
    torch.manual_seed(0)
    model = FunctionalDropout(batchnorm=batchnorm)
    rng = torch.get_rng_state()
    exported = smp.export(model, x[:BATCH], tmp_path / "f.onnx")
    assert torch.equal(torch.get_rng_state(), rng)  # the probes forked it
    assert exported.dropout == []
    nodes = random_dropout_nodes(exported.path)
    assert [(r, t) for _, r, t in nodes] == [(np.float32(0.2), True)]
    assert exported.dropout_nodes == [{
        "module": "functional", "p": 0.2, "node": nodes[0][0],
        "call": "torch.nn.functional.dropout"}]
    assert exported.max_abs_diff < 1e-5, exported.max_abs_diff
    assert model.training
    feeds = {"x": x.numpy(), "labels": labels.numpy()}
    dropped = train_losses(exported, feeds, tmp_path, "d", train=True)
    assert np.all(np.isfinite(dropped))
    np.testing.assert_array_equal(
        train_losses(exported, feeds, tmp_path, "same", seed=0), dropped)
    no_dropout = train_losses(exported, feeds, tmp_path, "n", no_dropout=True)
    assert np.max(np.abs(np.subtract(dropped, no_dropout))) > 1e-4
    if not batchnorm:
        # --no-dropout trains PyTorch's numbers for the model without it.
        class NoDropout(FunctionalDropout):
            def forward(self, x):
                return self.fc2(self.bn(self.fc1(x)))
        ref = NoDropout()
        ref.load_state_dict(model.state_dict())
        losses, _ = torch_refs.train_steps(ref, (x,), labels, CLASSES, "sgd",
                                           STEPS, BATCH)
        np.testing.assert_allclose(no_dropout, losses, rtol=0, atol=1e-5)


def test_functional_dropout_the_file_cannot_match_is_listed(tools, tmp_path,
                                                            monkeypatch):
    """Randomness a training-mode export would not hold as the forward's
    dropout calls keeps the eval() export and the listing ("forward": smpc
    --train asks for --no-dropout), or with BatchNorm is refused: another
    random op, train() changing more than dropout, or a file whose random
    Dropout nodes are not the calls (here: made so)."""
    import smp.exporter as ex
    x, _ = data()
    torch.manual_seed(0)
    for kind in ("noise", "train_branch"):
        exported = smp.export(FunctionalDropout(**{kind: True}), x[:BATCH],
                              tmp_path / f"{kind}.onnx")
        assert exported.dropout == [{"module": "forward", "p": None}], kind
        assert random_dropout_nodes(exported.path) == [], kind
        assert exported.dropout_nodes == []
    with pytest.raises(smp.SmpError, match=r"forward \(a random op\).*--no-dropout"):
        smp.compile(exported, output=tmp_path / "r.smpx", batch_size=BATCH,
                    loss="cross_entropy:logits:labels", lr=0.1)
    with pytest.raises(smp.SmpError, match="random apart from its dropout modules"):
        smp.export(FunctionalDropout(batchnorm=True, noise=True), x[:BATCH],
                   tmp_path / "g.onnx")

    # A deterministic model lists nothing.
    assert smp.export(Frozen(), x[:BATCH], tmp_path / "h.onnx").dropout == []

    real = ex._random_dropouts
    monkeypatch.setattr(ex, "_random_dropouts", lambda model: real(model)[1:])
    with pytest.warns(UserWarning, match=r"1 dropout calls; exporting in eval mode"):
        exported = smp.export(FunctionalDropout(), x[:BATCH], tmp_path / "m.onnx")
    assert exported.dropout == [{"module": "forward", "p": None}]
    assert random_dropout_nodes(exported.path) == []  # the eval() export
    with pytest.warns(UserWarning, match=r"exporting in eval mode"):
        lm = smp.export(FunctionalDropoutLM(),
                        torch.zeros(BATCH, 3, dtype=torch.int64), tmp_path / "lm.onnx")
    assert lm.dropout == [{"module": "config.attention_dropout", "p": 0.1}]
    with pytest.raises(smp.SmpError, match="random apart from its dropout modules"):
        smp.export(FunctionalDropout(batchnorm=True), x[:BATCH], tmp_path / "b.onnx")


class LayerDropLM(torch.nn.Module):
    """A Hugging Face-style model with LayerDrop (M2M100's and NLLB's
    encoder_layerdrop, 0.05 by default): in train() mode each layer is
    skipped when one draw falls below p. `p` is tiny here, so two train()
    forwards do not differ: the randomness cannot be seen by running."""

    def __init__(self, p=1e-9):
        super().__init__()
        self.config = _Config(encoder_layerdrop=p, dropout=0.0,
                              vocab_size=10)
        self.emb = torch.nn.Embedding(10, 8)
        self.layers = torch.nn.ModuleList(torch.nn.Linear(8, 8)
                                          for _ in range(2))
        self.fc = torch.nn.Linear(8, CLASSES)

    def forward(self, input_ids, attention_mask=None, return_dict=None):
        h = self.emb(input_ids)
        for layer in self.layers:
            if self.training and torch.rand([]) < \
                    self.config.values["encoder_layerdrop"]:
                continue
            h = h + torch.relu(layer(h))
        return (self.fc(h),)


LayerDropLM.__module__ = "transformers.models.fake.modeling_fake"


def test_layer_drop_of_a_hugging_face_config_is_listed(tools, tmp_path):
    """LayerDrop (encoder_layerdrop > 0) and stochastic depth are random ops
    no ONNX node holds; one draw per layer may not differ between two
    forwards, so the config says: listed under "dropout", and smpc --train
    refuses the model unless --no-dropout. (It was listed only when the
    two forwards happened to draw a skip: M2M100 trained without its
    LayerDrop, 3e-4 off PyTorch's loss by step 5, silently.)"""
    ids = torch.zeros(BATCH, 3, dtype=torch.int64)
    model = LayerDropLM()
    exported = smp.export(model, ids, tmp_path / "ld.onnx")
    assert exported.dropout == [{"module": "config.encoder_layerdrop",
                                 "p": 1e-9}]
    assert random_dropout_nodes(exported.path) == []
    assert json.loads(exported.sidecar.read_text())["dropout"] == \
        exported.dropout
    with pytest.raises(smp.SmpError, match=r"encoder_layerdrop.*--no-dropout"):
        smp.compile(exported, output=tmp_path / "ld.smpx", batch_size=BATCH,
                    loss="cross_entropy:logits:labels", lr=0.1)
    smp.compile(exported, output=tmp_path / "ld.smpx", batch_size=BATCH,
                loss="cross_entropy:logits:labels", lr=0.1, no_dropout=True)
    # p = 0 is no LayerDrop: nothing listed.
    assert smp.export(LayerDropLM(p=0.0), ids,
                      tmp_path / "n.onnx").dropout == []


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_hugging_face_gpt2_dropout_is_held(tools, tmp_path, attn):
    """A Hugging Face GPT-2 from a small config with its default dropouts
    (embd, attn, resid 0.1): the nn.Dropout modules are Dropout nodes and
    the attention dropout, which the attention function applies with
    attn_dropout.p (sdpa's dropout_p, the default; eager's F.dropout), is
    written by the training-mode export: 1 + 3 n_layer random Dropout
    nodes, nothing listed, and smpc --train trains it (finite losses that
    follow the seed)."""
    transformers = pytest.importorskip("transformers")
    if attn == "sdpa" and not hasattr(torch.nn.functional,
                                      "scaled_dot_product_attention"):
        pytest.skip("torch has no scaled_dot_product_attention")
    n_layer, vocab, seq = 2, 64, 8
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=n_layer, n_embd=32, n_head=2,
                                  vocab_size=vocab, n_positions=16,
                                  bos_token_id=0, eos_token_id=0,
                                  attn_implementation=attn)
    assert (cfg.embd_pdrop, cfg.attn_pdrop, cfg.resid_pdrop) == (0.1, 0.1, 0.1)
    model = transformers.GPT2LMHeadModel(cfg)
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(0, vocab, (SAMPLES, seq), generator=g)
    labels = torch.randint(0, vocab, (SAMPLES, seq), generator=g)
    exported = smp.export(model, ids[:BATCH], tmp_path / "gpt2.onnx")
    assert exported.dropout == []
    assert json.loads(exported.sidecar.read_text())["dropout"] == []
    nodes = random_dropout_nodes(exported.path)
    assert len(nodes) == 1 + 3 * n_layer
    assert all(r == np.float32(0.1) for _, r, _ in nodes)
    attn_nodes = [d for d in exported.dropout_nodes if "call" in d]
    assert [d["module"] for d in attn_nodes] == [
        f"transformer.h.{i}.attn.attn_dropout" for i in range(n_layer)]
    call = ("torch.nn.functional.scaled_dot_product_attention" if attn == "sdpa"
            else "torch.nn.functional.dropout")
    assert {d["call"] for d in attn_nodes} == {call}
    # sdpa's Dropout has a ratio and no training_mode, F.dropout's one.
    by_name = {n: t for n, _, t in nodes}
    assert all(by_name[d["node"]] == (attn == "eager") for d in attn_nodes)
    assert exported.max_abs_diff < 1e-4, exported.max_abs_diff
    assert model.training and all(m.p == 0.1 for m in model.modules()
                                  if isinstance(m, torch.nn.Dropout))

    feeds = {"input_ids": ids.numpy(), "labels": labels.numpy()}
    dropped = train_losses(exported, feeds, tmp_path, "d", train=True, seed=3)
    assert np.all(np.isfinite(dropped))
    np.testing.assert_array_equal(
        train_losses(exported, feeds, tmp_path, "same", train=True, seed=3), dropped)
    other_seed = train_losses(exported, feeds, tmp_path, "s", train=True, seed=4)
    assert np.all(np.isfinite(other_seed))
    assert np.max(np.abs(np.subtract(dropped, other_seed))) > 1e-4
