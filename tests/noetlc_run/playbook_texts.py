"""Playbook texts more than one `noetlc run` test module writes."""

DIVIDE = """\
    apiVersion: noetl.io/v2
    kind: Playbook
    metadata:
      name: divide
      path: tests/divide
    workload:
      divisor: 0
      label: none
    workflow:
      - step: start
        tool:
          kind: python
          code: |
            result = {"ok": True}
        next:
          arcs:
            - step: boom
      - step: boom
        tool:
          kind: python
          input:
            divisor: "{{ divisor }}"
            label: "{{ label }}"
          code: |
            result = {"value": 1 / divisor, "label": label}
        next:
          arcs:
            - step: after
      - step: after
        tool:
          kind: python
          code: |
            result = {"after": True}
    """
