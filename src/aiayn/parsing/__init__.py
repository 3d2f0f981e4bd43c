"""Table 4: constituency parsing as translation (words -> linearized tree)."""
