"""What a template sees, and how it is rendered: ``proxy`` (step results as templates address
them), ``render`` (sandboxed Jinja, coercion, conditions), ``context`` (the render context of a
step), ``ids`` (execution ids, which the context and the event log share).

Below the tools and the runtime: every tool renders with it, and it reveals secret references
through ``hooks.secrets`` (the one floor it stands on).
"""
