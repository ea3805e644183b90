"""The constrained agent loop shared by every background writer (extraction, MagicDocs, dream).

`policy` says what one agent may touch, `shell` parses the read-only shell, `tools` runs the
daemon's own tools on the real filesystem, `loop.run_agent` drives the model.
"""
