"""What leaves the machine, and the rules for it: the egress proxy that setup, CLI agents and
local MCP servers go out through (its rules, the route into the sandbox, the log of what it
refused), and the secret scan of what a push would carry.

The rules are pure (the system resolver aside); the proxy is the bot's own asyncio server.
Neither knows git or the sandbox: `bot.workspace.outgoing` reads a push's lines for the scan,
`bot.sandbox` mounts the route.
"""
