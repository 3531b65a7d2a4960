"""``python -m broker.admin_cli``: the command name earlier releases documented; the code is broker.ops.admin_cli."""

import sys

from broker.ops.admin_cli import main

if __name__ == "__main__":
    sys.exit(main())
