"""`python -m engine.cli`: the `thoughtmap` command."""

from engine.cli import main

raise SystemExit(main())
