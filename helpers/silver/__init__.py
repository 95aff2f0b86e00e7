"""silver."""
