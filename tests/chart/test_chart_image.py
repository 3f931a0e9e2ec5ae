"""The Dockerfile the chart's image is built from cannot be built here (no container
engine), so these check that it keeps up with the project: it generates the protobuf
code with the Makefile's command, copies every package pyproject.toml installs, keeps
generated code and local state out of the build context, and runs unprivileged."""

from __future__ import annotations

import re
import tomllib

from chart_render import ROOT

DOCKERFILE = (ROOT / "Dockerfile").read_text()


def joined(text: str) -> str:
    return re.sub(r"\s*\\\n\s*", " ", text)


def test_protobuf_code_is_generated_as_make_proto_does() -> None:
    makefile = joined((ROOT / "Makefile").read_text())
    make_flags = re.search(r"grpc_tools\.protoc (.*?) \$\(PROTOS\)", makefile)
    docker_flags = re.search(r"grpc_tools\.protoc (.*?) proto/\*\.proto", joined(DOCKERFILE))
    assert make_flags and docker_flags
    assert docker_flags.group(1) == make_flags.group(1)


def test_every_installed_package_is_copied() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    includes = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    copied = set(re.findall(r"^COPY (\w+)/ \1/$", DOCKERFILE, re.M))
    assert {pattern.rstrip("*") for pattern in includes} <= copied
    assert "COPY pyproject.toml README.md ./" in DOCKERFILE  # the readme is package metadata


def test_build_context_leaves_out_local_state_and_generated_code() -> None:
    ignored = set((ROOT / ".dockerignore").read_text().split())
    assert {".venv", ".tools", "data", "quorum/gen", ".git"} <= ignored


def test_runs_unprivileged_with_the_chart_defaults() -> None:
    final_stage = DOCKERFILE.rsplit("\nFROM ", 1)[1]
    assert "USER 10001:10001" in final_stage
    assert "ENV PATH=/opt/kraft-quorum/bin:$PATH" in final_stage  # python3 has grpc
    values = (ROOT / "charts" / "kraft-quorum" / "values.yaml").read_text()
    assert "runAsUser: 10001" in values and "repository: kraft-quorum" in values
