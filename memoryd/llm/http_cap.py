"""A bound on how much of the model endpoint's reply is read: it is another machine, and a
reply that never ends would otherwise grow the daemon until the OOM killer came. The SDK reads
whole replies, so the bound sits in its HTTP transport. Imported at the first model call."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2 as httpx  # the HTTP package the anthropic SDK is built on (a fork of httpx)


class ReplyTooLarge(httpx.ReadError):
    """The reply's body went past the cap; what came is dropped."""


class _CappedStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, cap: int) -> None:
        self._inner = inner
        self._cap = cap

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        async for chunk in self._inner:
            size += len(chunk)
            if size > self._cap:
                raise ReplyTooLarge(f"the reply is over {self._cap:,} bytes; not read further")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class CappedTransport(httpx.AsyncBaseTransport):
    """`inner`, with each reply's body cut at `cap` bytes. Replies are asked for uncompressed,
    so the bytes counted are the bytes decoded (a compressed reply could be a thousand times
    larger once httpx decoded it); one compressed anyway is refused."""

    def __init__(self, inner: httpx.AsyncBaseTransport, cap: int) -> None:
        self._inner = inner
        self._cap = cap

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        request.headers["Accept-Encoding"] = "identity"
        response = await self._inner.handle_async_request(request)
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            await response.aclose()
            raise ReplyTooLarge(f"the reply is compressed ({encoding}), which was not asked for")
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _CappedStream(response.stream, self._cap)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()
