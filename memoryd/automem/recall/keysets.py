"""`KeySets`: keys to sets of values, for the indexes of a memory dir, where most keys have few.

A set per key (216 bytes, and an object the garbage collector walks on every full collection)
made most of a 20,000-memory directory's half a million tracked objects: each adjacent word
pair, dedupe token, name and file stem had its own set, nearly always of one to a few memories.
Here a key's only value is kept as itself, a few in a tuple (which the collector stops walking
once it has seen it hold only strings), and a set is made past FEW.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V", bound=Hashable)

FEW = 8  # values kept in a tuple; a tuple is copied on each change, so it stays short


class KeySets(Generic[K, V]):
    __slots__ = ("_few", "_many", "_one")

    def __init__(self) -> None:
        self._one: dict[K, V] = {}  # keys with one value
        self._few: dict[K, tuple[V, ...]] = {}  # with 2 to FEW
        self._many: dict[K, set[V]] = {}  # with more

    def add(self, key: K, value: V) -> None:
        if key in self._one:
            one = self._one[key]
            if one != value:
                del self._one[key]
                self._few[key] = (one, value)
            return
        few = self._few.get(key)
        if few is not None:
            if value in few:
                return
            if len(few) < FEW:
                self._few[key] = (*few, value)
            else:
                del self._few[key]
                self._many[key] = {*few, value}
            return
        many = self._many.get(key)
        if many is not None:
            many.add(value)
        else:
            self._one[key] = value

    def discard(self, key: K, value: V) -> None:
        """Take `value` off `key`'s set; a key left with none is gone."""
        if key in self._one:
            if self._one[key] == value:
                del self._one[key]
            return
        few = self._few.get(key)
        if few is not None:
            if value in few:
                rest = tuple(v for v in few if v != value)
                if len(rest) == 1:
                    del self._few[key]
                    self._one[key] = rest[0]
                else:
                    self._few[key] = rest
            return
        many = self._many.get(key)
        if many is not None:
            many.discard(value)
            if len(many) <= FEW:
                del self._many[key]
                self._few[key] = tuple(many)

    def get(self, key: K) -> Collection[V]:
        """`key`'s values (empty for an unknown key). The collection may be the index's own:
        read it, do not change it."""
        if key in self._one:
            return (self._one[key],)
        few = self._few.get(key)
        if few is not None:
            return few
        return self._many.get(key, ())

    def __contains__(self, key: object) -> bool:
        return key in self._one or key in self._few or key in self._many

    def __len__(self) -> int:
        return len(self._one) + len(self._few) + len(self._many)
