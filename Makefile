# Two entry points for a fresh Debian machine: `make run` and `make test`.
BUILD ?= build
JOBS ?= 2

.PHONY: deps build run test bench clean

deps:
	./scripts/install-deps.sh

build: deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j $(JOBS)

run: build
	$(BUILD)/tools/lockstep train

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

bench: build
	./scripts/install-deps.sh --bench
	$(BUILD)/bench/allreduce
	$(BUILD)/bench/data_loader
	$(BUILD)/bench/ddp_cnn

clean:
	rm -rf $(BUILD)
