"""MCP: the repositories' servers, started for one agent run (local ones confined, remote ones
checked), their allowed tools offered to agents and the planner, relayed to CLI agents.

The config models stay with the others in `bot.config` (`agent.mcp_servers`: `bot.config.mcp`;
the operator's `PLAN_CASCADE_MCP_*`: `bot.config.mcp_policy`).
"""
