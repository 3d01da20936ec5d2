"""Hostile cases, item 2 of issue 10: linear time on playbooks of tens of thousands of steps,\narcs, writers and names."""

from __future__ import annotations

from tests.hostile_support import (
    BEARER_SPACES,
    Case,
    assert_no_dag,
    branch_writer_chains,
    chain,
    classes_with_runs,
    ctx_chain,
    fan_out,
    http_step,
    joined_writers,
    one,
    playbook,
    postgres_chain,
    python_step,
    racing_writers,
    shapes_with_runs,
    typo_chain,
    typo_templates,
)

SCALE_CASES: list[Case] = [
    # -- 2. linear time ------------------------------------------------------------------------
    Case(
        "chain_10k_check",
        lambda: {"p.yaml": chain(10_000)},
        ["check", "p.yaml"],
        0,
        [r"^All checks passed"],
        seconds=60,
    ),
    Case(
        "chain_10k_compile",
        lambda: {"p.yaml": chain(10_000)},
        ["compile", "p.yaml", "-o", "out"],
        0,
        [r"^1 of 1 playbook"],
        seconds=90,
    ),
    # Every step writes a ctx variable the next one reads: reaching definitions once carried
    # every variable to every later step (10k steps: 30 s, 20k: about 2 minutes; now 3 and 6 s).
    Case(
        "ctx_write_chain_20k_compile",
        lambda: {"p.yaml": ctx_chain(20_000)},
        ["compile", "p.yaml", "-o", "out"],
        0,
        [r"^1 of 1 playbook"],
        seconds=60,
    ),
    # Thousands of postgres steps, each routed to by an arc: finding the args passed into a
    # step once scanned every arc of the playbook for each tool (10k steps: 70 s; now 1.5 s).
    Case(
        "postgres_steps_10k_check",
        lambda: {"p.yaml": postgres_chain(10_000)},
        ["check", "p.yaml"],
        0,
        # The chain is case-v2 by `case` alone, so D941 says once (not 9,999 times) that the
        # canonical engine would route none of these rules.
        [
            r"^p\.yaml:9:16: D941 \[info\] .*and 9998 more such rules",
            r"^Found 1 info in 1 playbook",
        ],
        seconds=30,
    ),
    Case(
        "fan_out_10k_compile",
        lambda: {"p.yaml": fan_out(10_000)},
        ["compile", "p.yaml", "-o", "out"],
        0,
        [r"^1 of 1 playbook"],
        seconds=90,
    ),
    Case(
        "racing_ctx_writers_5k",  # F404 compares writers pairwise: must stay near-linear
        lambda: {"p.yaml": racing_writers(5000)},
        ["check", "p.yaml", "--select", "F404"],
        0,
        [one("F404") + "`ctx.x` is written by steps 'b0' and 'b1'"],
        seconds=60,
    ),
    # Writers of one variable after a join are compared pair by pair: a chain of 3,000 such
    # writers (4.5 million pairs) stops at the budget with F405, in seconds, instead of minutes.
    Case(
        "joined_ctx_writers_3k",
        lambda: {"p.yaml": joined_writers(3000)},
        ["check", "p.yaml", "--select", "F404,F405"],
        0,
        [
            one("F405", "22:11") + "the search for parallel writes stopped at `ctx.x` after "
            "200,000 comparisons"
        ],
        seconds=30,
    ),
    # Writers in different branches of one fork race without a comparison: a chain of 20,000
    # writers in each of two branches (once 2 x 200 million comparisons).
    Case(
        "branch_ctx_writer_chains_20k",
        lambda: {"p.yaml": branch_writer_chains(20_000)},
        ["check", "p.yaml", "--select", "F404,F405"],
        0,
        [one("F404") + "`ctx.x` is written by steps 'a0' and 'b0'"],
        seconds=60,
    ),
    Case(
        "many_unknown_names",
        lambda: {
            "p.yaml": playbook(
                steps=http_step('"{{ [' + ", ".join(f"u{i}" for i in range(20_000)) + '] }}"')
            )
        },
        ["check", "p.yaml", "--select", "T302"],
        0,
        [one("T302", "8:17") + "unknown name 'u0'", one("T302") + "unknown name 'u19999'"],
        seconds=60,
    ),
    # One unknown name per step among thousands of step names: each did-you-mean once compared
    # with every name of similar length (5k arcs: over 300 s; 10k templates: 200 s).
    Case(
        "unknown_step_in_every_arc",
        lambda: {"p.yaml": typo_chain(5_000)},
        ["check", "p.yaml", "--select", "R201"],
        1,
        [
            one("R201", "8:15") + "step 'start' routes to unknown step 'step_numbr_1'; "
            "did you mean 'step_number_1'",
            # No step is close to the last one: a warning, the engine skips that arc.
            one("R201")
            + "step 'step_number_4999' routes to unknown step 'step_numbr_5000'; the engine "
            "skips this arc",
        ],
        seconds=30,
    ),
    Case(
        "unknown_name_in_every_step",
        lambda: {"p.yaml": typo_templates(10_000)},
        ["check", "p.yaml", "--select", "T302,T307"],
        0,
        [one("T302", "8:55") + "unknown name 'stp_0'", one("T302") + "unknown name 'stp_9999'"],
        seconds=30,
    ),
    Case(
        "many_templates_in_block",
        lambda: {"p.yaml": playbook(steps=python_step("{{ u }}\n" * 20_000))},
        ["check", "p.yaml", "--select", "T302"],
        0,
        [one("T302", "9:12"), one("T302", "20008:12")],
        seconds=60,
    ),
    Case(
        "spaces_in_expression",
        lambda: {
            "p.yaml": playbook('workload:\n  a: "{{ nothing_like_it' + " " * 200_000 + '}}"\n')
        },
        ["check", "p.yaml", "--select", "T"],
        0,
        [one("T302", "5:10")],
    ),
    Case(
        "unclosed_comments_in_code",
        lambda: {"p.yaml": playbook(steps=python_step("x = 1 {#" * 20_000))},
        ["check", "p.yaml"],
        1,
        [one("T301", "9:15") + ".*Missing end of comment tag"],
    ),
    Case(
        "unclosed_expressions_in_code",
        lambda: {"p.yaml": playbook(steps=python_step("x = {{" * 20_000))},
        ["check", "p.yaml"],
        1,
        [one("T301")],
    ),
    Case(
        "braces_run",
        lambda: {"p.yaml": playbook(steps=python_step("{" * 100_000))},
        ["check", "p.yaml"],
        1,
        [one("T301")],
    ),
    Case(
        "secret_pattern_runs",
        lambda: {
            "p.yaml": playbook(
                steps=python_step("password=" * 30_000 + "\n" + "a://" + "b" * 100_000 + "@")
            )
        },
        ["check", "p.yaml", "--select", "X"],
        1,
        [one("X601", "9:18")],
    ),
    *[
        Case(
            f"bearer_header_space_run_{command}",
            lambda: {"p.yaml": playbook(steps=BEARER_SPACES)},
            [command, "p.yaml", *(["-o", "out"] if command == "compile" else [])],
            1,
            [one("X601", "10:32") + "`Authorization` holds a literal secret"],
            after=(lambda d: assert_no_dag(d / "out")) if command == "compile" else None,
        )
        for command in ("check", "compile")
    ],
    Case(
        # Every credential shape the detector reads, with a 10,000-character run of spaces (and
        # one of tabs and newlines) where its pattern scans: each is read once, not once per
        # character of the run.
        "credential_shapes_whitespace_runs",
        lambda: {"p.yaml": playbook(steps=python_step(shapes_with_runs()))},
        ["check", "p.yaml", "--select", "X"],
        1,
        [one("X601")],
        seconds=30.0,
    ),
    *[
        Case(
            # Whitespace runs inside every credential-shaped YAML value of the classes above:
            # read in linear time, the literals still found, nothing compiled.
            f"credential_classes_whitespace_runs_{command}",
            lambda: {"p.yaml": classes_with_runs()},
            [command, "p.yaml", "--select", "X", *(["-o", "out"] if command == "compile" else [])],
            1,
            # the description's password after the runs, then one finding per class
            [one("X601", "5:20063"), one("X601", "11:100089"), one("X601", "26:24")],
            seconds=30.0,
            after=(lambda d: assert_no_dag(d / "out")) if command == "compile" else None,
        )
        for command in ("check", "compile")
    ],
    Case(
        "long_code_spaces",
        lambda: {
            "p.yaml": playbook(
                steps=python_step("x = 1" + " " * 200_000 + "\ny = (" + " " * 100_000)
            )
        },
        ["check", "p.yaml"],
        1,
        [one("C501", "10:13")],
    ),
]
