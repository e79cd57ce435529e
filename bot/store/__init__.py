"""Where plans live (the plan comment and its cache), whether a plan comment can be
believed, and who may act on it."""
