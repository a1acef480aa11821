"""Runs a command and fails unless it exits with the expected code.

    exit-code.py CODE COMMAND [ARGS...]

Passes the command's output through, so FileCheck can read its diagnostics.
A crash (a signal) never counts as the expected code.
"""

import subprocess
import sys

expected = int(sys.argv[1])
result = subprocess.run(sys.argv[2:])
if result.returncode != expected:
    print(f"exit code {result.returncode}, expected {expected}",
          file=sys.stderr)
    sys.exit(1)
