"""Event and job handlers, one module per concern: planning → approval → commands →
execution → review. Each owns a `Router` (events) or `JobKinds` (jobs); `bot.app.wiring`
combines them."""
