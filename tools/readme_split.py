"""Split the long README into the operator's page and docs/ files (issue 28, item 8).

Run from the repository root: `python tools/readme_split.py`. It reads README.md,
cuts it into its `## ` sections (code-fence aware), writes every section that
moves to its docs/ file verbatim (links made relative to docs/, cross references
to sections turned into links to where they now live) and writes the new
README from tools/README_TEMPLATE.md, into which a few sections are pasted
verbatim. A section it does not know stops it, so nothing is dropped silently.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path.cwd()

# Section title (start of the `## ` heading) -> (docs file, heading to use there).
MOVES: dict[str, tuple[str, str]] = {
    "Running a controller": ("configuration.md", "## Controllers"),
    "Broker agent": ("broker-agent.md", ""),
    "Partitions and replication": ("data-plane.md", "## Partitions and replication"),
    # `### ` subsections of "Consumer groups" in the old README, cut out of it
    "Compacted topics": ("data-plane.md", "## Compacted topics (the log cleaner)"),
    "Admin APIs on the brokers": ("data-plane.md", "## Admin APIs on the brokers"),
    "Consumer groups": ("groups.md", ""),
    "Metrics": ("metrics.md", "## At a glance (the table the README had)"),
    "Security: TLS, mTLS": ("security.md", "## TLS and mTLS"),
    "Security: who may speak for a voter": ("security.md", "## Who may speak for a voter"),
    "Security: authorization by ACLs": ("security.md", "## Authorization by ACLs"),
    "Security: hostile input and admin rate limits": (
        "security.md",
        "## Hostile input and admin rate limits",
    ),
    "Kubernetes": ("chart.md", ""),
    "Admin API": ("admin-api.md", "## The calls"),
    "Admin request limits and validation": ("admin-api.md", "## Request limits and validation"),
    "Reliability": ("faults.md", "## Reliability: hostile input and faults the suite covers"),
    "Fault tests": ("faults.md", "## Fault tests"),
    "What is inside": ("architecture.md", "## What is inside"),
    "The simulator": ("architecture.md", "## The simulator"),
    "Architecture": ("architecture.md", "## Parts at a glance: what each owns and does not"),
    "Design notes": ("architecture.md", "## Design notes"),
    "Analytics": ("analytics.md", ""),
}
# Sections the template pastes verbatim (they stay on the operator's page).
KEPT = ("Quick start", "Operating the quorum", "quorumctl", "Performance")
# `### ` subsections that are cut out as sections of their own.
SPLIT_SUBSECTIONS = ("Compacted topics", "Admin APIs on the brokers")
SUBSECTIONS_WITHIN = ("The replication rules",)

TITLES = {
    "configuration.md": (
        "# Configuration reference\n\n"
        "Every key of a controller's properties file, what a controller refuses at\n"
        "start-up, its exit codes, data layout and errors on the wire. The broker agent's\n"
        "keys are in [broker-agent.md](broker-agent.md). The operator's summary is the\n"
        "[README](../README.md).\n"
    ),
    "broker-agent.md": (
        "# The broker agent\n\n"
        "Keys, states, MetadataFetch, fencing, the metadata cache and the apply trace.\n"
        "The operator's summary is the [README](../README.md).\n"
    ),
    "data-plane.md": (
        "# The data plane: Kafka's protocol on the brokers\n\n"
        "Partitions and replication over Kafka's wire protocol, the replication rules\n"
        "(the seeds' figures), compacted topics and the admin APIs on the brokers.\n"
        "Consumer groups are in [groups.md](groups.md).\n"
    ),
    "groups.md": "# Consumer groups\n",
    "security.md": (
        "# Security\n\n"
        "TLS and mTLS, who may speak for a voter, authorization by ACLs, hostile input\n"
        "and admin rate limits. Request limits are in [admin-api.md](admin-api.md).\n"
    ),
    "chart.md": "# Kubernetes: the Helm chart\n",
    "admin-api.md": "# The admin API\n",
    "faults.md": (
        "# Reliability and fault tests\n\n"
        "What the suite proves about hostile input and faults, and the fault tests'\n"
        "figures.\n"
    ),
    "analytics.md": "# Analytics: convergence lag on Spark\n",
}


# References elsewhere to text that moved: (file, old, new).
FIXUPS = [
    (
        "quorum/controller_keys.py",
        "the README's table (`int_key_table`)",
        "the table in docs/configuration.md (`int_key_table`)",
    ),
    (
        "quorum/controller_keys.py",
        '"""The README\'s table of integer keys',
        '"""The table of integer keys in docs/configuration.md',
    ),
    (
        "quorum/controller_config.py",
        "the effective configuration and the README's table",
        "the effective configuration and the docs' table",
    ),
    (
        "docs/storage.md",
        "(see the README's design\n  notes)",
        "(see the design notes\n  in [architecture.md](architecture.md#design-notes))",
    ),
    (
        "docs/storage.md",
        'see the README\'s "Compacted topics"',
        'see "Compacted topics" in [data-plane.md](data-plane.md#compacted-topics-the-log-cleaner)',
    ),
    (
        "docs/metrics.md",
        '(README, "Security: TLS, mTLS")',
        "([security.md](security.md#tls-and-mtls))",
    ),
    (
        "analytics/README.md",
        'See the "Analytics" section of the top-level README for the commands.',
        'See the "Analytics" section of the top-level README for the commands, and\n'
        "[docs/analytics.md](../docs/analytics.md) for what is recorded, exported and computed.",
    ),
    (
        "charts/README.md",
        'See the "Kubernetes" section of the top-level README for installing it, the',
        "See [docs/chart.md](../docs/chart.md) (and the top-level README) for installing it, the",
    ),
    (
        "broker_agent/README.md",
        "section of\nthe top-level README.",
        "section of\nthe top-level README and [docs/broker-agent.md](../docs/broker-agent.md).",
    ),
    (
        "tests/server/test_config.py",
        'readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()',
        'readme = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()',
    ),
]


