"""memoryd_client's table of methods and params fields is the daemon's: `memctl call` reads it
(clients never import memoryd) to tell a typo from a daemon older than this memctl."""

from __future__ import annotations

from memoryd.daemon.wiring import rpc_methods
from memoryd_client.known_methods import PARAMS


def test_the_table_is_the_daemons_methods_and_fields() -> None:
    served = {name: frozenset(spec.params.model_fields) for name, spec in rpc_methods().items()}
    assert served == PARAMS
