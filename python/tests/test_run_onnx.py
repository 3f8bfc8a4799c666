"""smp.run_onnx: onnxruntime where installed, in a python of its own."""
import numpy as np
import pytest

pytest.importorskip("onnx")
import smp  # noqa: E402


def test_onnxruntime_runs_in_a_python_of_its_own(tmp_path):
    """smp.run_onnx runs onnxruntime in another python: loaded into this
    one beside Debian's torch 1.13 it broke that torch's TorchScript
    exporter (every later smp.export failed or crashed). Its exceptions
    come back as their type and first line (a Reshape to the wrong size)."""
    import importlib.util
    import sys
    if importlib.util.find_spec("onnxruntime") is None:
        pytest.skip("onnxruntime is not installed")
    from onnx import TensorProto, helper, numpy_helper
    import smp.exporter as ex

    def model(shape, name):
        g = helper.make_graph(
            [helper.make_node("Reshape", ["x", "s"], ["y"]),
             helper.make_node("Relu", ["y"], ["z"])], "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
            [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
            [numpy_helper.from_array(np.array(shape, np.int64), "s")])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        path = tmp_path / name
        path.write_bytes(m.SerializeToString())
        return path

    x = np.arange(-4, 4, dtype=np.float32).reshape(2, 4)
    got, runner = smp.run_onnx(model([4, 2], "ok.onnx"), {"x": x})
    assert runner == "onnxruntime" and "onnxruntime" not in sys.modules
    np.testing.assert_array_equal(got["z"], np.maximum(x, 0).reshape(4, 2))
    with pytest.raises(ex.OnnxRuntimeFailure) as e:
        smp.run_onnx(model([3, 3], "bad.onnx"), {"x": x})
    assert "Reshape" in str(e.value) and "\n" not in str(e.value)
    assert "onnxruntime" not in sys.modules
