"""airflow_plugin/compat.py holds every difference between the supported Airflow versions: no other
module of the runtime falls back from one Airflow import to another, or asks which Airflow it
runs on. And what compat answers matches the Airflow installed (this file runs in each version's
virtualenv of scripts/smoke-airflow.sh as well)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COMPAT = ROOT / "airflow_plugin" / "compat.py"

# Handlers that catch a missing name or module. A ``try`` whose body is only imports is a probe
# whatever it catches; one around work that also imports (an event-log write, a config read) is
# a probe when it catches these by name.
_MISSING = {"ImportError", "ModuleNotFoundError", "AttributeError"}


def _airflow_import(node: ast.AST) -> bool:
    if isinstance(node, ast.Import):
        return any(a.name == "airflow" or a.name.startswith("airflow.") for a in node.names)
    if isinstance(node, ast.ImportFrom):
        module = node.module or ""
        return node.level == 0 and (module == "airflow" or module.startswith("airflow."))
    return False


def _caught(handler: ast.ExceptHandler) -> set[str]:
    if handler.type is None:
        return {"BaseException"}
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return {t.id if isinstance(t, ast.Name) else getattr(t, "attr", "") for t in types}


def _reraises(handler: ast.ExceptHandler) -> bool:
    return bool(handler.body) and isinstance(handler.body[-1], ast.Raise)


def probes(source: str) -> list[tuple[int, str]]:
    """(line, what) for each Airflow version probe in ``source``: a ``try`` around an Airflow
    import whose handler swallows the failure instead of raising; ``hasattr`` on a name imported
    from Airflow; a reference to Airflow's version (``__version__``, ``AIRFLOW_V_*``)."""
    tree = ast.parse(source)
    found: list[tuple[int, str]] = []
    from_airflow: set[str] = set()
    for node in ast.walk(tree):
        if _airflow_import(node):
            from_airflow |= {(a.asname or a.name).split(".")[0] for a in node.names}
    for node in ast.walk(tree):
        if isinstance(node, ast.Try):
            imports = any(_airflow_import(n) for stmt in node.body for n in ast.walk(stmt))
            only_imports = all(isinstance(s, ast.Import | ast.ImportFrom) for s in node.body)
            for handler in node.handlers:
                swallows = only_imports or _caught(handler) & _MISSING
                if imports and swallows and not _reraises(handler):
                    found.append((handler.lineno, "falls back when an Airflow import fails"))
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "hasattr":
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Name) and first.id in from_airflow:
                found.append((node.lineno, f"hasattr on Airflow's {first.id}"))
        elif isinstance(node, ast.Name | ast.Attribute):
            name = node.id if isinstance(node, ast.Name) else node.attr
            if name == "__version__" or name.startswith("AIRFLOW_V_"):
                found.append((node.lineno, f"reads Airflow's version ({name})"))
        elif isinstance(node, ast.alias) and (
            node.name == "__version__" or node.name.startswith("AIRFLOW_V_")
        ):
            found.append((0, f"imports Airflow's version ({node.name})"))
    return sorted(found)


def test_version_probes_live_only_in_compat() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {what}"
        for path in sorted((ROOT / "airflow_plugin").rglob("*.py"))
        if path != COMPAT
        for line, what in probes(path.read_text(encoding="utf-8"))
    ]
    assert offenders == [], "move these into airflow_plugin/compat.py:\n" + "\n".join(offenders)
    # compat itself is where they are: the detector sees them there.
    assert probes(COMPAT.read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (
            "try:\n    from airflow.sdk import conf\nexcept ImportError:\n"
            "    from airflow.configuration import conf\n",
            [(3, "falls back when an Airflow import fails")],
        ),
        (
            "from airflow.utils.state import TaskInstanceState as S\n"
            "x = hasattr(S, 'AWAITING_INPUT')\n",
            [(2, "hasattr on Airflow's S")],
        ),
        (
            "from airflow import __version__\n",
            [(0, "imports Airflow's version (__version__)")],
        ),
        (
            "import airflow\nold = airflow.__version__ < '3.2'\n",
            [(2, "reads Airflow's version (__version__)")],
        ),
        # A guard that turns a missing Airflow into the runtime's own error is no fallback.
        (
            "try:\n    from airflow.sdk import Connection\nexcept ImportError as exc:\n"
            "    raise LookupError('no Airflow') from exc\n",
            [],
        ),
        (
            "try:\n    from airflow.sdk.log import redact\nexcept Exception:\n    redact = None\n",
            [(3, "falls back when an Airflow import fails")],
        ),
        # Work that fails for any reason, an import among it, is a failure path, not a probe.
        (
            "try:\n    from airflow.configuration import conf\n    f = conf.get('core', 'x')\n"
            "except Exception:\n    f = 'dags'\n",
            [],
        ),
        ("from airflow.sdk import conf\nx = getattr(conf, 'get')\n", []),
    ],
)
def test_probe_detector(source: str, expected: list[tuple[int, str]]) -> None:
    assert probes(source) == expected


