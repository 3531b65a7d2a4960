"""``python -m pipelines ...``: run the streaming job (see pipelines/job.py)."""

from pipelines.job import main

raise SystemExit(main())
