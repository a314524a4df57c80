"""Where things are in the tree, for tests at any depth: the repository root and tests/."""

from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
