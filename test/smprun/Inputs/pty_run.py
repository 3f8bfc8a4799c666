#!/usr/bin/env python3
"""Runs a command with a pseudo-terminal as its stdout and stderr (as a user
at a terminal would) and prints what it wrote, carriage returns shown as
<CR> and escape bytes as <ESC>, then "exit status N".

    pty_run.py CMD...
"""
import os
import pty
import sys

pid, fd = pty.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
chunks = []
while True:
    try:
        data = os.read(fd, 65536)
    except OSError:  # EIO once the child has exited
        break
    if not data:
        break
    chunks.append(data)
_, status = os.waitpid(pid, 0)
text = b"".join(chunks).decode("utf-8", "replace")
# The terminal turns "\n" into "\r\n": undo that before showing the rest.
text = text.replace("\r\n", "\n").replace("\r", "<CR>").replace("\x1b", "<ESC>")
sys.stdout.write(text)
print(f"exit status {os.waitstatus_to_exitcode(status)}")
