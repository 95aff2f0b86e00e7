"""bronze."""
