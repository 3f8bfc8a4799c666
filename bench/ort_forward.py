#!/usr/bin/env python3
"""Times an ONNX model's forward pass on onnxruntime (CPU) with a fixed
thread count, for comparison with smprun on the same machine.

    python3 bench/ort_forward.py MODEL.onnx DATA_DIR --threads 2 [--repeat 3]

DATA_DIR holds one .npy per graph input (as for smprun).
"""
import argparse
import os
import time

import numpy as np
import onnxruntime as ort


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model")
    p.add_argument("data")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    t0 = time.perf_counter()
    sess = ort.InferenceSession(a.model, so, providers=["CPUExecutionProvider"])
    load = time.perf_counter() - t0
    feeds = {i.name: np.load(os.path.join(a.data, i.name + ".npy"))
             for i in sess.get_inputs()}
    times = []
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append(time.perf_counter() - t0)
    print(f"onnxruntime {ort.__version__}: load {load:.2f} s, forward "
          f"min {min(times):.2f} s, runs {', '.join(f'{t:.2f}' for t in times)}"
          f" ({a.threads} threads)")


if __name__ == "__main__":
    main()
