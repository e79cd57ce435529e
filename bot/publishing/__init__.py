"""Publishing: the engine's ports on GitHub. They receive what the engine decided (a saved state, a
finished gate, a merged batch) and show it there: the plan comment, check runs, pull requests."""
