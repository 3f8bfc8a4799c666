"""smp's refusals reach Python as SmpError carrying the tool's message."""

from pathlib import Path

import pytest

import smp

FIXTURES = Path(__file__).resolve().parents[2] / "test" / "fixtures"
MLP = FIXTURES / "train" / "mlp.onnx"
TRAIN = dict(loss="cross_entropy:logits:labels", batch_size=8)


def test_unknown_config_key_did_you_mean(tools):
    with pytest.raises(smp.SmpError) as e:
        smp.compile(MLP, config={"pipeline_paralel_degree": 2}, **TRAIN)
    assert str(e.value).endswith('unknown key "pipeline_paralel_degree"; '
                                 'did you mean "pipeline_parallel_degree"?')
    assert e.value.tool == "smpc" and e.value.returncode == 1


def test_config_contradicts_option(tools):
    with pytest.raises(smp.SmpError) as e:
        smp.compile(MLP, config={"pipeline_parallel_degree": 2}, pp=4, **TRAIN)
    assert str(e.value).endswith('"pipeline_parallel_degree": 2 contradicts '
                                 '--pp 4 on the command line')


def test_config_file_path(tools, tmp_path):
    cfg = tmp_path / "smp.json"
    cfg.write_text('{"ddp": true, "devices": 2}')
    art = smp.compile(MLP, config=cfg, output=tmp_path / "a.smpx", **TRAIN)
    assert art.ranks == 2


def test_deepspeed_config_dict(tools, tmp_path):
    ds = {"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2,
          "gradient_accumulation_steps": 2, "bf16": {"enabled": True},
          "optimizer": {"type": "AdamW", "params": {"lr": 3e-4}},
          "zero_optimization": {"stage": 2}}
    art = smp.compile(MLP, deepspeed=ds, output=tmp_path / "a.smpx",
                      loss="cross_entropy:logits:labels")
    assert art.ranks == 2  # 8 = 2 x 2 x dp 2
    assert "precision: bf16" in art.plan_text
    assert "adamw(beta1=0.9, beta2=0.999, eps=1e-08, weight_decay=0)" in art.plan_text
    with pytest.raises(smp.SmpError) as e:
        smp.compile(MLP, deepspeed=ds, output=tmp_path / "b.smpx",
                    loss="cross_entropy:logits:labels", precision="fp32")
    assert str(e.value).endswith('"bf16.enabled": true contradicts '
                                 '--precision fp32 on the command line (or '
                                 'in --config)')


def test_training_args_dict_file_and_object(tools, tmp_path):
    # A dict of TrainingArguments' keys, the file a Trainer user saved, and
    # an object with to_json_string() (what TrainingArguments has).
    args = {"learning_rate": 2e-3, "max_steps": 10, "weight_decay": 0.1,
            "per_device_train_batch_size": 4, "gradient_accumulation_steps": 2,
            "lr_scheduler_type": "cosine", "warmup_steps": 2}
    art = smp.compile(MLP, training_args=args, output=tmp_path / "a.smpx",
                      loss="cross_entropy:logits:labels")
    assert ("--batch-size 8 --microbatches 2 --optimizer adamw --weight-decay "
            "0.1 --hf-no-decay" in art.plan_text)
    assert "--lr-schedule hf-cosine --decay-steps 10 --warmup-steps 2" in art.plan_text
    saved = FIXTURES / "hf-trainer" / "linear_decay.json"
    art = smp.compile(FIXTURES / "train" / "gpt.onnx", training_args=saved,
                      output=tmp_path / "b.smpx",
                      loss="cross_entropy:logits:labels")
    assert "--lr-schedule hf-linear --decay-steps 10 --warmup-steps 3" in art.plan_text

    class Args:  # duck-typed TrainingArguments
        def to_json_string(self):
            return '{"learning_rate": 0.5, "optim": "sgd", "max_steps": 4}'
    art = smp.compile(MLP, training_args=Args(), output=tmp_path / "c.smpx",
                      loss="cross_entropy:logits:labels")
    assert ("--optimizer sgd --weight-decay 0 --clip-grad-norm 1 --lr 0.5"
            in art.plan_text)
    with pytest.raises(smp.SmpError) as e:
        smp.compile(MLP, training_args=args, output=tmp_path / "d.smpx",
                    loss="cross_entropy:logits:labels", lr=0.1)
    assert str(e.value).endswith('"learning_rate": 0.002 contradicts --lr 0.1 '
                                 'on the command line (or in --config)')


