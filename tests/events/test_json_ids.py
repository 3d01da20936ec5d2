"""What the CLI prints as JSON carries ids as text: an execution id has 63 bits, past
JavaScript's safe integers (2^53), where a browser or `jq` rounds it to another execution."""

from __future__ import annotations

import json

from airflow_plugin.templating.ids import execution_id_for, ids_as_text


def test_ids_become_text_at_every_depth_and_nothing_else_changes():
    execution = execution_id_for("examples.hello_world", "manual__1")
    assert execution > 2**53  # the case that matters: JSON.parse would round it
    value = {
        "execution_id": execution,
        "parent_execution_id": 7,
        "steps": {"a": {"attempts": 2, "ok": True}},
        "events": [{"event_id": "e-1", "execution_id": execution, "seq": 3, "flag_id": True}],
    }
    printed = json.loads(json.dumps(ids_as_text(value)))
    assert printed["execution_id"] == str(execution)
    assert int(printed["execution_id"]) == execution  # exact, as text
    assert printed["parent_execution_id"] == "7"  # one type for the field, small or large
    assert printed["events"][0] == {
        "event_id": "e-1",
        "execution_id": str(execution),
        "seq": 3,
        "flag_id": True,  # a boolean is no id
    }
    assert printed["steps"] == {"a": {"attempts": 2, "ok": True}}
