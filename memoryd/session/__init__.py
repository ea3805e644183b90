"""Layer 3: the per-session rolling summary and `compact`.

Pure domain: `template`, `thresholds`, `compaction`, `prompts`, `transcript` (RPC-boundary
checks). Edges: `state` (the persisted per-session record). The daemon service that ties them
to `after_turn`, the agent loop and `compact` is `service.SessionMemory`.
"""