def sections(text: str) -> list[tuple[str, str]]:
    """[(title, body)] for the preamble ('') and each `## ` section, fences respected."""
    out: list[tuple[str, list[str]]] = [("", [])]
    fenced = False
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and line.startswith("## "):
            out.append((line[3:].strip(), [line]))
        elif not fenced and line.startswith("### ") and line[4:].startswith(SPLIT_SUBSECTIONS):
            out.append((line[4:].strip(), [line]))
        else:
            out[-1][1].append(line)
    return [(title, "".join(lines)) for title, lines in out]


def destination(title: str) -> tuple[str, str] | None:
    for prefix, target in MOVES.items():
        if title == prefix or title.startswith((prefix + ":", prefix + " (")):
            return target
    return None


def anchor(heading: str) -> str:
    text = heading.lstrip("#").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def where(name: str, in_docs: bool) -> str | None:
    """The link target of a section (or a ### subsection) of the old README."""
    for key, (file, heading) in MOVES.items():
        if key == name or (name.startswith("Security:") and key.startswith(name)):
            found = f"{file}#{anchor(heading)}" if heading else file
            return found if in_docs else f"docs/{found}"
    if name == "Security":
        return "security.md" if in_docs else "docs/security.md"
    if name in SUBSECTIONS_WITHIN:
        found = f"data-plane.md#{anchor(name)}"
        return found if in_docs else f"docs/{found}"
    if name == "TLS" and in_docs:
        return "chart.md#tls"
    if name in KEPT:
        return f"../README.md#{anchor(name)}" if in_docs else f"#{anchor(name)}"
    return None


def relink(body: str, in_docs: bool) -> str:
    """Links relative to where the text now lives; quoted section names outside code
    blocks become links to where those sections now are."""
    if in_docs:
        body = re.sub(r"\]\(docs/", "](", body)

    def quoted(match: re.Match[str]) -> str:
        name = match.group(1)
        found = where(name, in_docs)
        return match.group(0) if found is None else f'["{name}"]({found})'

    pieces = re.split(r"(^```.*?^```[^\n]*$)", body, flags=re.M | re.S)
    return "".join(
        piece if piece.startswith("```") else re.sub(r'"([A-Z][A-Za-z:,./ -]+)"', quoted, piece)
        for piece in pieces
    )


def demote(body: str, heading: str) -> str:
    """Replace the section's own `## ` heading with `heading` ('' drops it: the file's title)."""
    _, _, rest = body.partition("\n")
    if heading:
        return f"{heading}\n{rest}"
    # The file's title stands for the section: its `### ` parts become `## `.
    lines, fenced = [], False
    for line in rest.lstrip("\n").splitlines(keepends=True):
        if line.startswith("```"):
            fenced = not fenced
        lines.append(line[1:] if not fenced and line.startswith("### ") else line)
    return "".join(lines)


def main() -> int:
    readme = (ROOT / "README.md").read_text()
    template = (ROOT / "tools" / "README_TEMPLATE.md").read_text()
    parts = sections(readme)
    by_title = dict(parts)
    docs: dict[str, list[str]] = {}
    for title, body in parts[1:]:
        target = destination(title)
        if target is None:
            if title not in KEPT:
                print(f"unknown section {title!r}: say where it goes", file=sys.stderr)
                return 1
            continue
        file, heading = target
        docs.setdefault(file, []).append(relink(demote(body, heading), in_docs=True))
    for file, bodies in docs.items():
        path = ROOT / "docs" / file
        text = "\n".join(b.rstrip("\n") + "\n" for b in bodies)
        if path.exists():
            path.write_text(path.read_text().rstrip("\n") + "\n\n" + text)
        else:
            path.write_text(TITLES[file].rstrip("\n") + "\n\n" + text)

    def paste(match: re.Match[str]) -> str:
        title = match.group(1)
        return relink(by_title[title], in_docs=False).rstrip("\n")

    for name, old, replacement in FIXUPS:
        path = ROOT / name
        text = path.read_text()
        if old not in text:
            print(f"{name}: {old!r} not found", file=sys.stderr)
            return 1
        path.write_text(text.replace(old, replacement))
    new = re.sub(r"\{\{section:([^}]+)\}\}", paste, template)
    (ROOT / "README.md").write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
