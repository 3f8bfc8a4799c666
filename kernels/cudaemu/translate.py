#!/usr/bin/env python3
"""Rewrites a kernels/cuda source (.cu / .cuh) into host C++ for the CUDA
emulator (docs/cuda-emulator.md): the two CUDA constructs that are not C++.

  k<<<grid, block[, shared[, stream]]>>>(args)
      -> ::smp::cudaemu::Launch("k", grid, block[, shared[, stream]]).run(k, args)
  extern __shared__ [__align__(n)] T name[];
      -> T *name = static_cast<T *>(::smp::cudaemu::dynamicShared());
  __shared__ [__align__(n)] T a[N], b[M];
      -> static [__align__(n)] T a[N], b[M];
         ::smp::cudaemu::sharedStatic(a, sizeof(a)); ...
         (one array per kernel, shared by the block that runs: the first
         thread of each block to reach it fills it with a NaN pattern, as
         a GPU's shared memory starts as garbage)

A launch whose line ends in `// cudaemu-name: EXPR` is named by EXPR (a
runtime const char *, e.g. the op a generic launch helper was given) instead
of its kernel expression.

Every kernel definition (`__global__`) gets a first statement on the line of
its opening brace,
      { if (::smp::cudaemu::kernelEntry(N)) return;
with N the first argument of its `__launch_bounds__` (0 where it has none):
a launch calls the kernel once to learn N before its checks (Launch.h).

Includes of "X.cuh" become "X.cuh.h" (the translated copy beside it).
Everything else is kept, line for line (the launch rewrite keeps the line
count), so the compiler's line numbers still point into the .cu file.

  translate.py IN OUT
"""
import re
import sys

# The kernel expression before <<<: a name with an optional template
# argument list (one level of nesting), e.g. reduceRows<S, Ops>.
KERNEL = r"([A-Za-z_][\w:]*(?:\s*<(?:[^<>;]|<[^<>;]*>)*>)?)"
LAUNCH = re.compile(KERNEL + r"(\s*)<<<(.*?)>>>(\s*)\(", re.S)
EXTERN_SHARED = re.compile(
    r"extern\s+__shared__\s+(?:__align__\(\s*\d+\s*\)\s+)?([\w:<> ]+?)\s+(\w+)\s*\[\s*\]\s*;")
NAMED = re.compile(r"[ \t]*// cudaemu-name: ([^\n]+?)\s*$", re.M)
INCLUDE_CUH = re.compile(r'#include "([\w/]+\.cuh)"')
# A block's __shared__ variables in a function: TYPE a[N][M], b[N];
STATIC_SHARED = re.compile(
    r"__shared__\s+(__align__\(\s*\d+\s*\)\s+)?([\w:<>]+)\s+([^;]+);")


TEMPLATE_KERNEL = re.compile(
    r"template\s*<[^{;]*?>\s*__global__\s+void\s+(\w+)\s*\(")


# A kernel's head up to its parameter list: `__global__` and what may come
# before the name (the return type, `__launch_bounds__(...)`).
KERNEL_HEAD = re.compile(
    r"\b__global__\b((?:\s*(?:__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\)"
    r"|void|static|inline))*)\s*(\w+)\s*\(")
BOUNDS = re.compile(r"__launch_bounds__\s*\(((?:[^()]|\([^()]*\))*)\)")


def first_argument(args):
    """The text of a macro argument list's first argument."""
    depth = 0
    for i, c in enumerate(args):
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == "," and depth == 0:
            return args[:i].strip()
    return args.strip()


def add_kernel_entries(text):
    """Puts kernelEntry(N) first in every kernel definition."""
    out, pos = [], 0
    for m in KERNEL_HEAD.finditer(text):
        if m.start() < pos:
            continue
        # The parameter list's closing parenthesis, then `{` or `;`.
        depth, i = 1, m.end()
        while depth:
            if i >= len(text):
                raise SystemExit(f"translate.py: kernel {m.group(2)}: "
                                 "unbalanced parameter list")
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        brace = re.compile(r"\s*([{;])").match(text, i)
        if not brace:
            raise SystemExit(f"translate.py: kernel {m.group(2)}: no body "
                             "or ';' after its parameters")
        if brace.group(1) == ";":
            continue  # a declaration
        bounds = BOUNDS.search(m.group(1))
        bound = first_argument(bounds.group(1)) if bounds else "0"
        at = brace.end()
        out.append(text[pos:at])
        out.append(" if (::smp::cudaemu::kernelEntry("
                   f"static_cast<unsigned>({bound}))) return;")
        pos = at
    out.append(text[pos:])
    return "".join(out)


def translate(text):
    # Template kernels launched without template arguments deduce them from
    # the call, as CUDA's launch does: they run through a generic lambda.
    deduced = set(TEMPLATE_KERNEL.findall(text))
    text = add_kernel_entries(text)  # before the launches: they read it

    def launch(m):
        kernel, sp1, config, sp2 = m.group(1), m.group(2), m.group(3), m.group(4)
        name = '"' + re.sub(r"\s+", " ", kernel) + '"'
        # A generic helper's launch of the kernel it was given names the
        # launch by a runtime string: `// cudaemu-name: EXPR` after the
        # launch's statement on its last line.
        tail = NAMED.match(text, text.find(";", m.end()) + 1)
        if tail:
            name = tail.group(1)
        # The whitespace (newlines included) is kept where it was.
        rest = text[m.end():]
        close = "" if re.match(r"\s*\)", rest) else ", "
        if kernel in deduced:
            target = f"[&](auto... a) {{ {kernel}(a...); }}"
            return (f'::smp::cudaemu::Launch({name},{sp1}{config}){sp2}'
                    f".runDeduced({target}{close}")
        return (f'::smp::cudaemu::Launch({name},{sp1}{config}){sp2}'
                f".run({kernel}{close}")

    out = LAUNCH.sub(launch, text)
    out = EXTERN_SHARED.sub(
        lambda m: f"{m.group(1)} *{m.group(2)} = static_cast<{m.group(1)} *>("
                  f"::smp::cudaemu::dynamicShared());", out)
    def shared(m):
        # The alignment is kept (cp.async and vector accesses check it).
        align = m.group(1) or ""
        names = [d.split("[")[0].strip() for d in m.group(3).split(",")]
        poison = " ".join(f"::smp::cudaemu::sharedStatic({n}, sizeof({n}));"
                          for n in names)
        return f"static {align}{m.group(2)} {m.group(3)}; {poison}"

    out = STATIC_SHARED.sub(shared, out)
    out = INCLUDE_CUH.sub(r'#include "\1.h"', out)
    if "<<<" in out or re.search(r"\bextern\s+__shared__", out):
        raise SystemExit("translate.py: a launch or an extern __shared__ "
                         "it does not recognise is left")
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, dst = sys.argv[1], sys.argv[2]
    with open(src) as f:
        text = f.read()
    out = f'#line 1 "{src}"\n' + translate(text)
    try:
        with open(dst) as f:
            if f.read() == out:
                return  # unchanged: keep the timestamp (no rebuild)
    except OSError:
        pass
    with open(dst, "w") as f:
        f.write(out)


if __name__ == "__main__":
    main()
