"""Checkers: pure functions from a history to a CheckResult (True, False or "unknown")."""

from harness.checker.base import CheckResult, Checker, merge_valid, safe_check

__all__ = ["CheckResult", "Checker", "merge_valid", "safe_check"]
