# Spack recipe for atomio, kept in atomio's repository (packaging/spack/atomio/package.py).
#
#   spack repo create /site/repo && cp -r packaging/spack/atomio /site/repo/packages/
#   spack repo add /site/repo
#   spack install atomio ^mpich          # or ^openmpi, ^cray-mpich, ... (the MPI provider)
#   spack load atomio                    # or the generated module
#
# The source is this repository: `git` defaults to the clone the recipe sits in; set
# ATOMIO_GIT to a site mirror. Cargo fetches the crates from crates.io at build time
# (Cargo.lock pins them); an air-gapped site vendors them (`cargo vendor`) and points
# CARGO_HOME's config at the vendor directory.
import os

from spack.package import *

_REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))


class Atomio(MakefilePackage):
    """Fast, correct atomic I/O for MPI programs: a Rust core with a C ABI (libatomio.so,
    atomio.h, atomio.pc), the atomio command (servers, benchmarks, verifier), and
    libatomio_mpiio.so, which preloaded into an unmodified MPI program makes MPI-IO's
    atomic mode atomic for the files it takes (PMPI interception)."""

    homepage = "file://" + _REPO
    git = os.environ.get("ATOMIO_GIT", _REPO)

    license("MIT OR Apache-2.0")

    version("main", branch="main")

    variant("mpi", default=True, description="Build libatomio_mpiio.so against the MPI provider")
    variant(
        "tls",
        default=True,
        description="TLS between ranks and atomio servers (rustls with ring, built in; "
        "enabled at run time by ATOMIO_TLS_CERT/KEY/CA)",
    )
    # TLS is compiled into atomio unconditionally (no cargo feature turns it off yet):
    # a build without it cannot be made, so say so instead of silently building it.
    conflicts("~tls", msg="atomio always builds TLS in (rustls); ~tls is not available yet")

    depends_on("rust@1.80:", type="build")
    depends_on("gmake", type="build")
    depends_on("mpi", when="+mpi")

    def build(self, spec, prefix):
        cargo = which("cargo")
        cargo("build", "--release", "--locked", "--bin", "atomio")
        cargo("build", "--release", "--locked", "-p", "atomio-ffi")

    def install(self, spec, prefix):
        args = ["install-files", "PREFIX=" + prefix, "CARGO_PROFILE=release"]
        if spec.satisfies("+mpi"):
            args.append("MPICC=" + spec["mpi"].mpicc)
        else:
            args.append("MPIIO=0")
        make(*args)

    def setup_run_environment(self, env):
        env.set("ATOMIO_ROOT", self.prefix)
        env.prepend_path("LD_LIBRARY_PATH", self.prefix.lib)
