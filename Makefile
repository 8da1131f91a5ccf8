# The two commands a newcomer needs: `make demo` and `make test` (what CI runs).
CARGO ?= cargo
ATOMIO := target/release/atomio

.PHONY: demo test setup build bench-locks fuzz

setup:
	@scripts/setup

build: setup
	$(CARGO) build --release --bin atomio

# The main job on an embedded cluster: no daemons to start.
demo: build
	$(ATOMIO) demo

# The whole test suite.
test: setup
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --release -- -D warnings
	$(CARGO) build --profile ci -p atomio-ffi
	$(CARGO) test --workspace --profile ci
	FUZZ_OUT=target/fuzz-smoke scripts/fuzz 20

# Coverage-guided fuzzing of the decoder and the servers (FUZZ_SECONDS per target).
FUZZ_SECONDS ?= 1800
fuzz:
	scripts/fuzz $(FUZZ_SECONDS)

# The full lock benchmark (minutes): embedded and TCP, every method and protocol.
bench-locks: build
	$(ATOMIO) bench locks --json out/bench-locks.json
