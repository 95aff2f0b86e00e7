"""Test support code shared by the test tiers (importable as ``support``: ``tests/`` is on ``sys.path``)."""
