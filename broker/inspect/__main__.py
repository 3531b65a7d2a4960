"""``python -m broker.inspect``: see ``broker.inspect.cli``."""

from broker.inspect.cli import main

raise SystemExit(main())
