"""Layer 1, data and contracts: the history and its op format, errors, options, the TestSpec,
the facts a run records, the fault kinds nemeses declare, the plug-in registry (it loads
plug-ins by name, never by import) and the helpers that read and write exactly these files.
Everything here imports only the standard library and this package."""
