"""Checkers: pure functions from a history to a CheckResult (True, False or "unknown")."""

from harness.core.contracts.checker import CheckResult, Checker, merge_valid, safe_check

__all__ = ["CheckResult", "Checker", "merge_valid", "safe_check"]
