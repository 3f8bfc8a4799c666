#!/usr/bin/env python3
"""Checks that no hand-written function and no source file is too long.

  check-function-length.py [--root DIR] [--max-function-lines 150]
                           [--max-file-lines 800] [--only functions|files]

Functions: every function body in the C++/CUDA sources under lib/, include/,
runtime/, kernels/ and tools/ (.cpp .cu .cuh .h), found by a heuristic: with
comments, strings and preprocessor lines removed, a `{` whose statement text
ends like a signature (`...)`, `...) const`, `... -> T`, a constructor's
initializer list) opens a function; its length runs from the first line of
that statement (return type, template header) to the matching `}`. Lambdas
and local classes count toward the function they stand in; methods in a
class body count on their own.

Files: every tracked source file (C++, CUDA, TableGen, protobuf, Python,
CMake) outside test fixtures and corpora.

Generated code (build trees, files saying they are generated) is skipped.
Prints each offender as `path:line: name: N lines (limit L)` and exits 1 if
there is one; otherwise prints the longest function and file and exits 0.

--allow FILE lists functions not split yet, one `path name N` a line: each
may stay over the limit but not grow past N lines (a ratchet). A listed
function that is now within the limit (or gone) is an error too: remove its
line, so the list only ever shrinks.
"""

import argparse
import os
import re
import subprocess
import sys

FUNCTION_DIRS = ("lib", "include", "runtime", "kernels", "tools")
FUNCTION_EXTS = (".cpp", ".cu", ".cuh", ".h")
FILE_EXTS = (".cpp", ".cu", ".cuh", ".h", ".inc", ".def", ".td", ".proto",
             ".py", ".cmake", "CMakeLists.txt", ".sh")
FILE_SKIP = ("test/fixtures/", "test/fuzz/corpus/", "build")
GENERATED = re.compile(r"(DO NOT EDIT|[Aa]utomatically generated|"
                       r"[Aa]uto-generated|@generated)")

SCOPE_START = re.compile(r"^(template\s*<[^{]*>\s*)?"
                         r"(namespace|extern|class|struct|union|enum)\b")
ACCESS = re.compile(r"^((public|private|protected)\s*:)\s*")
SIGNATURE_END = re.compile(
    r"\)\s*((const|volatile|noexcept(\s*\([^()]*\))?|override|final|mutable|"
    r"&&|&|throw\s*\(\s*\))\s*)*(->[^;{}=]*)?$")
INIT_LIST = re.compile(r"\)\s*(noexcept\s*)?:[^:]")
CONTROL = re.compile(r"^(if|for|while|switch|catch|do|else|try)\b")
NAME = re.compile(r"([~\w:]+|operator\s*[^\s(]+)\s*\(")


def strip_code(text):
    """Blanks comments, string/char literals and preprocessor lines, keeping
    every newline so line numbers stay right."""
    out = []
    i, n = 0, len(text)
    at_line_start = True
    while i < n:
        c = text[i]
        if at_line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if at_line_start and c == "#":
            # A preprocessor line and its continuations.
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append("\n")
                    i += 2
                    continue
                i += 1
            continue
        at_line_start = False
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append("\n" * text.count("\n", i, end))
            i = end
            continue
        m = re.match(r'R"([^(\s]*)\(', text[i:i + 20])
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            close = ")" + m.group(1) + '"'
            end = text.find(close, i + m.end())
            end = n if end < 0 else end + len(close)
            out.append('""' + "\n" * text.count("\n", i, end))
            i = end
            continue
        if c in "\"'":
            # A digit separator (1'000) is not a char literal.
            if c == "'" and i > 0 and text[i - 1].isalnum() and \
                    i + 1 < n and text[i + 1].isalnum():
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
            continue
        if c == "\n":
            at_line_start = True
        out.append(c)
        i += 1
    return "".join(out)


