"""The daemon: socket server, method registry, state and workers."""
