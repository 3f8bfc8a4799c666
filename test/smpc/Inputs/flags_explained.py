#!/usr/bin/env python3
"""Checks that every flag a tool's source accepts is explained in its help:
each "--flag" string literal of the SOURCE files must start an option line
of HELP (a line indented, then the flag, as in "  --steps N  Train ...", or
one of several flags listed together, "  --beta1 X --beta2 X --eps X").

    flags_explained.py HELP SOURCE... [--not FLAG]...

--not FLAG: a literal of the source that is not one of the tool's flags
(another tool's, quoted in a message).

Prints each unexplained flag, then how many flags were checked.
"""
import re
import sys


def main():
    help_text = open(sys.argv[1]).read()
    explained = set()
    for line in help_text.splitlines():
        if re.match(r"^ +-", line):
            # The flags before the explanation (two spaces or more).
            head = re.split(r"(?<=\S)  +", line.strip(), maxsplit=1)[0]
            explained.update(re.findall(r"(?<![\w-])(--?[a-z0-9][a-z0-9-]*)", head))
    args = sys.argv[2:]
    ignored = {args[i + 1] for i, a in enumerate(args) if a == "--not"}
    sources = [a for i, a in enumerate(args)
               if a != "--not" and (i == 0 or args[i - 1] != "--not")]
    flags = set()
    for path in sources:
        flags.update(re.findall(r'"(--[a-z0-9][a-z0-9-]*)', open(path).read()))
    flags -= ignored
    missing = sorted(flags - explained)
    for f in missing:
        print("unexplained:", f)
    print(f"{len(flags)} flags, {len(flags) - len(missing)} explained")


if __name__ == "__main__":
    main()