def test_training_args_with_a_deepspeed_dict(tools, tmp_path):
    # TrainingArguments(deepspeed={...}): the dict is the Trainer's config.
    args = {"learning_rate": 2e-3, "max_steps": 10, "weight_decay": 0.1,
            "deepspeed": {"train_batch_size": "auto",
                          "gradient_clipping": "auto",
                          "optimizer": {"type": "AdamW",
                                        "params": {"lr": "auto",
                                                   "weight_decay": "auto"}}}}
    art = smp.compile(MLP, training_args=args, output=tmp_path / "a.smpx",
                      loss="cross_entropy:logits:labels")
    assert "--optimizer adamw" in art.plan_text
    assert "--hf-no-decay" not in art.plan_text  # DeepSpeed's optimizer
    assert "--weight-decay 0.1" in art.plan_text
    assert (tmp_path / "trainer_ds_config.json").exists()


def test_training_args_of_transformers(tools, tmp_path):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"), max_steps=10, learning_rate=1e-3,
        weight_decay=0.01, warmup_steps=2, report_to=[])
    art = smp.compile(MLP, training_args=args, output=tmp_path / "a.smpx",
                      loss="cross_entropy:logits:labels")
    assert "--lr-schedule hf-linear --decay-steps 10 --warmup-steps 2" in art.plan_text


def test_train_error_is_smpruns_message(tools, tmp_path):
    art = smp.compile(MLP, output=tmp_path / "a.smpx", **TRAIN)
    import numpy as np
    with pytest.raises(smp.SmpError) as e:
        smp.train(art, data={"x": np.zeros((8, 3), np.float32)}, steps=1,
                  progress=False)
    assert e.value.tool == "smprun"
    assert "input 'x' is 8x3xf32" in str(e.value)
    print(e.value)


def test_train_refuses_labels_that_copy_the_input(tools, tmp_path):
    # Hugging Face's collator gives a causal LM labels = input_ids (the
    # model shifts them); smpc's cross_entropy loss does not shift, so
    # smprun refuses them, and allow_copied_labels says they are meant.
    import numpy as np
    art = smp.compile(FIXTURES / "train" / "gpt.onnx",
                      output=tmp_path / "g.smpx", **TRAIN)
    idx = np.load(FIXTURES / "train" / "gpt" / "idx.npy")
    labels = idx.copy()
    labels[:, -1] = -100
    with pytest.raises(smp.SmpError) as e:
        smp.train(art, data={"idx": idx, "labels": labels}, steps=1,
                  progress=False)
    assert "are input 'idx' itself" in str(e.value)
    assert "pass --allow-copied-labels" in str(e.value)
    copied = smp.train(art, data={"idx": idx, "labels": labels}, steps=1,
                       allow_copied_labels=True, progress=False)
    shifted = np.concatenate([idx[:, 1:], np.full((len(idx), 1), -100)], 1)
    ok = smp.train(art, data={"idx": idx, "labels": shifted}, steps=1,
                   progress=False)
    assert len(copied.losses) == 1 and len(ok.losses) == 1
    # shift_labels=True (smpc --shift-labels) takes the collator's labels
    # as they are and trains what the shifted ones train, bit for bit.
    hf = smp.compile(FIXTURES / "train" / "gpt.onnx", shift_labels=True,
                     output=tmp_path / "hf.smpx", **TRAIN)
    assert "(smpc --shift-labels)" in hf.plan_text
    unshifted = idx.copy()
    unshifted[:, 12:] = -100
    by_hand = np.concatenate([unshifted[:, 1:],
                              np.full((len(idx), 1), -100)], 1)
    a = smp.train(hf, data={"idx": idx, "labels": unshifted}, steps=2,
                  progress=False)
    b = smp.train(art, data={"idx": idx, "labels": by_hand}, steps=2,
                  progress=False)
    assert a.losses == b.losses


