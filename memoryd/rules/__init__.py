"""Layer 1: instruction files (CLAUDE.md and friends), `@include`s, conditional rules.

Pure domain (no event loop, no clock, filesystem only through `fsview.FileSystem`):
`model`, `fsview`, `markdown`, `frontmatter`, `globs`, `includes`, `loader`, `assembly`.
Edges: `realfs` (the real filesystem, recording what was probed), `approvals` (the user's
external-include approvals), `watcher` (fswatch: inotify on Linux, watchfiles elsewhere),
`service` (the daemon's cache), `providers` (the hook through which auto memory adds its index
entries).
"""
