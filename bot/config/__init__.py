"""Repository configuration: `.github/plan-cascade.yml`, its shape, globs, and its cache."""
