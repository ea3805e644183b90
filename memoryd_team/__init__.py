"""The team server `memoryd-team`: HTTP API (app), auth, ETags, validation, and its CLI."""
