# Thin wrapper over CMake + ninja. `make test` and `make demo` install what
# they need (tools/setup-deps.sh), configure, build, then run.
BUILD ?= build
JOBS ?= 2
LIT ?= /usr/lib/llvm-19/build/utils/lit/lit.py
PYTHON ?= python3

.PHONY: all setup configure build test check-lit check-unit demo bench-import bench-plan bench-serving bench-serve-ranks check-long-prefill bench-contention bench-placement bench-placement-runtime bench-overlap bench-routing bench-roofline bench-quantization bench-vs-llamacpp bench-real-size bench-ab-kernels bench-serve-ab fuzz test-asan check-transformers check-lm-eval clean

all: build

setup:
	@tools/setup-deps.sh

configure: setup
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release > $(BUILD).configure.log 2>&1 \
	  || { cat $(BUILD).configure.log; exit 1; }
	@grep -E "^-- moe:" $(BUILD).configure.log

build: configure
	@ninja -C $(BUILD) -j$(JOBS)

check-lit: build
	$(PYTHON) $(LIT) -sv $(BUILD)/test

check-unit: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

# lit first, then GoogleTest through ctest; each prints its own counts.
test: check-lit check-unit

# The bundled trained example: compile it, generate text from a prompt, show
# tokens/s and how the run loaded the experts.
DEMO_MODEL ?= examples/kjv-moe
DEMO_PROMPT ?= And God said unto Moses,
demo: build
	@echo "== moe-import $(DEMO_MODEL) --summary"
	@$(BUILD)/bin/moe-import $(DEMO_MODEL) --summary
	@echo "== moe-compile $(DEMO_MODEL) -o $(BUILD)/demo-plan"
	@$(BUILD)/bin/moe-compile $(DEMO_MODEL) -o $(BUILD)/demo-plan
	@$(BUILD)/bin/moe-plan show $(BUILD)/demo-plan
	@echo "== moe-run --prompt \"$(DEMO_PROMPT)\" (sampled, temperature 0.7)"
	@$(BUILD)/bin/moe-run $(BUILD)/demo-plan --prompt "$(DEMO_PROMPT)" --max-new-tokens 220 \
	  --temperature 0.7 --seed 3 --expert-histogram
	@echo "== moe-serve $(BUILD)/demo-plan: one streaming request over HTTP"
	@$(PYTHON) tools/serve-demo.py $(BUILD)/bin $(BUILD)/demo-plan "$(DEMO_PROMPT)"

# Shape-only import of the full DeepSeek-V3 config (61 layers, 256 experts).
bench-import: build
	@tools/bench-import.sh $(BUILD)/bin/moe-import examples/configs/deepseek-v3

# moe-compile time and peak RSS, plan load time, on a generated ~1.7 GiB model.
bench-plan: build
	@tools/bench-plan.sh $(BUILD)/bin

bench-serving: build
	@tools/bench-serving.sh $(BUILD)/bin

# moe-bench --url at concurrency 1, 16, 64 against one-rank and mpirun
# --ep 4, --ep 4 --dp-attention and --tp 4 servers of the benchmark model
# (docs/parallelism.md).
bench-serve-ranks: build
	@python3 tools/bench-serve-ranks.py $(BUILD)/bin

# A 4,095-token prefill of the benchmark model on 4 ranks never trips a
# collective deadline shorter than the prefill (docs/parallelism.md).
check-long-prefill: build
	@python3 tools/check-long-prefill.py $(BUILD)/bin

# Batch-1 decode quiet and beside one busy loop per core, 5 rounds interleaved.
bench-contention: build
	@python3 tools/bench-contention.py $(BUILD)/bin

# Expert placement on a production-shaped trace: round-robin, greedy,
# replicas, DeepSeek's EPLB; planned on days 1-7, judged on day 8.
bench-placement: build
	@python3 tools/bench-placement.py $(BUILD)/bin --tokens 2048 --steps 20

bench-placement-runtime: build
	@python3 tools/bench-placement-runtime.py $(BUILD)/bin $(BUILD)/bench-placement-runtime
	@python3 tools/bench-placement-trace.py $(BUILD)/bin $(BUILD)/bench-placement-trace

