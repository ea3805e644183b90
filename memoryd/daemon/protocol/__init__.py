"""NDJSON JSON-RPC 2.0 over a stream, one module per job.

- `framing`: one message (request, notification or batch) per `\\n`-terminated line, parsed
  and encoded with orjson;
- `envelope`: the JSON-RPC error codes, error objects, and the check that a message is a
  request, with messages that name the field;
- `dispatch`: a request to its method — params validated by the method's pydantic model,
  errors mapped to codes (the one place domain errors become JSON-RPC errors), batches;
- `connection`: one client connection — a task per line, so replies may come out of order
  and are matched by `id`; notifications that never wait on the client.

The caps (line, batch, buffered notifications) are in `memoryd/daemon/limits.py`.
"""
