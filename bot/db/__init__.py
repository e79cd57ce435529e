"""Persistence: a delivery log (dedupe), a durable job queue and a plan-state cache.

GitHub is the source of truth for plans (STYLE §4); losing this database loses no plan.
"""
