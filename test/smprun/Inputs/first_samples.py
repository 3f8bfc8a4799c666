#!/usr/bin/env python3
"""first_samples.py SRC DST N REF: the first N samples of each .npy in SRC
written to DST, and DST/ref.json: REF's evaluations (make_prediction_refs.py
--regression) as those of the N samples, from each one's "firstN" (the
Trainer's eval_loss, pearson and spearmanr of them), for
test/train/compare_evals.py."""

import json
import sys
from pathlib import Path

import numpy as np

src, dst, n, ref = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
dst.mkdir(parents=True, exist_ok=True)
for f in src.glob("*.npy"):
    np.save(dst / f.name, np.load(f)[:n])
r = json.load(open(ref))
first = "first%d" % n
r["evals"] = [{"step": e["step"], "eval_loss": e[first]["loss"], "samples": n,
               "batch_losses": [],
               "metrics": {k: v for k, v in e[first].items() if k != "loss"}}
              for e in r["evals"]]
(dst / "ref.json").write_text(json.dumps(r, indent=2) + "\n")
