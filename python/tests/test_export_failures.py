"""smp.export after the TorchScript exporter failed."""
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
import smp  # noqa: E402
from test_export import BATCH, ChannelDrop, Diffs, data  # noqa: E402


def test_an_export_after_a_failed_one(tools, tmp_path):
    """A failed export's SmpError, kept (a user's or pytest's traceback),
    held the exporter's frames and their pybind wrappers of graphs C++ had
    freed; a later training-mode export whose graph came at the same
    address failed ("Unable to cast from non-held to held instance",
    Debian's torch 1.13: the dropout tests failed whenever another test
    module ran first, and crashed pytest reporting it). smp.export drops
    those frames' locals."""
    x, _ = data()
    kept = []
    for k in range(4):
        with pytest.raises(smp.SmpError) as e:
            smp.export(Diffs(), x[:BATCH], tmp_path / f"diff{k}.onnx")
        kept.append(e.value)
        exported = smp.export(ChannelDrop(), x[:BATCH], tmp_path / f"c{k}.onnx")
        assert exported.dropout == [{"module": "chan", "p": 0.2},
                                    {"module": "spare", "p": 0.4}]
