"""Publishing: merged batch branches, and where they go (pull requests, local branches)."""
