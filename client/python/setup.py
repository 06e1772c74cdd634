"""Build hooks of the docsparse client: stubs generated from proto/, never copied.

build_py runs grpcio-tools' protoc on docsparse/v1/*.proto into docsparse/_proto/
(git-ignored) and rewrites the generated imports to be package-relative, so the
stubs live inside this package and cannot clash with another copy of the same
protos on sys.path. The proto directory is, in order: $DOCSPARSE_PROTO_DIR;
proto/ beside this file (where an sdist carries its copy); ../../proto (the
repository). The runtime pins come from the grpcio-tools that generated the code:
its generated modules refuse an older grpcio, and a protobuf runtime of another
major version or older than the generator.
"""
import os
import re
import shutil
import sys
from importlib import metadata
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = Path(__file__).parent.resolve()
PROTO_ENV = "DOCSPARSE_PROTO_DIR"
PROTO_PACKAGE = Path("docsparse/v1")  # relative to the proto directory
STUBS_DIR = HERE / "docsparse" / "_proto"
STUB_PACKAGES = ["docsparse._proto", "docsparse._proto.docsparse", "docsparse._proto.docsparse.v1"]


def find_proto_dir():
    """The directory that holds docsparse/v1/*.proto."""
    configured = os.environ.get(PROTO_ENV)
    candidates = [Path(configured)] if configured else [HERE / "proto", HERE.parent.parent / "proto"]
    for candidate in candidates:
        if list((candidate / PROTO_PACKAGE).glob("*.proto")):
            return candidate.resolve()
    where = f"${PROTO_ENV}={configured}" if configured else " or ".join(map(str, candidates))
    sys.exit(f"docsparse client: no {PROTO_PACKAGE}/*.proto under {where}; "
             f"set {PROTO_ENV} to the repository's proto/ directory")


def grpc_tools_version():
    try:
        return metadata.version("grpcio-tools")
    except metadata.PackageNotFoundError:
        sys.exit("docsparse client: building needs grpcio-tools (a build requirement in "
                 "pyproject.toml; with --no-build-isolation install it first)")


def runtime_requirements():
    """grpcio no older than the generator, and the protobuf range grpcio-tools
    itself requires (the one its generated code runs on)."""
    tools = grpc_tools_version()
    protobuf = [r.split(";")[0].strip() for r in metadata.requires("grpcio-tools") or []
                if re.match(r"protobuf\b", r)]
    return [f"grpcio>={tools}", *(protobuf or ["protobuf"]), "grpcio-health-checking"]


def _relative_import(importing_file, module, out_dir):
    """`from <dots>pkg import name` for `module` (dotted, relative to out_dir)
    as seen from importing_file."""
    depth = len(importing_file.parent.relative_to(out_dir).parts)
    package, _, name = module.rpartition(".")
    return "." * (depth + 1) + package, name


def fix_imports(out_dir):
    """Rewrites the generated `from docsparse.v1 import docsparse_pb2` (and
    `import x_pb2 as y`) into package-relative imports. Only modules generated
    here are rewritten: google.protobuf and grpc stay absolute."""
    generated = {
        ".".join(p.relative_to(out_dir).with_suffix("").parts)
        for p in out_dir.rglob("*.py")
    }
    from_import = re.compile(r"^(\s*)from ([\w.]+) import (\w+)(.*)$")
    plain_import = re.compile(r"^(\s*)import ([\w.]+) as (\w+)(.*)$")
    for path in list(out_dir.rglob("*.py")) + list(out_dir.rglob("*.pyi")):
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        for i, line in enumerate(lines):
            match = from_import.match(line)
            if match and f"{match.group(2)}.{match.group(3)}" in generated:
                indent, module, name, rest = match.groups()
                package, _ = _relative_import(path, f"{module}.{name}", out_dir)
                lines[i] = f"{indent}from {package} import {name}{rest}\n"
                continue
            match = plain_import.match(line)
            if match and match.group(2) in generated:
                indent, module, alias, rest = match.groups()
                package, name = _relative_import(path, module, out_dir)
                lines[i] = f"{indent}from {package} import {name} as {alias}{rest}\n"
        path.write_text("".join(lines), encoding="utf-8")


def generate_stubs(out_dir=STUBS_DIR):
    """protoc --python_out/--pyi_out/--grpc_python_out on docsparse/v1/*.proto."""
    import grpc_tools
    from grpc_tools import protoc

    proto_dir = find_proto_dir()
    well_known = Path(grpc_tools.__file__).parent / "_proto"  # google/protobuf/*.proto
    protos = sorted(str(p.relative_to(proto_dir)) for p in (proto_dir / PROTO_PACKAGE).glob("*.proto"))
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    args = ["grpc_tools.protoc", f"-I{proto_dir}", f"-I{well_known}", f"--python_out={out_dir}",
            f"--pyi_out={out_dir}", f"--grpc_python_out={out_dir}", *protos]
    if protoc.main(args) != 0:
        sys.exit(f"docsparse client: protoc failed on {protos} in {proto_dir}")
    for directory in [out_dir, *(p for p in out_dir.rglob("*") if p.is_dir())]:
        (directory / "__init__.py").touch()
    (out_dir / "__init__.py").write_text(
        f"# Generated by setup.py from {', '.join(protos)} with grpcio-tools "
        f"{grpc_tools_version()}. Do not edit; not committed.\n", encoding="utf-8")
    fix_imports(out_dir)
    print(f"docsparse client: generated stubs for {', '.join(protos)} from {proto_dir}")


class BuildPyWithStubs(build_py):
    """build_py that first (re)generates docsparse/_proto from the protos."""

    def run(self):
        generate_stubs()
        # The stub packages exist only now, so they join here rather than in
        # setup(): the metadata step lists packages before any build runs.
        self.packages = list(self.packages or []) + [
            p for p in STUB_PACKAGES if p not in (self.packages or [])]
        self.__dict__.pop("data_files", None)  # computed lazily; maybe before the .pyi
        super().run()


class SdistWithProtos(sdist):
    """An sdist carries the protos (in proto/), not the stubs, so that a wheel
    built from it generates them as a build from the repository does."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        source = find_proto_dir()
        for proto in (source / PROTO_PACKAGE).glob("*.proto"):
            target = Path(base_dir) / "proto" / proto.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(proto, target)


setup(
    packages=["docsparse"],
    package_data={"docsparse": ["py.typed"], "docsparse._proto.docsparse.v1": ["*.pyi"]},
    install_requires=runtime_requirements(),
    cmdclass={"build_py": BuildPyWithStubs, "sdist": SdistWithProtos},
)
