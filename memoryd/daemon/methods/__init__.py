"""The RPC methods, one module per area; each lists its methods in `METHODS`.

`daemon/wiring.py` (`rpc_methods`) puts every module's `METHODS` into the daemon's table: a
new module is added there.
"""
