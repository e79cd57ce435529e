"""The operator's status page: `/status`, a plan's page and `/status.json`.

`plans` and `operations` are pure functions from database rows (and the process's own
metrics) to view models; `reads` does the database reads; `access` decides who may look;
`http` holds the routes. Rendering a page makes no GitHub or LLM request.
"""
