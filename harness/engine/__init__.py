"""Layer 3, orchestration: the runner (one run from spec to results), the worker pool and its
fork server, the seeded generator and the analysis (history in, results out). It knows the
contracts and the plug-in families by name; the commands above call it."""
