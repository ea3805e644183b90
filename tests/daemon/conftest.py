"""A test-only method to prove concurrency: `test.sleep {seconds}` answers after a delay."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import Field

from memoryd.daemon.registry import REGISTRY, Params, rpc_method


class SleepParams(Params):
    seconds: float = Field(ge=0, le=30)


if "test.sleep" not in REGISTRY:

    @rpc_method("test.sleep", SleepParams)
    async def _sleep(_daemon: Any, params: SleepParams) -> dict[str, float]:
        await asyncio.sleep(params.seconds)
        return {"slept": params.seconds}


if "test.boom" not in REGISTRY:

    @rpc_method("test.boom", SleepParams)
    async def _boom(_daemon: Any, params: SleepParams) -> dict[str, float]:
        raise RuntimeError(f"exploded after {params.seconds}")
