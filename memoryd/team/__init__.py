"""Layer 4: team memory: sync client, secret scanner, and the wire protocol the server shares.

The server itself is the top-level package `memoryd_team`; this package never imports it.
"""
