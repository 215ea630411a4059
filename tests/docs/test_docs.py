"""The documentation covers what the code offers (the model: sqlite-utils' tests/test_docs.py).

Each CLI command and subcommand (walked from the click group, hidden ones skipped) has a section
in docs/commands.md naming its options, arguments and exit codes; each MCP tool (listed by the
server `build_server` returns) has a section in docs/mcp.md naming its arguments; each
`engram.toml` key (the `Settings` fields and the `[sync]` keys) and each environment variable is in
docs/configuration.md. Every missing item is its own failure, named in the test id. The pages'
relative links must lead somewhere, and the README stays a start page.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import fields
from pathlib import Path

import click
import pytest

from compiler.cli.main import main
from compiler.core.settings import ENV_VARS, SYNC_KEYS, Settings
from compiler.mcp_server.server import MemoryServer, build_server

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
USER_PAGES = [ROOT / "README.md", *(p for p in PAGES if p.name != "architecture.md")]
ALL_PAGES = [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *PAGES]


# --- Markdown, as much as the checks need -------------------------------------------------------

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$", re.MULTILINE)


def prose(text: str) -> str:
    """Returns `text` with fenced code blocks blanked (same length, so offsets still hold)."""
    return FENCE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def code_spans(text: str) -> set[str]:
    """Returns the contents of the inline code spans of `text`, fenced blocks left out."""
    return {span.strip() for span in re.findall(r"`([^`\n]+)`", prose(text))}


def sections(text: str, names: callable) -> dict[str, str]:
    """Returns {name: its section} for each heading that `names(heading)` says names something.

    A section runs from its heading to the next heading of the same or a higher level, or to the
    next heading that names something itself.
    """
    body = prose(text)
    heads = [(m.start(), len(m.group(1)), names(m.group(2))) for m in HEADING.finditer(body)]
    found: dict[str, str] = {}
    for i, (start, level, named) in enumerate(heads):
        if not named:
            continue
        end = next((s for s, lv, n in heads[i + 1:] if lv <= level or n), len(body))
        for name in named:
            found[name] = found.get(name, "") + text[start:end]
    return found


def preamble(text: str, names: callable) -> str:
    """Returns what comes before the first heading that names something: what applies to all."""
    body = prose(text)
    first = next((m.start() for m in HEADING.finditer(body) if names(m.group(2))), len(body))
    return text[:first]


def in_code(name: str, text: str) -> bool:
    """True when `name` opens an inline code span in `text` (`--json`, `--min-score S`, `remote`)."""
    return re.search(r"`" + re.escape(name) + r"(?=[`\s=,\[.(])", prose(text)) is not None


def slug(heading: str) -> str:
    """Returns GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


# --- The CLI ------------------------------------------------------------------------------------

def cli_commands() -> list[tuple[str, click.Command]]:
    """Returns every visible command and subcommand of `engram`, as ("memory add", command)."""
    found: list[tuple[str, click.Command]] = []

    def walk(group: click.Group, prefix: str) -> None:
        for name, command in sorted(group.commands.items()):
            if command.hidden:
                continue
            path = f"{prefix} {name}".strip()
            found.append((path, command))
            if isinstance(command, click.Group):
                walk(command, path)

    walk(main, "")
    return found


COMMANDS = dict(cli_commands())
COMMANDS_MD = (DOCS / "commands.md").read_text(encoding="utf-8")


def named_commands(heading: str) -> list[str]:
    """Returns the commands a heading names in code spans: "`engram memory add CONTENT`" → ["memory add"]."""
    named = []
    for span in re.findall(r"`engram ([^`]+)`", heading):
        words = []
        for word in span.split():
            if not re.fullmatch(r"[a-z][a-z-]*", word):
                break
            words.append(word)
        if words:
            named.append(" ".join(words))
    return named


COMMAND_SECTIONS = sections(COMMANDS_MD, named_commands)
SHARED = preamble(COMMANDS_MD, named_commands)  # the options "most commands share"


def documented_for(path: str) -> str:
    """Returns the text that documents `path`: its section, its groups' sections and the preamble."""
    words = path.split()
    groups = [" ".join(words[:i]) for i in range(1, len(words))]
    return "\n".join([COMMAND_SECTIONS.get(path, ""), *(COMMAND_SECTIONS.get(g, "") for g in groups), SHARED])


