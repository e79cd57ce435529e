"""Event and job handlers, one module per concern: planning → approval → commands →
execution → review. Each owns a `Router` (events) or `JobKinds` (jobs); `bot.wiring`
combines them."""