def test_run_refuses_a_mask_the_model_does_not_read(tools, tmp_path):
    # A tokenizer's dict passed whole: the model was exported with its ids
    # alone, so the mask marking padding would be dropped; refused, and
    # ignore_unread_data says it is meant.
    import numpy as np
    art = smp.compile(FIXTURES / "gpt_op17.onnx", output=tmp_path / "f.smpx",
                      batch_size=2, dim={"seq": 16})
    idx = np.load(FIXTURES / "gpt_op17" / "idx.npy")
    mask = np.ones_like(idx)
    mask[:, 12:] = 0
    enc = {"idx": np.where(mask == 0, 7, idx), "attention_mask": mask}
    with pytest.raises(smp.SmpError) as e:
        smp.run(art, enc)
    assert "reads no input 'attention_mask' (its inputs: idx)" in str(e.value)
    assert "pass --ignore-unread-data" in str(e.value)
    out = smp.run(art, enc, ignore_unread_data=True)
    np.testing.assert_array_equal(out["logits"],
                                  smp.run(art, {"idx": enc["idx"]})["logits"])


def test_run_refuses_batches_of_a_model_that_mixes_samples(tools, tmp_path):
    # An output centred on the batch's mean: run batch by batch it would be
    # another model's output; smp.run names the op and the batch to compile.
    import numpy as np
    centred = Path(__file__).resolve().parents[2] / "test" / "smprun" / \
        "Inputs" / "batch-centred.onnxtxt"
    art = smp.compile(centred, output=tmp_path / "c.smpx", batch_size=4)
    x = np.arange(24, dtype=np.float32).reshape(8, 3)
    with pytest.raises(smp.SmpError) as e:
        smp.run(art, {"x": x})
    assert "output 'c' cannot be computed batch by batch: 'smp.reduce_mean' " \
        "reduces over the batch dim" in str(e.value)
    assert "--batch-size 8" in str(e.value)
    whole = smp.compile(centred, output=tmp_path / "c8.smpx", batch_size=8)
    outs = smp.run(whole, {"x": x})
    np.testing.assert_allclose(outs["c"], x - x.mean(0), rtol=1e-6)
    np.testing.assert_array_equal(outs["r"], np.maximum(x, 0))


def test_check_finite_names_the_op(tools, tmp_path):
    # Data with NaN: smprun's plain error names the input; with
    # check_finite the first op that reads it, and its ONNX node.
    import numpy as np
    art = smp.compile(MLP, output=tmp_path / "a.smpx", **TRAIN)
    x = np.load(FIXTURES / "train" / "mlp" / "x.npy")
    x[3, 0] = np.nan
    data = {"x": x, "labels": np.load(FIXTURES / "train" / "mlp" / "labels.npy")}
    with pytest.raises(smp.SmpError, match="input 'x' holds NaN"):
        smp.train(art, data=data, steps=1, progress=False)
    with pytest.raises(smp.SmpError) as e:
        smp.train(art, data=data, steps=1, check_finite=True, progress=False)
    assert ("--check-finite: instruction 1 of" in str(e.value) and
            "(node '/net/net.0/Gemm') wrote NaN" in str(e.value) and
            "it reads 'x', which held NaN before" in str(e.value))


