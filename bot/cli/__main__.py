"""`python -m bot.cli`: the same commands as the `plan-cascade` script."""

from bot.cli import main

raise SystemExit(main())
