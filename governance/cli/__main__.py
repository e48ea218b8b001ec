"""``python -m governance.cli``: the ``lakegate`` command line."""

from governance.cli import main

raise SystemExit(main())
