#!/usr/bin/env python3
"""Static SASS statistics of the CUDA kernels' loops, without a GPU.

Compiles one kernels/cuda/*.cu file for sm_90 (--arch 90a: sm_90a, which
wgmma needs) with the project's include
paths (nvcc -cubin, ptxas -v), disassembles it (cuobjdump -sass) and prints,
for each kernel whose name contains every --kernel string: its registers and
spills, and the instructions of its innermost loop that holds tensor-core
products (HMMA; --loop-with another opcode), by opcode. An unrolled tile
loop's instruction count is what an issue-bound kernel's time follows
(docs/benchmarks.md, "Fused attention on the GPU").

--replace OLD=>NEW edits a temporary copy of the file's folder before
compiling (the one file there that holds OLD): for instance making a branch
constant, so that the loop left is one path's (`--replace 'int rows =
kAttnTile) {\\n  return=>int rows = kAttnTile) {\\n  return false; return'`
keeps only the unmasked tile of AttentionMma.cu).

cuobjdump is not in Debian's CUDA packages' minimal install; PyPI's
`nvidia-cuda-cuobjdump` wheel has it (unzip it; no pip install needed): pass
its path with --cuobjdump or CUOBJDUMP. It disassembles with nvdisasm, which
it looks for on PATH (or NVDISASM_PATH): PyPI's `nvidia-cuda-nvdisasm`
wheel, unzipped, its bin/ on PATH (the bin/ files may need chmod +x).

  scripts/sass-loops.py kernels/cuda/AttentionMma.cu --kernel bfloat16Li64E \\
      --kernel Lb0E
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def compile_cubin(src, build, out, log, arch):
    includes = ['include', os.path.join(build, 'include'), 'kernels/cuda/include',
                'kernels/cuda', 'runtime/base/include', 'kernels/include',
                'kernels/common/include']
    cmd = [os.environ.get('NVCC', '/usr/local/cuda/bin/nvcc'), '-O3',
           f'-gencode=arch=compute_{arch},code=sm_{arch}',
           '--expt-relaxed-constexpr', '-std=c++17',
           '-Xptxas', '-v', '-cubin', '-o', out, src,
           '-isystem=/usr/local/cuda/include']
    cmd += ['-I' + os.path.join(ROOT, i) for i in includes]
    with open(log, 'w') as f:
        r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT)
    if r.returncode:
        sys.exit(open(log).read()[-4000:] + '\nnvcc failed: ' + ' '.join(cmd))


def resources(log):
    """kernel -> 'N registers, S bytes spilled' from ptxas -v."""
    text = open(log).read()
    out = {}
    for m in re.finditer(r"Function properties for (\S+)\n.*?(\d+) bytes spill "
                         r"stores.*?\n.*?Used (\d+) registers", text):
        out[m.group(1)] = f'{m.group(3)} registers, {m.group(2)} bytes spilled'
    return out


def loop_stats(body):
    ops = collections.Counter()
    for s in body:
        op = re.sub(r'^@!?U?P[T0-9]+\s+', '', s).split()[0].split('.')[0]
        ops[op] += 1
    return ops


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('source')
    ap.add_argument('--kernel', action='append', default=[],
                    help='a string the mangled name contains (all must)')
    ap.add_argument('--replace', action='append', default=[],
                    help='OLD=>NEW in a copy of the source (\\n for newlines)')
    ap.add_argument('--loop-with', default='HMMA',
                    help='the innermost loop holding this opcode (LDG, ...)')
    ap.add_argument('--build', default=os.path.join(ROOT, 'build'))
    ap.add_argument('--arch', default='90',
                    help="the target: 90, or 90a for wgmma's files "
                         "(AttentionWgmma.cu, WgmmaProbe.cu)")
    ap.add_argument('--listing', metavar='FILE',
                    help="also write each loop's instructions to FILE")
    ap.add_argument('--cuobjdump', default=os.environ.get(
        'CUOBJDUMP', shutil.which('cuobjdump') or 'cuobjdump'))
    args = ap.parse_args()
    if not shutil.which(args.cuobjdump):
        sys.exit(f'sass-loops: no cuobjdump at {args.cuobjdump!r}: unzip PyPI\'s '
                 'nvidia-cuda-cuobjdump wheel and pass its bin/cuobjdump with '
                 '--cuobjdump or CUOBJDUMP')
    src = os.path.abspath(args.source)
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, 'src')  # the folder: its includes
        shutil.copytree(os.path.dirname(src), copy)
        for r in args.replace:
            old, new = (x.replace('\\n', '\n') for x in r.split('=>', 1))
            holders = [os.path.join(d, f) for d, _, fs in os.walk(copy)
                       for f in fs if old in open(os.path.join(d, f),
                                                  errors='replace').read()]
            if len(holders) != 1:
                sys.exit(f'--replace: {old!r} is in {len(holders)} files of '
                         f'{os.path.dirname(args.source)}, not one')
            text = open(holders[0]).read().replace(old, new)
            with open(holders[0], 'w') as f:
                f.write(text)
        cubin, log = os.path.join(tmp, 'k.cubin'), os.path.join(tmp, 'log')
        compile_cubin(os.path.join(copy, os.path.basename(src)), args.build,
                      cubin, log, args.arch)
        res = resources(log)
        dump = subprocess.run([args.cuobjdump, '-sass', cubin],
                              capture_output=True, text=True)
        if dump.returncode:
            sys.exit(f'sass-loops: {args.cuobjdump} -sass failed: '
                     f'{dump.stderr.strip()} (it needs nvdisasm on PATH or '
                     'NVDISASM_PATH: unzip PyPI\'s nvidia-cuda-nvdisasm wheel)')
        sass = dump.stdout
    for f in re.split(r'\n\s+Function : ', sass)[1:]:
        name = f.split('\n', 1)[0].strip()
        if not all(k in name for k in args.kernel):
            continue
        ins = [(int(a, 16), s.strip()) for a, s in
               re.findall(r'/\*([0-9a-f]{4,5})\*/\s+([^;]+);', f)]
        print(f'{name}\n  {res.get(name, "?")}, {len(ins)} instructions')
        loops = [(int(m.group(1), 16), a) for a, s in ins
                 for m in [re.search(r'BRA (0x[0-9a-f]+)', s)]
                 if m and int(m.group(1), 16) < a]
        holding = [(hi - lo, lo, hi) for lo, hi in loops
                   if any(args.loop_with in s for a, s in ins if lo <= a <= hi)]
        if not holding:
            continue
        _, lo, hi = min(holding)
        body = [s for a, s in ins if lo <= a <= hi]
        ops = loop_stats(body)
        if args.listing:
            with open(args.listing, 'a') as out:
                out.write(f'{name} {lo:#x}-{hi:#x}\n' +
                          ''.join(f'  {s}\n' for s in body))
        print(f'  loop {lo:#x}-{hi:#x}: {sum(ops.values())} instructions: ' +
              ', '.join(f'{k} {v}' for k, v in ops.most_common(16)))


if __name__ == '__main__':
    main()