def test_compat_answers_for_the_installed_airflow() -> None:
    pytest.importorskip("airflow")
    import airflow

    from airflow_plugin import compat

    major, minor = (int(p) for p in airflow.__version__.split(".")[:2])
    assert compat.airflow_version() == (major, minor)
    # Every moved name resolves on this version, to the class Airflow itself raises.
    for name in compat._MOVED:
        assert getattr(compat, name) is not None, name
    assert issubclass(compat.AirflowFailException, compat.AirflowException)
    assert compat.conf.getint("core", "max_map_length") > 0
    assert compat.timezone.utcnow().tzinfo is not None
    assert (compat.awaiting_input_state() is not None) == ((major, minor) >= (3, 3))
    assert compat.paused_check_builtin() == ((major, minor) >= (3, 2))
    assert compat.hitl_gates() == ((major, minor) >= (3, 1))
    approve, entry = compat.hitl_operators()
    if compat.hitl_gates():
        assert approve.__name__ == "HITLOperator" and entry.__name__ == "HITLEntryOperator"
    else:
        with pytest.raises(RuntimeError, match=f"this is Airflow {airflow.__version__}"):
            approve(task_id="gate")
    assert compat.masker_redact() is not None
    assert compat.in_process_comms() is not None


def test_postgres_driver_is_one_the_installed_sqlalchemy_loads() -> None:
    # The stack's metadata DB, Celery's result backend and the event log name this driver:
    # psycopg 3's dialect on SQLAlchemy 2, psycopg2 on Airflow 3.0's SQLAlchemy 1.4.
    import sqlalchemy as sa

    from airflow_plugin import compat
    from airflow_plugin.events.store import normalise_url

    driver = compat.postgres_driver()
    expected = "psycopg" if int(sa.__version__.split(".")[0]) >= 2 else "psycopg2"
    assert driver == f"postgresql+{expected}"
    engine = sa.create_engine(f"{driver}://nobody@127.0.0.1:1/none")  # loads the DBAPI module
    assert engine.dialect.driver == expected
    assert normalise_url("postgresql://u@h/db") == f"{driver}://u@h/db"
    assert normalise_url("host=h dbname=db user=u").startswith(f"{driver}://u@h")


def test_unknown_name_is_an_attribute_error() -> None:
    from airflow_plugin import compat

    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        compat.Nope  # noqa: B018


def test_a_gate_request_asks_only_for_its_own_answer() -> None:
    # The bundled gates DAG has a DAG-level param (amount). Its approval asks for a choice and its
    # input gate for the form's own fields, on every Airflow: on 3.1 HITLOperator kept the DAG's
    # params in its request, and `noetlc signal --approve` was refused as an input gate's answer.
    pytest.importorskip("airflow")
    import importlib.util

    from airflow_plugin import compat

    if not compat.hitl_gates():
        pytest.skip(f"Airflow {compat.version_text()} has no HITL gates")
    spec = importlib.util.spec_from_file_location("noetlc_gates_dag", ROOT / "dags" / "gates.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    approve, start = module.dag.get_task("approve"), module.dag.get_task("start")
    assert approve.serialized_params == {}
    assert set(start.serialized_params) - {"amount"} == {"discount"}
