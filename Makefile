# Two entry points for a fresh Debian machine: `make run` and `make test`.
BUILD ?= build
JOBS ?= 2
# `make test` checks that the benchmarks compile and leaves them out of its build; `make build`
# and `make bench` build them.
BENCH_SYNTAX_ONLY = OFF
test: BENCH_SYNTAX_ONLY = ON

.PHONY: deps test-deps configure build run test test-tsan test-debian13 test-cuda-build cuda-syntax bench clean

deps:
	./scripts/install-deps.sh

test-deps:
	./scripts/install-deps.sh --test

configure: deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_BENCH_SYNTAX_ONLY=$(BENCH_SYNTAX_ONLY)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# Only what the main job needs, the library and the CLI: tests, benchmarks and examples
# are for `make test`.
run: configure
	cmake --build $(BUILD) -j $(JOBS) --target lockstep_cli
	$(BUILD)/tools/lockstep train

test: test-deps build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)
	$(MAKE) test-tsan
	$(MAKE) cuda-syntax

# The CUDA-only sources compiled without linking: needs the CUDA toolkit, not a GPU.
cuda-syntax: configure
	cmake --build $(BUILD) --target cuda_syntax

# Replicas on threads (the in-process group and DDP on it), and shards used by loader
# threads while a thread of their own downloads them, under ThreadSanitizer: any report
# fails the test.
TSAN_TESTS = replicas_tests ddp_replicas_tests ddp_worker data_tests
TSAN_RUN = Replicas|ArrivingShard|ShardDataset\.|RemoteShards\.FromNginx
test-tsan: deps
	cmake -S . -B $(BUILD)-tsan -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_SANITIZE=thread
	cmake --build $(BUILD)-tsan -j $(JOBS) --target $(TSAN_TESTS)
	TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 suppressions=$(CURDIR)/tests/tsan.supp" \
	  ctest --test-dir $(BUILD)-tsan -R '$(TSAN_RUN)' --output-on-failure -j $(JOBS)

# The suite against Debian 13's libtorch 2.6, in a Debian 13 root made (once per machine)
# with debootstrap: as root or with sudo.
test-debian13: test-deps
	./scripts/debian13-suite.sh

# lockstep's CUDA version built against Debian 13's CUDA libtorch in a root of its own, then
# gpu-check's phases and the same suite there; no GPU needed, not part of CI (docs/GPU.md).
test-cuda-build: test-deps
	./scripts/debian13-suite.sh --cuda

bench: build
	./scripts/install-deps.sh --bench
	$(BUILD)/bench/allreduce
	$(BUILD)/bench/launcher_latency
	$(BUILD)/bench/data_loader
	$(BUILD)/bench/ddp_cnn
	$(BUILD)/bench/sync_floor
	$(BUILD)/bench/recovery
	$(BUILD)/bench/eval_speed
	$(BUILD)/bench/live_recovery
	$(BUILD)/bench/heal

clean:
	rm -rf $(BUILD) $(BUILD)-tsan
