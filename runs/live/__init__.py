"""The live path: publishing committed changes, rendering fragments, websocket consumers, metrics."""
