import sys

from broker.ops.cli import main

sys.exit(main())
