# The two commands a newcomer needs: `make demo` and `make test` (what CI runs).
CARGO ?= cargo
ATOMIO := target/release/atomio
ATOMIO_LAB := target/release/atomio-lab

.PHONY: demo demo-sharedfs test setup build bench-locks fuzz install install-files uninstall test-install

setup:
	@scripts/setup

build: setup
	$(CARGO) build --release --bin atomio --bin atomio-lab

# The main job on an embedded cluster: no daemons to start.
demo: build
	$(ATOMIO_LAB) demo

# The same story on a file system with several clients (GlusterFS over FUSE; root): the
# bed comes up and goes down by itself.
demo-sharedfs: build
	$(ATOMIO_LAB) demo --sharedfs

# The whole test suite.
test: setup
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --release -- -D warnings
	$(CARGO) build --profile ci -p atomio-ffi -p atomio-oracle
	$(CARGO) test --workspace --profile ci
	FUZZ_OUT=target/fuzz-smoke scripts/fuzz 20
	$(MAKE) test-install CARGO_PROFILE=ci

# Coverage-guided fuzzing of the decoder and the servers (FUZZ_SECONDS per target).
FUZZ_SECONDS ?= 1800
fuzz:
	scripts/fuzz $(FUZZ_SECONDS)

# The full lock benchmark (minutes): embedded and TCP, every method and protocol.
bench-locks: build
	$(ATOMIO_LAB) bench locks --json out/bench-locks.json

# ----- installing as HPC sites do --------------------------------------------------------
#   make install PREFIX=/opt/atomio [DESTDIR=staging] [CARGO_PROFILE=release] [MPICC=mpicc]
# builds (cargo, then mpi/mpiio against that profile's libatomio.so) and installs
#   $(BINDIR)/atomio, $(LIBDIR)/libatomio.so, $(LIBDIR)/libatomio_mpiio.so (its RUNPATH is
#   $(LIBDIR), so it finds the installed libatomio.so), $(INCLUDEDIR)/atomio.h,
#   $(PKGCONFIGDIR)/atomio.pc (pkg-config --cflags --libs atomio; --variable=mpiio_preload
#   is the library to preload), man pages atomio(1) and atomio-mpiio(7) (environment, hints),
#   and an environment module $(MODULEDIR)/atomio/$(VERSION) (Tcl: Environment Modules, Lmod).
# MPIIO=0 leaves out libatomio_mpiio.so (no MPI needed).
# `make install-files` installs what is already built (no cargo); `make uninstall` removes it.
PREFIX        ?= /usr/local
DESTDIR       ?=
BINDIR        ?= $(PREFIX)/bin
LIBDIR        ?= $(PREFIX)/lib
INCLUDEDIR    ?= $(PREFIX)/include
MANDIR        ?= $(PREFIX)/share/man
PKGCONFIGDIR  ?= $(LIBDIR)/pkgconfig
MODULEDIR     ?= $(PREFIX)/share/modulefiles
MPIIO         ?= 1
CARGO_PROFILE ?= release
MPICC         ?= mpicc
OUT           := target/$(CARGO_PROFILE)
MPIIO_BUILD   := $(OUT)/mpiio-install
VERSION       := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)

install:
	$(CARGO) build --profile $(CARGO_PROFILE) --bin atomio
	$(CARGO) build --profile $(CARGO_PROFILE) -p atomio-ffi
	$(MAKE) install-files

install-files:
ifneq ($(MPIIO),0)
	$(MAKE) -C mpi/mpiio installed-lib MPICC="$(MPICC)" ATOMIO_LIB_DIR="$(abspath $(OUT))" \
	  BUILD="$(abspath $(MPIIO_BUILD))" INSTALL_RPATH="$(LIBDIR)"
endif
	install -d "$(DESTDIR)$(BINDIR)" "$(DESTDIR)$(LIBDIR)" "$(DESTDIR)$(INCLUDEDIR)" \
	  "$(DESTDIR)$(PKGCONFIGDIR)" "$(DESTDIR)$(MANDIR)/man1" "$(DESTDIR)$(MANDIR)/man7" \
	  "$(DESTDIR)$(MODULEDIR)/atomio"
	install -m 755 $(OUT)/atomio "$(DESTDIR)$(BINDIR)/atomio"
	install -m 755 $(OUT)/libatomio.so "$(DESTDIR)$(LIBDIR)/libatomio.so"
ifneq ($(MPIIO),0)
	install -m 755 $(MPIIO_BUILD)/installed/libatomio_mpiio.so "$(DESTDIR)$(LIBDIR)/libatomio_mpiio.so"
endif
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' packaging/modules/atomio \
	  > "$(DESTDIR)$(MODULEDIR)/atomio/$(VERSION)"
	install -m 644 include/atomio.h "$(DESTDIR)$(INCLUDEDIR)/atomio.h"
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' \
	  -e 's|@VERSION@|$(VERSION)|g' packaging/pkgconfig/atomio.pc.in > "$(DESTDIR)$(PKGCONFIGDIR)/atomio.pc"
	install -m 644 packaging/man/atomio.1 "$(DESTDIR)$(MANDIR)/man1/atomio.1"
	install -m 644 packaging/man/atomio-mpiio.7 "$(DESTDIR)$(MANDIR)/man7/atomio-mpiio.7"

uninstall:
	rm -f "$(DESTDIR)$(BINDIR)/atomio" "$(DESTDIR)$(LIBDIR)/libatomio.so" \
	  "$(DESTDIR)$(LIBDIR)/libatomio_mpiio.so" "$(DESTDIR)$(INCLUDEDIR)/atomio.h" \
	  "$(DESTDIR)$(PKGCONFIGDIR)/atomio.pc" "$(DESTDIR)$(MANDIR)/man1/atomio.1" \
	  "$(DESTDIR)$(MANDIR)/man7/atomio-mpiio.7" "$(DESTDIR)$(MODULEDIR)/atomio/$(VERSION)"
	-rmdir "$(DESTDIR)$(MODULEDIR)/atomio" 2>/dev/null

# Installs what this profile built into a fresh temporary prefix and uses it from there
# only (packaging/test-install.sh): a C program built with pkg-config, an MPI program with
# the installed libatomio_mpiio.so preloaded (2 ranks, verified), man pages, uninstall.
test-install:
	CARGO_PROFILE=$(CARGO_PROFILE) packaging/test-install.sh
