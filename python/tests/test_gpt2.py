"""Acceptance: a small GPT-2 (transformers' GPT2LMHeadModel, or the hand-
written GPT of python/smp_models.py where transformers is absent) exported
with smp.export, compiled with a SageMaker-style dict, trained 5 steps on 4
ranks (dp2 x pp2, 4 micro-batches, AdamW) against PyTorch's per-step losses,
then the trained weights loaded back into the module: its logits against
onnxruntime's (or smprun's) run of smp's trained ONNX."""

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
import smp  # noqa: E402
import torch_refs  # noqa: E402  (python/torch_refs.py)

# A vocabulary that is not a multiple of 8, as GPT-2's 50257 (and at least
# 1024): smpc pads the LM head (smp-pad-classes), which this checks against
# PyTorch's unpadded model under dp2 x pp2 with the tied weight on both
# stages.
VOCAB, SEQ, BATCH, SAMPLES, STEPS = 1025, 8, 8, 16, 5


def build_model():
    torch.manual_seed(0)
    try:
        import transformers
    except ImportError:
        transformers = None
    if transformers is not None:
        cfg = transformers.GPT2Config(
            vocab_size=VOCAB, n_positions=16, n_embd=32, n_layer=2, n_head=2,
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
            bos_token_id=0, eos_token_id=0)
        return transformers.GPT2LMHeadModel(cfg), "transformers GPT2LMHeadModel"
    import smp_models as M
    cfg = M.GPTConfig(vocab_size=VOCAB, block_size=16, n_layer=2, n_head=2,
                      n_embd=32)
    return M.GPT(cfg), "smp_models.GPT (no transformers)"


def logits_of(model, ids):
    out = model(ids)
    return out.logits if hasattr(out, "logits") else out


class Logits(torch.nn.Module):
    """The logits alone (torch_refs trains a module that returns them)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return logits_of(self.model, ids)


def test_gpt2_export_compile_train_reload(tools, tmp_path):
    model, what = build_model()
    print("model:", what, "torch", torch.__version__)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, VOCAB, (SAMPLES, SEQ), generator=g)
    labels = torch.randint(0, VOCAB, (SAMPLES, SEQ), generator=g)
    initial = copy.deepcopy(model.state_dict())

    exported = smp.export(model, ids[:BATCH], tmp_path / "gpt2.onnx")
    assert exported.max_abs_diff < 1e-4, exported.max_abs_diff
    config = {"pipeline_parallel_degree": 2, "microbatches": 4, "ddp": True,
              "pipeline": "interleaved", "placement_strategy": "cluster",
              "devices": 4, "batch_size": BATCH, "optimizer": "adamw",
              "lr": torch_refs.LRS["adamw"]}
    artifact = smp.compile(exported, config=config,
                           loss="cross_entropy:logits:labels")
    assert artifact.ranks == 4
    assert "dp=2 tp=1 pp=2" in artifact.plan_text
    result = smp.train(artifact, data={exported.input_names[0]: ids.numpy(),
                                       "labels": labels.numpy()},
                       steps=STEPS, ranks=4, checkpoint_dir=tmp_path / "ckpt",
                       save_onnx=tmp_path / "trained.onnx")

    losses, _ = torch_refs.train_steps(Logits(model), (ids,), labels, VOCAB, "adamw",
                                       STEPS, BATCH)
    print("smp losses  ", result.losses)
    print("torch losses", losses)
    assert len(result.losses) == STEPS
    np.testing.assert_allclose(result.losses, losses, rtol=0, atol=1e-4)

    # The trained weights, gathered from the 4 ranks' shards, into a fresh
    # copy of the module: its logits against smp's trained ONNX.
    weights = smp.load_checkpoint(tmp_path / "ckpt")
    fresh, _ = build_model()
    fresh.load_state_dict(initial)
    smp.load_state_dict(fresh, weights, exported)
    for k, v in model.state_dict().items():  # PyTorch's own trained weights
        got_k, want_k = fresh.state_dict()[k].numpy(), v.numpy()
        if k.endswith("attn.c_attn.bias"):
            # The key bias adds q.b_k to every score of a query's row, which
            # the softmax ignores: its gradient is zero in exact arithmetic,
            # so both frameworks' values are rounding noise, which Adam
            # normalises into updates of up to lr per step in either
            # direction. Checked within that bound; the query and value
            # biases as strictly as the rest.
            h = got_k.shape[0] // 3
            lr = torch_refs.LRS["adamw"]
            np.testing.assert_allclose(got_k[h:2 * h], want_k[h:2 * h], rtol=0,
                                       atol=lr * STEPS, err_msg=k + " (keys)")
            got_k = np.concatenate([got_k[:h], got_k[2 * h:]])
            want_k = np.concatenate([want_k[:h], want_k[2 * h:]])
        np.testing.assert_allclose(got_k, want_k, rtol=1e-3, atol=1e-4,
                                   err_msg=k)
    fresh.eval()
    with torch.no_grad():
        want = logits_of(fresh, ids[:BATCH]).numpy()
    got, runner = smp.run_onnx(tmp_path / "trained.onnx",
                               {exported.input_names[0]: ids[:BATCH].numpy()})
    diff = float(np.max(np.abs(got["logits"] - want)))
    print(f"trained logits vs smp's trained ONNX ({runner}): max |diff| {diff:.3g}")
    assert diff < 1e-4

    # Inference over the dataset with smp's trained model: compiled for
    # half a batch, smp.run takes all the samples batch by batch.
    forward = smp.compile(tmp_path / "trained.onnx", batch_size=BATCH // 2,
                          output=tmp_path / "forward.smpx")
    outs = smp.run(forward, {exported.input_names[0]: ids.numpy()})
    with torch.no_grad():
        want = logits_of(fresh, ids).numpy()
    assert outs["logits"].shape == want.shape
    diff = float(np.max(np.abs(outs["logits"] - want)))
    print(f"smp.run over {SAMPLES} samples in batches of {BATCH // 2}: "
          f"max |diff| {diff:.3g}")
    assert diff < 1e-4
