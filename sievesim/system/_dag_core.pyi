from typing import Any, Iterable, Sequence

def execute_core(durations: list[float], resources: list[tuple[str, ...]], deps: list[tuple[int, ...]],
                 priority: list[float], contention: tuple[Any, ...]
                 ) -> tuple[list[float], list[float], dict[str, float]] | None: ...

def graph_add(self: Any, name: str, duration: float, resources: Sequence[str] = (), deps: Iterable[int] = (),
              *, priority: float | None = None, **meta: Any) -> int: ...
