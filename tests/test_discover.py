"""Which files a run reads: .gitignore rules (as ruff respects them), --exclude, named files."""

from __future__ import annotations

from pathlib import Path

from noetl_compile.discover import find_files, looks_like_playbook


def _tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def _found(root: Path, *exclude: str) -> list[str]:
    found = find_files([str(root)], exclude)
    return sorted(Path(p).relative_to(root).as_posix() for p in found.files)


def test_gitignore_patterns(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()  # the repository root: its .gitignore applies below it
    _tree(
        tmp_path,
        {
            ".gitignore": "# generated\n*.tmp.yaml\n/top_only.yaml\nout/\n!keep.tmp.yaml\n",
            "a.yaml": "",
            "x.tmp.yaml": "",
            "keep.tmp.yaml": "",
            "top_only.yaml": "",
            "sub/top_only.yaml": "",
            "sub/out/gone.yaml": "",
            "sub/out.yaml": "",  # `out/` ignores folders named out, not this file
            "sub/.gitignore": "deep/**/*.yml\n",
            "sub/deep/x/y/z.yml": "",
            "sub/deep/kept.yaml": "",
            ".hidden/h.yaml": "",
        },
    )
    assert _found(tmp_path / "sub") == ["deep/kept.yaml", "out.yaml", "top_only.yaml"]
    assert _found(tmp_path) == [
        "a.yaml",
        "keep.tmp.yaml",
        "sub/deep/kept.yaml",
        "sub/out.yaml",
        "sub/top_only.yaml",
    ]


def test_exclude_globs_match_names_and_relative_paths(tmp_path: Path) -> None:
    _tree(tmp_path, {"a.yaml": "", "b/c.yaml": "", "b/d.yml": "", "e/docker-compose.yml": ""})
    assert _found(tmp_path, "b") == ["a.yaml", "e/docker-compose.yml"]
    assert _found(tmp_path, "b/*.yml", "docker-compose*") == ["a.yaml", "b/c.yaml"]


def test_named_files_are_kept_and_missing_paths_reported(tmp_path: Path) -> None:
    _tree(tmp_path, {".gitignore": "*.yaml\n", "x.yaml": ""})
    (tmp_path / ".git").mkdir()
    found = find_files([str(tmp_path / "x.yaml"), str(tmp_path / "nope")], ())
    assert found.files == [str(tmp_path / "x.yaml")] and found.named == {str(tmp_path / "x.yaml")}
    assert found.missing == [str(tmp_path / "nope")]
    assert _found(tmp_path) == []


def test_what_looks_like_a_playbook() -> None:
    assert looks_like_playbook({"apiVersion": "noetl.io/v2"})
    assert looks_like_playbook({"kind": "Playbook"})
    assert looks_like_playbook({"workflow": []})
    assert looks_like_playbook(None)  # a file that did not load is still reported on
    assert not looks_like_playbook({"services": {"db": {}}})
    assert not looks_like_playbook(["pg_prod"])
    assert not looks_like_playbook({"apiVersion": "apps/v1", "kind": "Deployment"})
