"""chaoslock: a Jepsen-style chaos harness for distributed locks on real servers."""

__version__ = "0.1.0"
