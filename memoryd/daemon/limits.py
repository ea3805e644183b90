"""Every bound on what crosses the daemon's socket, in one place.

Sized for what a client needs: the largest request a client sends is an `after_turn`
transcript (a few MB for a long session; PROTOCOL.md promises lines of up to 64 MiB), the
largest reply a `get_context` or `memory.list` of a big project (a few MB). Anything beyond is
refused with a clear error rather than buffered.
"""

from __future__ import annotations

MiB = 1024 * 1024

# One request line (`memoryd --line-limit`); over it: -32600 and the connection is closed.
# The contract's default (PROTOCOL.md: "default 64 MiB, configurable").
DEFAULT_LINE_LIMIT = 64 * MiB
# Bytes of lines not yet parsed (unfinished, or whole and waiting for their connection's room
# or a parse thread) buffered across *all* connections at once; the connection whose
# input would go past it gets -32600 and is closed (so many clients each sending almost a
# line cannot grow the daemon without bound). Two lines' worth: one client at the line cap
# never shuts out the others, and input never holds more than this (a finished line is
# parsed, then dropped).
DEFAULT_INPUT_BUFFER_CAP = 2 * DEFAULT_LINE_LIMIT
# An unfinished line that gets no byte for this long closes its connection and gives its bytes
# back to the budget above (`DaemonConfig.stalled_line_s`) ...
STALLED_LINE_S = 10.0
# ... and when a connection's input would go past the budget, the connections whose
# unfinished line has had no byte for this long are closed first, to make room.
STALLED_UNDER_PRESSURE_S = 1.0
# One reply line (a batch's whole reply); a reply, or batch member, that does not fit is
# replaced by -32004 naming the method and the cap.
DEFAULT_REPLY_LIMIT = 16 * MiB
# A string id longer than this is -32600 answered with id null: a reply echoes its id whole,
# so a 20 MB id made every reply to it go over the reply cap.
MAX_ID_CHARS = 1_024
# What an error repeats of a request (a method name, unknown member or field names) is cut
# to this many characters.
MAX_ECHOED_CHARS = 200
# One field's message in a -32602 (which may quote what was sent: an unknown `role` of 20 MB
# made the reply a -32004): room for a whole path (4,096 bytes) and its words.
MAX_FIELD_MESSAGE_CHARS = 5_000
# Calls in one batch; more: -32600.
MAX_BATCH = 1_000
# Notifications queued for a client that is not reading, before its connection is closed:
# beyond what its replies may hold (the drain threshold below plus one reply).
NOTIFY_BUFFER_CAP = 16 * MiB
# Bytes queued for a client before a reply waits for it to read some (a notification never
# waits), and before the daemon reads no more of that client's requests until it does.
WRITE_DRAIN_THRESHOLD = 1 * MiB
# Requests of one connection running at once, each member of a batch counted; past it the
# daemon reads no more of that connection until some finish (a client that never reads its
# replies cannot make the daemon start, and buffer, a reply for every request it sends). A
# batch larger than this runs alone, this many of its members at a time.
MAX_INFLIGHT_PER_CONNECTION = 128
# How much one read takes from a connection.
READ_CHUNK = 256 * 1024
# A line whose stdlib reading (half a surrogate pair, an id beyond 64 bits) is longer goes to a
# thread: that reading is partly Python code, which lets the event loop in between (orjson's
# parse holds the GIL throughout, so it stays on the loop).
PARSE_INLINE_BYTES = 1 * MiB
# After refusing input, how long the rest of it is read and dropped before the connection
# closes (so the client gets the error instead of a reset).
LINGER_S = 2.0
# At shutdown, how long a connection's queued replies may take to go out when the drain cap
# (30 s, `DaemonConfig.drain_timeout_s`) is already spent; then a client that does not read
# is aborted.
CLOSE_GRACE_S = 1.0
# A client handed over once the stop began: how long its requests are read (and answered
# -32006) before it is closed. It sends them as it connects; one that sends nothing (an
# editor's idle reconnect) held the exit for the whole drain cap.
LATE_CLIENT_WINDOW_S = 5.0
