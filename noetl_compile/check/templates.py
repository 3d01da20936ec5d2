"""Rule family: templates (being written)."""

from .context import CheckContext


def check(ctx: CheckContext) -> None:
    return None
