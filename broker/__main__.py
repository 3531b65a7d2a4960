"""``python -m broker``: the broker process (``broker.ops.cli``)."""

import sys

from broker.ops.cli import main

sys.exit(main())
