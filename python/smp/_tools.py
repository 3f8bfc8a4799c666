"""Finding and running smp's built tools (smpc, smprun, smp-checkpoint).

The package drives the tools as subprocesses: every compiler and runtime
decision stays in C++, and the messages users see are the tools' own.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable, Iterable, List, Optional, Sequence


class SmpError(RuntimeError):
    """A tool of smp refused or failed; str(e) is its one-line message.

    Attributes: tool ("smpc", "smprun", ...), message (the error line(s)
    without the "tool: error:" prefix), command (the argv run), returncode,
    output (everything the tool printed).
    """

    def __init__(self, message: str, tool: str = "smp",
                 command: Optional[Sequence[str]] = None,
                 returncode: Optional[int] = None, output: str = ""):
        super().__init__(message)
        self.message = message
        self.tool = tool
        self.command = list(command or [])
        self.returncode = returncode
        self.output = output


def bin_dir() -> Optional[Path]:
    """$SMP_BIN_DIR, else the directory of smpc on the PATH, else the
    source tree's build/bin (when the package is used from a checkout)."""
    env = os.environ.get("SMP_BIN_DIR")
    if env:
        return Path(env)
    found = shutil.which("smpc")
    if found:
        return Path(found).resolve().parent
    here = Path(__file__).resolve().parent.parent.parent / "build" / "bin"
    if (here / "smpc").exists():
        return here
    return None


def tool(name: str) -> str:
    d = bin_dir()
    if d is None or not (d / name).exists():
        raise SmpError(
            f"cannot find {name}: build smp (bash scripts/build.sh) and set "
            f"SMP_BIN_DIR to its build/bin, or put {name} on the PATH",
            tool=name)
    return str(d / name)


def error_lines(tool_name: str, output: str) -> str:
    """The tool's "NAME: error: ..." lines without the prefix (the whole
    output's last line when there are none)."""
    lines = []
    for line in output.splitlines():
        if f"{tool_name}: error: " in line:
            lines.append(line.split(f"{tool_name}: error: ", 1)[1])
    if not lines:
        tail = [l for l in output.splitlines() if l.strip()]
        lines = tail[-1:] or [f"{tool_name} failed"]
    # A multi-rank failure repeats one message per rank: keep each once.
    seen = []
    for l in lines:
        if l not in seen:
            seen.append(l)
    return "\n".join(seen)


def run(name: str, args: Iterable[str], *,
        on_line: Optional[Callable[[str], None]] = None,
        env: Optional[dict] = None) -> str:
    """Runs tool `name` with `args`; returns its output (stdout and stderr
    together). A non-zero exit raises SmpError carrying the tool's message.
    With on_line, each line is passed on as it is printed (live progress)."""
    cmd = [tool(name)] + [str(a) for a in args]
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=full_env)
    out: List[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        out.append(line)
        if on_line:
            on_line(line.rstrip("\n"))
    rc = proc.wait()
    text = "".join(out)
    if rc != 0:
        raise SmpError(error_lines(name, text), tool=name, command=cmd,
                       returncode=rc, output=text)
    return text


def flag_args(options: dict) -> List[str]:
    """smpc flags from keyword options: batch_size=8 -> --batch-size 8,
    train=True -> --train (False: left out), dim={"seq": 16} -> --dim
    seq=16, tie=["a", "b"] -> --tie a --tie b."""
    args: List[str] = []
    for key, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            args.append(flag)
        elif isinstance(value, dict):
            for k, v in value.items():
                args += [flag, f"{k}={v}"]
        elif isinstance(value, (list, tuple)):
            for v in value:
                args += [flag, str(v)]
        else:
            args += [flag, str(value)]
    return args


def progress_printer(stream=None) -> Callable[[str], None]:
    stream = stream or sys.stdout

    def show(line: str) -> None:
        print(line, file=stream, flush=True)
    return show
