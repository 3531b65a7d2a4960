"""``python -m broker.inspect``: see ``broker.inspect.cli``."""

import os
import sys

from broker.inspect.cli import main

try:
    code = main()
    sys.stdout.flush()
except BrokenPipeError:  # the reader stopped (``| head``): no traceback, as a pipe's writer
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    code = 1
raise SystemExit(code)
