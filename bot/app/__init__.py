"""The App's front door: the ASGI server, and the wiring that combines every handler."""
