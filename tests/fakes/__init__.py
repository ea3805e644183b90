"""Real servers that tests talk to in place of outside services."""
