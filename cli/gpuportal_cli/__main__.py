"""``python -m gpuportal_cli``: the same as the ``gpuportal`` console script."""

from .main import main

raise SystemExit(main())
