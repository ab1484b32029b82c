"""Pure view data: plain data in, rows and coordinates out (timeline, compare, graph, waterfall)."""