def functions(text):
    """Yields (start line, end line, name) of each outermost function body."""
    code = strip_code(text)
    stack = []  # kinds: 'scope', 'function', 'inner', 'other'
    stmt_start = 0
    line_at = [0]
    for ch in code:
        line_at.append(line_at[-1] + (ch == "\n"))
    in_function = 0
    for i, ch in enumerate(code):
        if ch == ";":
            stmt_start = i + 1
        elif ch == "{":
            stmt = code[stmt_start:i]
            lead = len(stmt) - len(stmt.lstrip())
            body = stmt.strip()
            access = ACCESS.match(body)
            if access:
                lead += len(stmt.lstrip()) - len(stmt.lstrip()[access.end():])
                body = body[access.end():]
            if in_function:
                kind = "inner"
            elif SCOPE_START.match(body):
                kind = "scope"
            elif "(" in body and not CONTROL.match(body) and \
                    (SIGNATURE_END.search(body) or INIT_LIST.search(body)):
                kind = "function"
            else:
                kind = "other"
            start = line_at[stmt_start + lead] + 1
            name = NAME.search(body)
            stack.append((kind, start, name.group(1) if name else body[:40]))
            if kind in ("function", "inner"):
                in_function += 1
            stmt_start = i + 1
        elif ch == "}":
            stmt_start = i + 1
            if not stack:
                continue
            kind, start, name = stack.pop()
            if kind in ("function", "inner"):
                in_function -= 1
            if kind == "function" and not in_function:
                yield start, line_at[i] + 1, name


def tracked_files(root):
    try:
        out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"],
                             cwd=root, capture_output=True, text=True,
                             check=True).stdout.split("\n")
        return sorted(f for f in out if f)
    except (OSError, subprocess.CalledProcessError):
        files = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames
                           if not d.startswith((".", "build"))]
            for f in filenames:
                files.append(os.path.relpath(os.path.join(dirpath, f), root))
        return sorted(files)


def read(root, path):
    with open(os.path.join(root, path), encoding="utf-8",
              errors="replace") as f:
        return f.read()


def is_generated(text):
    return GENERATED.search(text[:2000]) is not None


def read_allowed(path):
    allowed = {}
    if not path:
        return allowed
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].split()
            if len(line) == 3:
                allowed[(line[0], line[1])] = int(line[2])
    return allowed


def check_functions(root, files, limit, allowed):
    bad, longest, over = [], (0, ""), set()
    for path in files:
        if not path.startswith(tuple(d + "/" for d in FUNCTION_DIRS)) or \
                not path.endswith(FUNCTION_EXTS):
            continue
        text = read(root, path)
        if is_generated(text):
            continue
        for start, end, name in functions(text):
            length = end - start + 1
            where = f"{path}:{start}: {name}"
            longest = max(longest, (length, where))
            cap = allowed.get((path, name))
            if length > limit:
                over.add((path, name))
            if cap is not None and limit < length <= cap:
                print(f"{where}: {length} lines (allowed up to {cap} until "
                      f"it is split)")
            elif length > limit:
                bad.append(f"{where}: {length} lines (limit "
                           f"{max(limit, cap or 0)})")
    for path, name in sorted(set(allowed) - over):
        bad.append(f"{path}: {name}: listed in the allowlist but no longer "
                   f"over {limit} lines (remove its line)")
    return bad, longest


def check_files(root, files, limit):
    bad, longest = [], (0, "")
    for path in files:
        if not path.endswith(FILE_EXTS) or path.startswith(FILE_SKIP):
            continue
        text = read(root, path)
        if is_generated(text):
            continue
        length = text.count("\n")
        longest = max(longest, (length, path))
        if length > limit:
            bad.append(f"{path}:1: file: {length} lines (limit {limit})")
    return bad, longest


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.dirname(here))
    ap.add_argument("--max-function-lines", type=int, default=150)
    ap.add_argument("--max-file-lines", type=int, default=800)
    ap.add_argument("--only", choices=("functions", "files"))
    ap.add_argument("--allow", help="functions not split yet (path name N)")
    args = ap.parse_args()
    files = tracked_files(args.root)
    if not files:
        print(f"error: no source files found under {args.root}",
              file=sys.stderr)
        return 2
    bad = []
    if args.only in (None, "functions"):
        found, (n, where) = check_functions(args.root, files,
                                            args.max_function_lines,
                                            read_allowed(args.allow))
        bad += found
        print(f"longest function: {where}: {n} lines "
              f"(limit {args.max_function_lines})")
    if args.only in (None, "files"):
        found, (n, where) = check_files(args.root, files, args.max_file_lines)
        bad += found
        print(f"longest file: {where}: {n} lines "
              f"(limit {args.max_file_lines})")
    for line in bad:
        print(line)
    if bad:
        print(f"{len(bad)} over the limit: split them into named steps or "
              f"files", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