def option_names(command: click.Command) -> list[str]:
    """Returns each option's long names (or its short names when it has no long one)."""
    names = []
    for param in command.params:
        if isinstance(param, click.Option) and not param.hidden:
            every = [*param.opts, *param.secondary_opts]
            names += [n for n in every if n.startswith("--")] or every
    return names


def argument_names(command: click.Command) -> list[str]:
    return [(p.metavar or p.name).strip("[].").upper() for p in command.params if isinstance(p, click.Argument)]


def runs_by_itself(command: click.Command) -> bool:
    return not isinstance(command, click.Group) or command.invoke_without_command


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_every_command_has_a_section_in_commands_md(path):
    assert path in COMMAND_SECTIONS, f"docs/commands.md has no heading naming `engram {path}`"


@pytest.mark.parametrize(("path", "option"),
                         [(p, o) for p, c in sorted(COMMANDS.items()) for o in option_names(c)])
def test_every_option_is_documented_with_its_command(path, option):
    assert in_code(option, documented_for(path)), \
        f"`engram {path} {option}` is not in its section of docs/commands.md (nor its group's, nor the shared options)"


@pytest.mark.parametrize(("path", "argument"),
                         [(p, a) for p, c in sorted(COMMANDS.items()) for a in argument_names(c)])
def test_every_argument_is_named_in_its_section(path, argument):
    assert re.search(rf"\b{re.escape(argument)}\b", COMMAND_SECTIONS.get(path, "")), \
        f"`engram {path}`: its argument {argument} is not named in docs/commands.md"


@pytest.mark.parametrize("path", sorted(p for p, c in COMMANDS.items() if runs_by_itself(c)))
def test_every_command_states_its_exit_codes(path):
    assert re.search(r"exit codes?", documented_for(path).replace(SHARED, ""), re.IGNORECASE), \
        f"docs/commands.md does not state the exit codes of `engram {path}`"


def test_the_walk_finds_nested_commands_and_skips_hidden_ones():
    assert {"compile", "memory", "memory add", "sync", "sync status", "track failure"} <= set(COMMANDS)
    assert "merge-manifest" not in COMMANDS  # hidden: git calls it, people do not


def test_the_section_finder_sees_what_is_missing():
    page = "intro `--vault`\n\n## Notes\n\n### `engram a [X]`\n\n`--one`\n\n### `engram b`\n\nExit codes: 0\n"
    found = sections(page, named_commands)
    assert set(found) == {"a", "b"}
    assert in_code("--one", found["a"]) and not in_code("--one", found["b"])
    assert in_code("--vault", preamble(page, named_commands)) and not in_code("--vault", found["a"])


# --- MCP tools -----------------------------------------------------------------------------------

def mcp_tools() -> dict[str, list[str]]:
    """Returns {tool name: its argument names} as the server offers them to a client."""
    memory = MemoryServer(ROOT, Settings())  # no embedder is loaded: listing tools calls none
    try:
        return {tool.name: list(tool.inputSchema.get("properties", {}))
                for tool in asyncio.run(build_server(memory).list_tools())}
    finally:
        memory.close()


TOOLS = mcp_tools()
MCP_MD = (DOCS / "mcp.md").read_text(encoding="utf-8")
TOOL_SECTIONS = sections(MCP_MD, lambda heading: [t for t in re.findall(r"`(\w+)`", heading) if t in TOOLS])


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_every_mcp_tool_has_a_section_in_mcp_md(tool):
    assert tool in TOOL_SECTIONS, f"docs/mcp.md has no heading naming the tool `{tool}`"


@pytest.mark.parametrize(("tool", "argument"), [(t, a) for t, args in sorted(TOOLS.items()) for a in args])
def test_every_mcp_argument_is_in_its_tools_section(tool, argument):
    assert in_code(argument, TOOL_SECTIONS.get(tool, "")), \
        f"docs/mcp.md: the argument `{argument}` of `{tool}` is not in its section"


def test_the_server_offers_tools():
    assert {"store_memory", "recall_memory", "search_notes", "mem_save"} <= set(TOOLS)


