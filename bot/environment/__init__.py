"""A worktree's environment, pure: what a project declares, and the setup commands."""
