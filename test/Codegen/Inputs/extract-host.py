"""Writes the body of one host module of an MLIR file as a module of its own.

kvq-host-to-llvm lowers each cache's host module (`module @<cache>_host`)
in place inside the top module, beside the `kvq.cache` ops; upstream's
mlir-runner runs a top-level module of the LLVM dialect. Usage:
extract-host.py FILE NAME.
"""

import sys

lines = open(sys.argv[1]).read().split("\n")
header = "module @" + sys.argv[2] + " "
starts = [i for i, line in enumerate(lines) if line.strip().startswith(header)]
if not starts:
    sys.exit("no module @" + sys.argv[2] + " in " + sys.argv[1])
start = starts[0]
indent = lines[start][: len(lines[start]) - len(lines[start].lstrip())]
end = next(i for i in range(start + 1, len(lines)) if lines[i] == indent + "}")
sys.stdout.write("module {\n" + "\n".join(lines[start + 1 : end]) + "\n}\n")