# --- engram.toml and the environment -------------------------------------------------------------

CONFIGURATION_MD = (DOCS / "configuration.md").read_text(encoding="utf-8")
CONFIG_SPANS = code_spans(CONFIGURATION_MD)
SYNC_SECTION = sections(CONFIGURATION_MD, lambda heading: ["sync"] if "`[sync]`" in heading else []).get("sync", "")


def environment_variables() -> set[str]:
    """Returns every ENGRAM_* variable an option or the settings read."""
    names = set(ENV_VARS.values())
    for _, command in cli_commands():
        for param in command.params:
            envvar = getattr(param, "envvar", None)
            names |= {envvar} if isinstance(envvar, str) else set(envvar or ())
    return names


@pytest.mark.parametrize("key", [f.name for f in fields(Settings) if f.name != "extra"])
def test_every_setting_is_in_configuration_md(key):
    assert key in CONFIG_SPANS, f"docs/configuration.md does not document the engram.toml key `{key}`"


@pytest.mark.parametrize("key", sorted(SYNC_KEYS))
def test_every_sync_setting_is_in_the_sync_section(key):
    assert in_code(key, SYNC_SECTION), f"docs/configuration.md: `[sync] {key}` is not in its `[sync]` section"


@pytest.mark.parametrize("name", sorted(environment_variables()))
def test_every_environment_variable_is_in_configuration_md(name):
    assert name in CONFIG_SPANS, f"docs/configuration.md does not document ${name}"


def test_the_environment_variables_found_include_the_vault():
    assert {"ENGRAM_VAULT", "ENGRAM_MODEL", "ENGRAM_NOW"} <= environment_variables()


# --- The pages themselves ------------------------------------------------------------------------

def links(page: Path) -> list[tuple[int, str]]:
    text = prose(page.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)  # a link written in a code span is an example, not a link
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in re.finditer(r"\]\(([^)\s]+)\)", text)]


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for match in HEADING.finditer(prose(page.read_text(encoding="utf-8"))):
        base = slug(match.group(2))
        found.add(base if base not in seen else f"{base}-{seen[base]}")
        seen[base] = seen.get(base, 0) + 1
    return found


LINKS = [(page, line, target) for page in ALL_PAGES for line, target in links(page)
         if not re.match(r"[a-z]+:", target)]


@pytest.mark.parametrize(("page", "line", "target"), LINKS,
                         ids=[f"{p.relative_to(ROOT)}:{n}:{t}" for p, n, t in LINKS])
def test_every_relative_link_leads_somewhere(page, line, target):
    path, _, anchor = target.partition("#")
    destination = (page.parent / path).resolve() if path else page
    assert destination.exists(), f"{page.relative_to(ROOT)}:{line}: {path} does not exist"
    if anchor and destination.suffix == ".md":
        assert anchor in anchors(destination), f"{page.relative_to(ROOT)}:{line}: no heading #{anchor} in {path or page.name}"


@pytest.mark.parametrize("page", ALL_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_tells_anyone_to_install_the_unrelated_engram_vault(page):
    """`engram-vault` on PyPI is another project; ours is `engram-vault-compiler`."""
    wrong = re.findall(r"pip install\s+['\"]?engram-vault(?!-compiler)\b[^\s'\"]*", page.read_text(encoding="utf-8"))
    assert not wrong, f"{page.relative_to(ROOT)}: {wrong}"


@pytest.mark.parametrize("page", USER_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_user_pages_name_no_internal_module(page):
    """Module paths move (they did): user pages describe behaviour; docs/architecture.md names modules."""
    internal = re.findall(r"\bcompiler[./][\w./]+", page.read_text(encoding="utf-8"))
    assert not internal, f"{page.relative_to(ROOT)} names internal modules: {internal}"


def test_the_readme_starts_a_user_and_points_to_the_reference():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "make demo" in readme and "make test" in readme
    assert re.search(r"^demo:", makefile, re.MULTILINE) and re.search(r"^test:", makefile, re.MULTILINE)
    assert len(readme.splitlines()) <= 120, "the reference belongs in docs/, the README gets a user started"
    for page in PAGES:
        assert f"docs/{page.name}" in readme, f"the README does not point to docs/{page.name}"
