"""``python -m broker.healthcheck``: the command name earlier releases documented; the code is broker.ops.healthcheck."""

import sys

from broker.ops.healthcheck import main

if __name__ == "__main__":
    sys.exit(main())
