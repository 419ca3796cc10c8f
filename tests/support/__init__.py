"""Helpers shared by the test folders (imported as ``support.<module>``; ``tests/`` is on the path)."""
