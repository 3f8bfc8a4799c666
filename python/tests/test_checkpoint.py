"""smp.checkpoint: list, gather and export_safetensors of a sharded
checkpoint (2 ranks, ZeRO-1) of the mlp training fixture."""

from pathlib import Path

import numpy as np
import pytest

import smp

FIXTURES = Path(__file__).resolve().parents[2] / "test" / "fixtures" / "train"
TRAIN = dict(loss="cross_entropy:logits:labels", batch_size=8,
             optimizer="adamw", lr=1e-3)


@pytest.fixture(scope="module")
def sharded(tools, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ckpt")
    art = smp.compile(FIXTURES / "mlp.onnx", output=tmp / "z2.smpx", dp=2,
                      shard_optimizer_state=True, **TRAIN)
    smp.train(art, data=FIXTURES / "mlp", steps=3, checkpoint_dir=tmp / "ck",
              progress=False)
    return tmp


def test_list(sharded):
    info = smp.checkpoint.list(sharded / "ck")
    assert (info["step"], info["num_ranks"], info["global_batch"]) == (3, 2, 8)
    assert info["optimizer"].startswith("adamw(beta1=0.9")
    t = {x["name"]: x for x in info["tensors"]}
    assert t["net.0.weight"]["shape"] == [32, 16]
    assert t["net.0.weight"]["role"] == "param"
    assert t["net.0.weight.exp_avg"]["role"] == "state"


def test_gather_resumes_on_one_rank(sharded):
    out = smp.checkpoint.gather(sharded / "ck", sharded / "one")
    info = smp.checkpoint.list(out)
    assert info["num_ranks"] == 1 and info["plan"].startswith("gathered from")
    art = smp.compile(FIXTURES / "mlp.onnx", output=sharded / "one.smpx",
                      **TRAIN)
    full = smp.train(art, data=FIXTURES / "mlp", steps=5, progress=False)
    res = smp.train(art, data=FIXTURES / "mlp", steps=5, checkpoint_dir=out,
                    resume=True, progress=False)
    assert "resumed from" in res.output
    np.testing.assert_allclose(res.losses, full.losses[3:], rtol=1e-5)


def test_export_safetensors_round_trip(sharded):
    st = pytest.importorskip("safetensors.numpy")
    path = smp.checkpoint.export_safetensors(sharded / "ck",
                                             sharded / "py.safetensors")
    ours = st.load_file(str(path))
    gathered = smp.checkpoint.arrays(sharded / "ck")
    assert sorted(ours) == sorted(gathered)
    for k in ours:
        np.testing.assert_array_equal(ours[k], gathered[k])
    # The C++ writer's file reads the same through the library.
    smp._tools.run("smp-checkpoint", ["export", str(sharded / "ck"), "--format",
                                      "safetensors", "-o",
                                      str(sharded / "cpp.safetensors")])
    cpp = st.load_file(str(sharded / "cpp.safetensors"))
    assert sorted(cpp) == sorted(ours)
    for k in ours:
        np.testing.assert_array_equal(cpp[k], ours[k])
    from safetensors import safe_open
    with safe_open(str(sharded / "cpp.safetensors"), "np") as f:
        assert f.metadata()["smp.step"] == "3"
