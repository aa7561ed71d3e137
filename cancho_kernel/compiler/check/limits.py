"""The compiler's documented limits on what generic code may build (docs/decisions.md).

Monomorphisation makes one copy of a generic function per distinct list of type arguments and
one layout per instantiated type, so a program decides how much work the compiler does. These
limits make that work bounded: a type argument, or a member of an instantiated type, larger than
MAX_TYPE_NODES parts, or a program needing more than MAX_INSTANCES instantiations, is refused
(`infinite-type`, at the call or declaration that asks for it) instead of hanging the compiler.

Sizes are counted as trees (`(T, T)` nested 20 times is 2^21 parts even though the checker
shares the halves), because that is what codegen would have to lay out.
"""

from __future__ import annotations

from .types import Type, children

MAX_TYPE_NODES = 4096
MAX_INSTANCES = 10_000


def tree_size(t: Type, cap: int = MAX_TYPE_NODES) -> int:
    """The number of parts of t counted as a tree, or `cap + 1` as soon as it exceeds cap.

    An explicit stack with an early stop: the cost is at most `cap` steps however large (or
    deeply shared) the type is.
    """
    count = 0
    stack = [t]
    while stack:
        x = stack.pop()
        count += 1
        if count > cap:
            return cap + 1
        stack.extend(children(x))
    return count
