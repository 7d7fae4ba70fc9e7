"""Writes the PTX of the first gpu.binary object of an MLIR file to stdout.

MLIR prints the object's assembly as a string whose quotes, backslashes
and control characters are \\XX hex escapes; lit tests run it with
kvq-ptx-run.
"""

import re
import sys

text = open(sys.argv[1]).read()
match = re.search(r'assembly = "((?:[^"\\]|\\.)*)"', text)
if not match:
    sys.exit("no gpu.binary assembly in " + sys.argv[1])
ptx = re.sub(r"\\([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)),
             match.group(1))
sys.stdout.write(ptx)
