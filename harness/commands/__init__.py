"""Layer 4, the commands: `chaos` itself (cli) and one module per command (report, serve,
cluster, client-check, reproduce, explore, matrix, compare). Nothing below imports this."""