bench-overlap: build
	@tools/setup-deps.sh --plots
	@python3 tools/bench-overlap.py $(BUILD)/bin $(BUILD)/bench-overlap

bench-routing: build
	@python3 tools/bench-routing.py $(BUILD)/bin $(BUILD)/bench-routing

bench-roofline: build
	@tools/bench-roofline.sh $(BUILD)/bin

# A kernel change measured in one process: the CPU kernels of git revision REF
# (default HEAD) against the working tree's, interleaved on the routed experts'
# GEMMs, and their outputs compared byte for byte (tools/ab-kernels.sh; about
# a minute to build both, then AB_FLAGS, e.g. AB_FLAGS="--tokens 0,8 --threads 2").
REF ?= HEAD
AB_FLAGS ?=
bench-ab-kernels: build
	@tools/ab-kernels.sh $(BUILD)/bin $(REF) $(AB_FLAGS)

# moe-serve of git revision REF against this build's over HTTP (moe-bench
# --url), rounds interleaved, tokens/s, TTFT and TPOT per concurrency
# (tools/bench-serve-ab.sh: builds REF's moe-serve once, minutes). E.g.
# make bench-serve-ab REF=c18e529 AB_FLAGS="--rounds 5 --per-client 16".
bench-serve-ab: build
	@tools/bench-serve-ab.sh $(BUILD)/bin $(REF) $(AB_FLAGS)

# Precision policies: bytes, KL/top-1/bits per byte vs f32 and decode speed on
# the trained example; int8/int4 vs bf16 decode on the medium model.
bench-quantization: build
	@tools/bench-quantization.sh $(BUILD)/bin

# Side by side with llama.cpp on the medium model, 2 threads: prefill, decode at
# batch 1, 8, 32, 64, bf16 and int8 vs q8_0, ROUNDS rounds interleaved. Builds
# llama.cpp (llama-cpp-python's source distribution, pip download) into
# build-llamacpp/ once, converts the model to GGUF there (about 20 minutes in all).
ROUNDS ?= 5
bench-vs-llamacpp: build
	@tools/setup-venv.sh
	@.venv/bin/python tools/bench-vs-llamacpp.py $(BUILD)/bin --rounds $(ROUNDS)

# Real-size shapes (Qwen3-30B-A3B, DeepSeek-V2-Lite) with random weights, ours
# w4a8/w8a8 against llama.cpp Q4_0/Q8_0, LAYERS layers, REAL_ROUNDS rounds
# interleaved: prefill, decode at several contexts, batched decode, first token,
# peak RSS, roofline (tools/bench-real-size.py). Writes plans and GGUFs into
# build-llamacpp/real-size (about 20 GB at 12 layers; checked before writing).
LAYERS ?= 12
REAL_ROUNDS ?= 3
bench-real-size: build
	@tools/setup-venv.sh
	@.venv/bin/python tools/bench-real-size.py $(BUILD)/bin --rounds $(REAL_ROUNDS) --layers $(LAYERS)

# Every lit test and GoogleTest against an ASan + UBSan build (build-asan/).
test-asan: setup
	@tools/test-asan.sh $(JOBS)

# Parity with Hugging Face transformers on random configurations of every
# model type (tools/parity-random-configs.py; installs torch and transformers
# into .venv once, about 1 GB). PARITY_SEEDS=A:B picks the seeds.
PARITY_SEEDS ?= 0:60
check-transformers: build
	@tools/setup-venv.sh
	@.venv/bin/python tools/parity-random-configs.py $(BUILD)/bin --seeds $(PARITY_SEEDS)

# lm-evaluation-harness against moe-serve (test/e2e/lm-eval.test): installs
# lm_eval into .venv-lmeval once (about 150 MB, no torch), then runs the
# test, which `make test` otherwise reports UNSUPPORTED.
check-lm-eval: build
	@tools/setup-lmeval.sh
	$(PYTHON) $(LIT) -sv $(BUILD)/test --filter lm-eval

# FUZZ_SECONDS=60 per target by default.
fuzz: build
	@tools/fuzz.sh $(BUILD)/bin

clean:
	rm -rf $(BUILD) $(BUILD).configure.log build-asan build-asan.configure.log build-fuzz
