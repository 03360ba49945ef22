"""The README, docs/ and ARCHITECTURE.md stay true to the repository they describe.

Every `make <target>` they mention is a Makefile target, every `batch-assets <verb> [<sub-verb>]
[--flag ...]` a command and flags the CLI parser knows, every `python -m <module>` importable, every
relative link a file (and its `#anchor` a heading there); the README stays short (<= 300 lines), and
no line carries a commit hash or a machine's absolute path. ARCHITECTURE.md's module tree lists every
module under batch_assets/ and nothing that is gone. Nothing here runs a command: the CLI's parser
and the forwarded commands' `--help` are read in process, so the whole module takes about a second.
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import functools
import importlib.util
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
ARCHITECTURE = ROOT / "ARCHITECTURE.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]
README_MAX_LINES = 300

FENCE_RE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.S | re.M)
INLINE_CODE_RE = re.compile(r"`([^`\n]+)`")
LINK_RE = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
# `.venv/bin/batch-assets …`, `batch-assets …`, `python -m batch_assets.cli …`.
CLI_RE = re.compile(r"(?:^|(?<=[\s(`;&]))(?:\S*/)?(?:batch-assets|python -m batch_assets\.cli)(?=\s|$)(.*)")
MAKE_RE = re.compile(r"(?:^|(?<=[\s(`;&]))make\s+([A-Za-z0-9_][A-Za-z0-9_.-]*)")
PYTHON_M_RE = re.compile(r"python -m ([A-Za-z_][\w.]*)")
FLAG_RE = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*\*?")
# A shell separator ends a command: a pipe or redirect between spaces, ;, &&, a comment.
SEPARATOR_RE = re.compile(r"\s(?:\||>|>>|2>|&&|;|#)\s.*$|\s#.*$")
# A commit hash: 7-40 lower-case hex characters with at least one digit and one letter.
HEX_RE = re.compile(r"(?<![0-9A-Za-z_])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![0-9A-Za-z_])")
MACHINE_PATH_RE = re.compile(r"(?<![\w.~/-])/(?:work|tmp|home|Users|root|mnt|private|scratch)/")


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _code_texts(text: str) -> list[str]:
    """The code a page shows: every line of its fenced blocks, and every inline code span outside them."""
    out = []
    for block in FENCE_RE.finditer(text):
        out.extend(block.group(0).splitlines()[1:-1])
    out.extend(m.group(1) for m in INLINE_CODE_RE.finditer(FENCE_RE.sub("", text)))
    return out


def _prose(text: str) -> str:
    """The page without its code, so links are looked for where Markdown renders them."""
    return INLINE_CODE_RE.sub("", FENCE_RE.sub("", text))


# --- the CLI as its parser sees it -----------------------------------------------------------


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps its subparsers here
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {o for o in parser._option_string_actions if o.startswith("--")}


def _help_flags(argv: list[str]) -> set[str]:
    """The flags a forwarded command (emulator, bench, soak) prints in its own --help."""
    from batch_assets.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        main([*argv, "--help"])
    return set(FLAG_RE.findall(out.getvalue()))


@functools.cache
def _cli() -> tuple[set[str], dict[str, argparse.ArgumentParser]]:
    from batch_assets.cli.parser import build_parser

    top = build_parser()
    return _options(top), _subcommands(top)


@functools.cache
def _flags_of(verb: str, sub: str | None) -> frozenset[str]:
    global_flags, commands = _cli()
    parser = commands[verb]
    if parser.prefix_chars == "\0":  # a forwarded command: its own program parses the flags
        return frozenset(_help_flags([verb]))
    flags = global_flags | _options(parser)
    if sub is not None:
        flags |= _options(_subcommands(parser)[sub])
    return frozenset(flags)


def _words(rest: str) -> list[str]:
    return SEPARATOR_RE.sub("", " " + rest).split()


def _verb(words: list[str]) -> tuple[str | None, list[str]]:
    """The command word after any global options (`--database FILE`, `--debug`, …), and what follows."""
    i = 0
    while i < len(words) and words[i].startswith("--"):
        i += 1 if words[i] in ("--debug", "--help") else 2
    return (words[i], words[i + 1 :]) if i < len(words) else (None, [])


def _cli_mentions() -> list[tuple[str, str]]:
    """(page, command text) for every `batch-assets …` a page shows in code."""
    found = []
    for page in PAGES:
        for code in _code_texts(_text(page)):
            for m in CLI_RE.finditer(code):
                found.append((page.relative_to(ROOT).as_posix(), m.group(1)))
    return found


def test_the_pages_mention_commands_at_all():
    """Guards the extraction itself: a regex that finds nothing would pass every check below."""
    verbs = {_verb(_words(rest))[0] for _, rest in _cli_mentions()}
    assert {"demo", "report", "jobs", "retry", "revoke", "quotas"} <= verbs
    assert {"demo", "test", "dev"} <= {t for _, t in _make_mentions()}


def test_every_batch_assets_command_and_flag_exists():
    _, commands = _cli()
    wrong = []
    for page, rest in _cli_mentions():
        verb, after = _verb(_words(rest))
        if verb is None or not re.fullmatch(r"[a-z][a-z-]*", verb):
            continue  # a placeholder (COMMAND, <verb>) or the program named alone
        if verb not in commands:
            wrong.append(f"{page}: `batch-assets {rest.strip()}`: no command {verb!r}")
            continue
        subs = _subcommands(commands[verb])
        sub = after[0] if after and subs and after[0] in subs else None
        if subs and after and sub is None and re.fullmatch(r"[a-z]+", after[0]):
            wrong.append(f"{page}: `batch-assets {rest.strip()}`: {verb} has no sub-command {after[0]!r}")
        known = _flags_of(verb, sub)
        for flag in FLAG_RE.findall(" ".join(after)):
            if flag.endswith("*"):
                ok = any(k.startswith(flag[:-1]) for k in known)
            else:
                ok = flag in known
            if not ok:
                wrong.append(f"{page}: `batch-assets {rest.strip()}`: {verb} has no flag {flag}")
    assert not wrong, "\n".join(wrong)


def test_every_fault_knob_in_providers_md_is_an_emulator_flag():
    page = ROOT / "docs" / "providers.md"
    section = re.search(r"^### Fault knobs$(.*?)(?=^#)", _text(page), re.S | re.M)
    assert section, "docs/providers.md has a '### Fault knobs' section"
    known = _flags_of("emulator", None)
    flags = set(FLAG_RE.findall(section.group(1)))
    assert len(flags) > 10
    unknown = sorted(f for f in flags if not (f.rstrip("*") in known or any(k.startswith(f[:-1]) for k in known)))
    assert not unknown, f"docs/providers.md names emulator knobs that `batch-assets emulator --help` lacks: {unknown}"


# --- make targets and python -m modules ------------------------------------------------------


def _make_targets() -> set[str]:
    targets = set()
    for line in _text(ROOT / "Makefile").splitlines():
        if m := re.match(r"^([A-Za-z0-9_][A-Za-z0-9_.-]*)\s*:(?!=)", line):
            targets.add(m.group(1))
        if line.startswith(".PHONY:"):
            targets.update(line.split(":", 1)[1].split())
    return targets


def _make_mentions() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for code in _code_texts(_text(page)):
            found.extend((page.relative_to(ROOT).as_posix(), t) for t in MAKE_RE.findall(code))
    return found


def test_every_make_target_mentioned_exists():
    targets = _make_targets()
    missing = sorted({f"{page}: make {t}" for page, t in _make_mentions() if t not in targets})
    assert not missing, f"Makefile targets {sorted(targets)} lack:\n" + "\n".join(missing)


def test_every_python_module_mentioned_exists():
    missing = []
    for page in PAGES:
        for code in _code_texts(_text(page)):
            for module in PYTHON_M_RE.findall(code):
                if module in ("pytest", "pip", "venv"):
                    continue
                if importlib.util.find_spec(module) is None:
                    missing.append(f"{page.name}: python -m {module}")
    assert not missing, "\n".join(missing)


# --- links ------------------------------------------------------------------------------------


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@functools.cache
def _anchors(path: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    anchors = set()
    for line in FENCE_RE.sub("", _text(path)).splitlines():
        if m := re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line):
            slug = _slug(m.group(1))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            anchors.add(slug if n == 0 else f"{slug}-{n}")
    return frozenset(anchors)


def test_every_relative_link_resolves():
    broken = []
    for page in [*PAGES, ARCHITECTURE]:
        for target in LINK_RE.findall(_prose(_text(page))):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # https:, mailto:
            path_part, _, anchor = target.partition("#")
            dest = (page.parent / path_part).resolve() if path_part else page
            name = f"{page.relative_to(ROOT).as_posix()}: ({target})"
            if not dest.is_relative_to(ROOT):
                broken.append(f"{name} leaves the repository")
            elif not dest.exists():
                broken.append(f"{name}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{name}: no heading #{anchor} in {dest.relative_to(ROOT).as_posix()}")
    assert not broken, "\n".join(broken)


# --- what the pages hold ----------------------------------------------------------------------


def test_the_readme_reads_in_ten_minutes():
    lines = len(_text(README).splitlines())
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines; keep it to {README_MAX_LINES} (move detail to docs/)"
    )


def test_no_page_holds_a_commit_hash_or_a_machine_path():
    found = []
    for page in [*PAGES, ARCHITECTURE]:
        for no, line in enumerate(_text(page).splitlines(), 1):
            where = f"{page.relative_to(ROOT).as_posix()}:{no}"
            found.extend(f"{where}: commit hash {h!r}" for h in HEX_RE.findall(line))
            found.extend(f"{where}: machine path {line.strip()[:80]!r}" for _ in MACHINE_PATH_RE.findall(line))
    assert not found, "history lives in git, not in the docs:\n" + "\n".join(found)


def test_the_readme_names_no_path_outside_the_repository():
    outside = [
        f"README.md:{no}: {line.strip()[:80]}" for no, line in enumerate(_text(README).splitlines(), 1) if "../" in line
    ]
    assert not outside, "\n".join(outside)


def test_performance_history_is_not_kept():
    assert not (ROOT / "docs" / "performance-history.md").exists(), "run diaries live in git history"


# --- ARCHITECTURE.md's module tree ------------------------------------------------------------

TREE_NAME_RE = re.compile(r"^[\w.*<>|/{}-]+(?:/|\.[a-z]+)$")
TREE_ENTRY_MAX_INDENT = 20  # deeper lines continue the description on the line above


def _expand(pattern: str) -> list[str]:
    """`<openai|dashscope>/x.py` -> both paths; `<task>` (one name) -> a wildcard."""
    m = re.search(r"<([^>]+)>", pattern)
    if not m:
        return [pattern]
    options = m.group(1).split("|") if "|" in m.group(1) else ["*"]
    return [p for o in options for p in _expand(pattern[: m.start()] + o + pattern[m.end() :])]


def _tree_entries() -> list[tuple[int, list[str]]]:
    """(line number, the paths one tree line names), read from the tree block under `batch_assets/`."""
    text = _text(ARCHITECTURE)
    block = next((b.group(0) for b in FENCE_RE.finditer(text) if "\nbatch_assets/\n" in b.group(0)), None)
    assert block, "ARCHITECTURE.md has a fenced module tree starting at `batch_assets/`"
    lines = block.splitlines()[1:-1]
    stack: list[tuple[int, str]] = []
    entries = []
    for no, line in enumerate(lines, 1):
        if line.strip() == "batch_assets/":
            stack = [(-1, "batch_assets")]
            continue
        indent = len(line) - len(line.lstrip())
        if indent >= TREE_ENTRY_MAX_INDENT or not line.strip():
            continue
        names = []
        for word in line.split():
            if word == "+":
                continue
            if not TREE_NAME_RE.match(word):
                break
            names.append(word)
        if not names:
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        base = "/".join(d for _, d in stack)
        entries.append((no, [p for n in names for p in _expand(f"{base}/{n.rstrip('/')}")]))
        if len(names) == 1 and names[0].endswith("/"):
            stack.append((indent, names[0].rstrip("/")))
    return entries


def _modules() -> list[str]:
    return sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "batch_assets").rglob("*.py"))


def test_architecture_lists_every_module():
    named = [p for _, paths in _tree_entries() for p in paths]
    missing = []
    for module in _modules():
        if module.endswith("/__init__.py"):
            target = module.rsplit("/", 1)[0]  # a package: its folder stands for it
            if target == "batch_assets":
                continue
        else:
            target = module
        if not any(fnmatch.fnmatchcase(target, p) for p in named):
            missing.append(module)
    assert not missing, "ARCHITECTURE.md's module tree lacks:\n" + "\n".join(missing)


def test_architecture_names_no_module_that_is_gone():
    modules = _modules()
    packages = {m.rsplit("/", 1)[0] for m in modules}
    gone = []
    for no, paths in _tree_entries():
        py = [p for p in paths if p.endswith(".py")]
        dirs = [p for p in paths if not re.search(r"\.[a-z]+$", p)]
        if py and not any(fnmatch.fnmatchcase(m, p) for p in py for m in modules):
            gone.append(f"tree line {no}: {py[0]}")
        for d in dirs:
            if not any(fnmatch.fnmatchcase(k, d) for k in packages) and not any(ROOT.glob(d)):
                gone.append(f"tree line {no}: {d}/")
    assert not gone, "ARCHITECTURE.md names what batch_assets/ no longer has:\n" + "\n".join(gone)


@pytest.mark.parametrize("line", ["see 78f9bcc for the change", "/work/bm/g26", "cd /tmp/x"])
def test_the_hash_and_path_checks_catch_what_they_are_for(line):
    assert HEX_RE.search(line) or MACHINE_PATH_RE.search(line)


@pytest.mark.parametrize("line", ["1000000 items", "migration 0012", "https://example.com/work/x", "deadline"])
def test_the_hash_and_path_checks_leave_ordinary_text_alone(line):
    assert not HEX_RE.search(line) and not MACHINE_PATH_RE.search(line)
