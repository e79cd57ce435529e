"""The event path handlers plug into: webhook intake, the routing table, the job worker,
the Services every handler receives, and the settings they are built from."""
