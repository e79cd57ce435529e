"""Running an approved plan: batches in dependency order, stories in parallel worktrees,
agents, gates with retries, then publishing. One engine for the server, the Action and
local mode; what differs (where state is saved, where checks and PRs go) sits behind the
small ports in `ports.py`."""
