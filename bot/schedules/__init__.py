"""Scheduled plans: a repository's `schedules:` kept in the database, and each due run opening an
issue and planning it through the handlers, never approving it."""
