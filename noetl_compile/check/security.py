"""Rule family: security (being written)."""

from .context import CheckContext


def check(ctx: CheckContext) -> None:
    return None
