"""Hostile cases, items 4, 6 and 7 of issue 10: secrets never printed, file system and output\nsafety, output that cannot be forged."""

from __future__ import annotations

from tests.hostile_support import (
    SECRET,
    Case,
    assert_no_dag,
    assert_only,
    assert_text,
    deep_tree,
    fifo,
    one,
    playbook,
    symlink_to,
    two_sources,
)

OUTPUT_CASES: list[Case] = [
    # -- 4. secrets never printed --------------------------------------------------------------
    *[
        Case(
            f"secret_masked_{fmt}",
            lambda: {
                "p.yaml": playbook(
                    f'workload:\n  password: {SECRET}\n  dsn: "postgresql://u:{SECRET}@h/x"\n'
                )
            },
            ["check", "p.yaml", "--format", fmt],
            1,
            [r"X601"],
            absent=[SECRET, "Zq9"],
            one_line=fmt == "concise",
        )
        for fmt in ("concise", "full", "json", "github", "sarif")
    ],
    Case(
        "secret_not_compiled",
        lambda: {"p.yaml": playbook(f"workload:\n  api_key: {SECRET}\n")},
        ["compile", "p.yaml", "-o", "out"],
        1,
        [one("X601", "5:12")],
        absent=[SECRET],
        after=lambda d: assert_no_dag(d / "out"),
    ),
    # -- 6. file system and output safety ------------------------------------------------------
    Case(
        "fifo_in_folder",
        lambda: {"ok.yaml": playbook(), "pipe.yaml": fifo},
        ["check", "."],
        0,
        [one("E003", "1:1", "./pipe.yaml") + "skipped: a FIFO", r"in 1 playbook"],
    ),
    Case(
        "fifo_given",
        lambda: {"pipe.yaml": fifo},
        ["check", "pipe.yaml"],
        0,
        [one("E003", "1:1", "pipe.yaml") + "skipped: a FIFO"],
    ),
    Case(
        "symlink_to_device",
        lambda: {"ok.yaml": playbook(), "zero.yaml": symlink_to("/dev/zero")},
        ["check", "."],
        0,
        [one("E003", "1:1", "./zero.yaml") + "skipped: a device file"],
    ),
    # /proc files pass for empty regular files: /proc/kmsg blocked check for ever, and
    # /proc/self/environ would have been read (and quoted by --format full) with its secrets.
    Case(
        "symlink_to_proc_files",
        lambda: {
            "ok.yaml": playbook(),
            "kmsg.yaml": symlink_to("/proc/kmsg"),
            "env.yaml": symlink_to("/proc/self/environ"),
        },
        ["check", ".", "--format", "full"],
        0,
        [
            r"^\./kmsg\.yaml:1:1: E003 \[info\] skipped: a file of /proc or /sys",
            r"^\./env\.yaml:1:1: E003 \[info\] skipped: a file of /proc or /sys",
        ],
        absent=["PATH="],
        seconds=20,
        one_line=False,
    ),
    Case(
        "symlink_to_fifo",
        lambda: {"pipe": fifo, "link.yaml": symlink_to("pipe")},
        ["check", "."],
        0,
        [one("E003", "1:1", "./link.yaml") + "skipped: a FIFO"],
    ),
    Case(
        "dangling_symlink",
        lambda: {"gone.yaml": symlink_to("nowhere.yaml")},
        ["check", "."],
        1,
        [one("E001", "1:1", "./gone.yaml")],
    ),
    Case(
        "compile_fifo_folder",
        lambda: {"in/ok.yaml": playbook(), "in/pipe.yaml": fifo},
        ["compile", "in", "-o", "out"],
        0,
        [one("E003", "1:1", "in/pipe.yaml")],
        one_line=False,
    ),
    Case(
        "compile_missing_input",
        dict,
        ["compile", "nope.yaml", "-o", "out"],
        2,  # a path that does not exist is a usage error (issue 11)
        [one("E001", "1:1", "nope.yaml") + "no such file or directory"],
    ),
    Case(
        "compile_output_is_a_file",
        lambda: {"p.yaml": playbook(), "out": "not a folder\n"},
        ["compile", "p.yaml", "-o", "out"],
        1,
        [one("E004", "1:1") + "output out is not a folder"],
    ),
    Case(
        "compile_target_is_symlink",
        lambda: {
            "p.yaml": playbook(),
            "victim.txt": "keep\n",
            "out/p.py": symlink_to("../victim.txt"),
        },
        ["compile", "p.yaml", "-o", "out"],
        1,
        [one("E004", "1:1") + "cannot write out/p.py: it is a symlink"],
        after=lambda d: assert_text(d / "victim.txt", "keep\n"),
    ),
    Case(
        "compile_subfolder_symlink_out",
        lambda: {
            "in/sub/p.yaml": playbook(),
            "elsewhere/.keep": "",
            "out/sub": symlink_to("../elsewhere"),
        },
        ["compile", "in", "-o", "out"],
        1,
        [one("E004", "1:1", "in/sub/p.yaml") + ".*leads outside the output folder"],
        after=lambda d: assert_only(d / "elsewhere", {".keep"}),
    ),
    Case(
        "compile_target_is_fifo",
        lambda: {"p.yaml": playbook(), "out/p.py": fifo},
        ["compile", "p.yaml", "-o", "out"],
        1,
        [one("E004", "1:1") + "cannot write out/p.py: it is not a regular file"],
    ),
    # Python 3.11's os.walk recurses once per level: a tree 1,100 folders deep ended check with
    # a RecursionError traceback.
    Case(
        "deep_folder_tree",
        lambda: {"a": deep_tree(1100, playbook()), "q.yaml": playbook().replace("hostile", "q")},
        ["check", "."],
        0,
        [r"^All checks passed: 2 playbooks\.$"],
    ),
    Case(
        "deep_folder_tree_compile",  # and os.makedirs recursed once per level of the output
        lambda: {"a": deep_tree(1100, playbook())},
        ["compile", ".", "-o", "out"],
        0,
        [r"^1 of 1 playbook\(s\) compiled; 1 written"],
    ),
    Case(
        "two_sources_one_output",
        lambda: {
            "a/playbooks/one.yaml": playbook(),
            "b/playbooks/two.yaml": playbook(),
        },
        ["compile", "a/playbooks", "-o", "out"],
        0,
        [r"^1 of 1"],
        one_line=False,
        after=lambda d: two_sources(d),
    ),
    Case(
        "non_ascii_under_c_locale",
        lambda: {"p.yaml": playbook("né: 1\n")},
        ["check", "p.yaml"],
        0,
        [one("S103", "4:1") + r"unknown key 'n\\xe9'"],
        env={"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": ""},
    ),
    Case(
        "dev_null_given",
        dict,
        ["check", "/dev/null"],
        0,
        [one("E003", "1:1", "/dev/null") + "skipped: a device file"],
    ),
    # -- 7. output that cannot be forged -------------------------------------------------------
    Case(
        "newline_in_file_name",
        lambda: {"a\nb.yaml": playbook("bad: 1\n")},
        ["check", "."],
        0,
        [one("S103", "4:1", "./a\\nb.yaml")],
    ),
    Case(
        "carriage_return_in_file_name",
        lambda: {"a\rb.yaml": playbook("bad: 1\n")},
        ["check", "."],
        0,
        [one("S103", "4:1", "./a\\rb.yaml")],
    ),
    Case(
        "escape_in_file_name",
        lambda: {"a\x1b[2Jb.yaml": playbook("bad: 1\n")},
        ["check", "."],
        0,
        [one("S103", "4:1", "./a\\x1b[2Jb.yaml")],
    ),
    Case(
        "newline_in_key",
        lambda: {"p.yaml": playbook('"x\\nfake.yaml:1:1: X601 forged": 1\n')},
        ["check", "p.yaml"],
        0,
        [one("S103", "4:1") + r"unknown key 'x\\nfake"],
    ),
    Case(
        "github_properties",
        lambda: {"a,b:c%.yaml": playbook("bad: 1\n")},
        ["check", "a,b:c%.yaml", "--format", "github"],
        0,
        [r"^::warning file=a%2Cb%3Ac%25\.yaml,line=4,col=1,title=S103::S103 unknown key"],
        one_line=False,
    ),
    Case(
        "github_message_newline",
        lambda: {"p.yaml": playbook('"x\\ny": 1\n')},
        ["check", "p.yaml", "--format", "github"],
        0,
        [r"^::warning file=p\.yaml,line=4,col=1,title=S103::S103 unknown key 'x\\ny'"],
        one_line=False,
    ),
]
