"""memctl: the command-line client of memoryd. Standard library only, so it starts fast."""