def test_overlap_false_is_smpruns_no_overlap(tools, tmp_path, monkeypatch):
    # overlap=False passes --no-overlap on (smprun accepts it on the CPU,
    # which runs everything as it is issued: the same losses).
    import numpy as np
    from smp import _tools
    art = smp.compile(MLP, output=tmp_path / "a.smpx", **TRAIN)
    data = {n: np.load(FIXTURES / "train" / "mlp" / f"{n}.npy")
            for n in ("x", "labels")}
    calls = []
    real = _tools.run

    def spy(name, args, **kw):
        calls.append(list(args))
        return real(name, args, **kw)

    monkeypatch.setattr(_tools, "run", spy)
    both = [smp.train(art, data=data, steps=2, overlap=o, progress=False)
            for o in (True, False)]
    assert ["--no-overlap" in c for c in calls] == [False, True]
    assert both[0].losses == both[1].losses


def test_cuda_graph_is_smpruns_and_refused_on_the_cpu(tools, tmp_path):
    # cuda_graph=True passes --cuda-graph on; the CPU records no graph, and
    # smprun's refusal says what to do.
    import numpy as np
    art = smp.compile(MLP, output=tmp_path / "a.smpx", **TRAIN)
    data = {n: np.load(FIXTURES / "train" / "mlp" / f"{n}.npy")
            for n in ("x", "labels")}
    with pytest.raises(smp.SmpError) as e:
        smp.train(art, data=data, steps=2, cuda_graph=True, device="cpu",
                  progress=False)
    assert e.value.tool == "smprun"
    assert ("recording the step as a CUDA graph (--cuda-graph): cpu runs "
            "each instruction as it is issued and records none; run on a "
            "GPU (--device cuda) or without --cuda-graph") in str(e.value)


def test_moved_source_model(tools, tmp_path):
    # --save-onnx reads the model smpc compiled: moved, smprun refuses before
    # training and names --source-model; a copy passed as source_model works,
    # another model is refused.
    model = tmp_path / "model.onnx"
    model.write_bytes(MLP.read_bytes())
    art = smp.compile(model, output=tmp_path / "a.smpx", **TRAIN)
    moved = tmp_path / "moved.onnx"
    model.rename(moved)
    data = FIXTURES / "train" / "mlp"
    with pytest.raises(smp.SmpError, match="pass --source-model FILE"):
        smp.train(art, data=data, steps=1, save_onnx=tmp_path / "t.onnx",
                  progress=False)
    r = smp.train(art, data=data, steps=1, save_onnx=tmp_path / "t.onnx",
                  source_model=moved, progress=False)
    assert r.save_onnx.stat().st_size > 0
    with pytest.raises(smp.SmpError, match="is not the model"):
        smp.train(art, data=data, steps=1, save_onnx=tmp_path / "u.onnx",
                  source_model=FIXTURES / "train" / "gpt.onnx", progress=False)


def test_missing_tools(monkeypatch, tmp_path):
    monkeypatch.setenv("SMP_BIN_DIR", str(tmp_path))
    with pytest.raises(smp.SmpError, match="cannot find smpc"):
        smp.compile(MLP, **TRAIN)


def test_export_refuses_16_bit_module(tmp_path):
    # smp.export's TorchScript exporter writes bf16/fp16 modules wrong; the
    # refusal names the exporter that works (dynamo) and model.float().
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(),
                                torch.nn.Linear(4, 2)).to(torch.bfloat16)
    with pytest.raises(smp.SmpError) as e:
        smp.export(model, torch.zeros(2, 4, dtype=torch.bfloat16),
                   tmp_path / "m.onnx")
    assert str(e.value).startswith(
        "smp.export: 4 of the module's 4 parameters are bfloat16 ('0.weight', "
        "...): smp.export's TorchScript exporter does not write 16-bit "
        "modules right")
    assert "torch.onnx.export(module, args, path) (dynamo)" in str(e.value)
    assert not (tmp_path / "m.onnx").exists()
    model[0].half()  # one fp16 layer is enough
    model[2].float()
    with pytest.raises(smp.SmpError, match=r"2 of the module's 4 parameters "
                       r"are float16 \('0.weight', \.\.\.\)"):
        smp.export(model, torch.zeros(2, 4), tmp_path / "m.onnx")
