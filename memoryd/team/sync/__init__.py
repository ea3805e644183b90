"""The team memory sync client: state, HTTP client, pull/push engine, watcher.

state.py    SyncState: what one team folder knows about its server (persisted per repo)
delta.py    pure decisions: what a pull writes, what a push sends
localfs.py  the team folder on disk: scanning with a stat cache, safe key paths, conflicts
client.py   httpx client for the server's endpoint; HTTP outcomes mapped to exceptions
engine.py   pull and push for one folder ↔ one repository
watcher.py  the watch of team/ (fswatch), the debounce, retry backoff, clean shutdown
"""
