"""Types every layer shares, and the `Host` they run in.

Layers (`rules/`, `automem/`, `session/`, `team/`, `agent/`, `magicdocs`) import this package,
never `memoryd.daemon`; the daemon implements `Host` and wires the layers together.
"""
