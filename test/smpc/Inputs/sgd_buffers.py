"""Where an artifact's SGD updates write their new momentum buffers: for
each sgd_update(_multi) instruction of rank0.program.pb (decoded by
smp-artifact-text), prints "same" when every new momentum buffer is stored
where its momentum buffer input is (in place), else "own", and the arena.
Usage: sgd_buffers.py SMP_ARTIFACT_TEXT ARTIFACT_DIR."""
import re
import subprocess
import sys

tool, art = sys.argv[1], sys.argv[2]
text = subprocess.check_output([tool, "decode", f"{art}/rank0.program.pb"], text=True)


def where(block):
    """(pool, offset) of a buffer block."""
    pool = re.search(r"\n  pool: (\d+)", block)
    offset = re.search(r"\n  offset: (\d+)", block)
    return (int(pool.group(1)) if pool else 0, int(offset.group(1)) if offset else 0)


buffers = [where(b) for b in re.findall(r"\nbuffers \{(.*?)\n\}", text, re.S)]
for block in re.findall(r"\ninstructions \{(.*?)\n\}", text, re.S):
    op = re.search(r'op: "(\w+)"', block).group(1)
    if op not in ("sgd_update", "sgd_update_multi"):
        continue
    ins = [int(x) for x in re.findall(r"\n  inputs: (\d+)", block)]
    outs = [int(x) for x in re.findall(r"\n  outputs: (\d+)", block)]
    n = len(outs) // 2
    pairs = [(outs[n + i], ins[2 * n + i]) for i in range(n)]
    same = all(buffers[o] == buffers[i] for o, i in pairs)
    print(f"{op} of {n}: {'same' if same else 'own'}")
