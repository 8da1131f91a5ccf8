#!/usr/bin/env python3
"""Checks packaging/spack/atomio/package.py without Spack (Spack is not on PyPI and is not
installed here): it must compile, and its class body must run against a stub `spack.package`
that records the directives, which are then checked (variants mpi and tls, MPI a dependency
only with +mpi, rust a build dependency). With Spack installed, `spack audit packages atomio`
and `spack spec atomio` are the real checks."""
import importlib.util
import py_compile
import sys
import tempfile
import types

sys.dont_write_bytecode = True  # leave no __pycache__ in the source tree
path = sys.argv[1] if len(sys.argv) > 1 else __file__.replace("check_recipe.py", "atomio/package.py")
with tempfile.TemporaryDirectory() as tmp:
    py_compile.compile(path, cfile=tmp + "/package.pyc", doraise=True)

recorded = []


def directive(name):
    def record(*args, **kwargs):
        recorded.append((name, args, kwargs))

    return record


stub = types.ModuleType("spack.package")
for name in ["version", "variant", "depends_on", "conflicts", "license", "maintainers", "patch", "provides"]:
    setattr(stub, name, directive(name))


class MakefilePackage:
    pass


stub.MakefilePackage = MakefilePackage
stub.which = lambda *a, **k: None
stub.make = lambda *a, **k: None
stub.join_path = lambda *a: "/".join(a)
stub.__all__ = [n for n in dir(stub) if not n.startswith("_")]
sys.modules["spack"] = types.ModuleType("spack")
sys.modules["spack.package"] = stub

spec = importlib.util.spec_from_file_location("atomio_recipe", path)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
cls = mod.Atomio
assert issubclass(cls, MakefilePackage)
for attr in ["build", "install", "setup_run_environment"]:
    assert callable(getattr(cls, attr)), attr

variants = {a[0]: k for (n, a, k) in recorded if n == "variant"}
deps = [(a[0], k) for (n, a, k) in recorded if n == "depends_on"]
assert set(variants) == {"mpi", "tls"}, variants
assert variants["tls"]["default"] is True and variants["mpi"]["default"] is True
assert ("mpi", {"when": "+mpi"}) in deps, deps
assert any(d == "rust@1.80:" and k.get("type") == "build" for d, k in deps), deps
assert any(n == "version" for (n, a, k) in recorded)
print(
    "spack recipe ok (stub spack.package): class %s, variants %s, depends_on %s"
    % (cls.__name__, sorted(variants), [d for d, _ in deps])
)
