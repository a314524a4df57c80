"""Lock clients (one module per design), the fenced resource they protect, and the workload."""
