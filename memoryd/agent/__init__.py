"""The constrained agent loop shared by every background writer (extraction, MagicDocs, dream).

`policy` says what one agent may touch, `seen` what it read (a write needs a fresh read),
`shell` parses the read-only shell, `tools` runs the daemon's own tools on the real
filesystem, `loop.run_agent` drives the model, `transcript` shows it the conversation.
"""
