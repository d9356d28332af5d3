# dsv4q - GNU make build. One library (libdsv4q.a), one CLI (build/dsv4q),
# one cmocka binary per tests/test_*.c.
#
# The oracle is compiled twice from the same sources: every oracle/*.c that
# is not width-independent (and every operator descriptor, harness/ops/) is
# built with -DDSV4Q_WIDTH=32 and =64 into build/f32 and build/f64; symbols
# carry the _f32/_f64 suffix (oracle/width.h).

CC      ?= cc
BUILD   := build
# `make asan` (= `make test SAN=1`): the whole tree and every test under
# AddressSanitizer + UBSan into build/asan, halting on the first finding
# (-fno-sanitize-recover=all; no suppressions for the project's code).
ifeq ($(SAN),1)
BUILD   := build/asan
SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
endif
# `make fuzz`: the library with clang + ASan + UBSan + libFuzzer coverage into
# build/fuzz, and one libFuzzer binary per fuzz/fuzz_*.c (docs/robustness.md).
ifeq ($(FUZZ),1)
CC      := clang
BUILD   := build/fuzz
SANFLAGS := -fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=all -fno-omit-frame-pointer -Wno-error
endif
# -ffp-contract=off everywhere: no FMA contraction, so a*b+c rounds twice on
# every machine. Never -ffast-math (the oracle relies on IEEE semantics).
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -ffp-contract=off -Wno-format-truncation \
           -fno-fast-math -fopenmp -MMD -MP -I. -fPIC $(SANFLAGS)
# Clang (`make CC=clang`): its -Wmissing-field-initializers also flags the
# positional table rows that leave trailing fields zero (GCC does not), and
# it does not know GCC's -Wno-format-truncation.
ifneq ($(findstring clang,$(CC)),)
CFLAGS  += -Wno-missing-field-initializers -Wno-unknown-warning-option
endif
# `dsv4q --version` reports the flags that matter for reproducibility.
REPRO_FLAGS := $(CC) $(filter -O% -f% -m% -std=%,$(CFLAGS))
$(BUILD)/common/cli/cmdtab.o: CFLAGS += -DDSV4Q_REPRO_FLAGS='"$(REPRO_FLAGS)"'
LDLIBS  := -lmpfr -lgmp -lsqlite3 -lsodium -ljansson -lz -lm -fopenmp -ldl $(SANFLAGS)

ORACLE_COMMON := oracle/formats.c oracle/ggml_decode.c oracle/ggml_iq.c oracle/boundary.c oracle/dmath.c oracle/weights.c oracle/run.c oracle/stages.c \
                 oracle/pcg64.c oracle/engram_hash.c oracle/kvlayout.c oracle/kvcompare.c
ORACLE_WIDTH  := $(filter-out $(ORACLE_COMMON),$(wildcard oracle/*.c))
# The operator descriptors (harness/ops/<name>.c) are compiled at both widths
# too: their oracle adapters are width code (harness/ops/op.h).
OPS_COMMON    := harness/ops/ops.c harness/ops/case_build.c harness/ops/stage_ops.c
OPS_WIDTH     := $(filter-out $(OPS_COMMON),$(wildcard harness/ops/*.c))
WIDTH_SRCS    := $(ORACLE_WIDTH) $(OPS_WIDTH)
COMMON_SRCS   := $(wildcard base/*.c) $(ORACLE_COMMON) \
                 $(filter-out $(OPS_WIDTH),$(wildcard io/*.c receipts/*.c harness/*/*.c backends/cpuref/*.c gates/*.c goldens/*.c)) \
                 $(filter-out cli/main.c,$(wildcard cli/*.c))

OBJS := $(WIDTH_SRCS:%.c=$(BUILD)/f32/%.o) $(WIDTH_SRCS:%.c=$(BUILD)/f64/%.o) \
        $(COMMON_SRCS:%.c=$(BUILD)/common/%.o)
LIB  := $(BUILD)/libdsv4q.a
# The same objects (all -fPIC) as a shared library: soname libdsv4q.so.1
# (ABI v1); build/libdsv4q.so.1 links to it so programs run from build/.
SOLIB := $(BUILD)/libdsv4q.so
BIN  := $(BUILD)/dsv4q
TEST_SRCS := $(wildcard tests/test_*.c)
TESTS     := $(TEST_SRCS:tests/%.c=$(BUILD)/tests/%)
BENCH_SRCS := $(wildcard bench/bench_*.c)
BENCHES    := $(BENCH_SRCS:bench/%.c=$(BUILD)/bench/%)
PLUGIN_SRCS := $(wildcard tests/backends/*.c)
PLUGINS     := $(PLUGIN_SRCS:tests/backends/%.c=$(BUILD)/plugins/%.so) $(BUILD)/plugins/v1_good.so \
               $(BUILD)/plugins/engine_v2.so

.PHONY: all test demo bench deps pydeps clean check-deps golden-check docs asan fuzz install
all: $(BIN) $(SOLIB)

asan:
	@$(MAKE) --no-print-directory SAN=1 test

FUZZ_SRCS := $(wildcard fuzz/fuzz_*.c)
FUZZERS   := $(FUZZ_SRCS:fuzz/%.c=$(BUILD)/%)
fuzz:
	@$(MAKE) --no-print-directory FUZZ=1 fuzz-targets
fuzz-targets: $(FUZZERS)
$(BUILD)/fuzz_%: fuzz/fuzz_%.c fuzz/fuzzutil.h $(LIB)
	$(CC) $(CFLAGS) -fsanitize=fuzzer $< $(LIB) $(LDLIBS) -o $@

$(BUILD)/f32/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DDSV4Q_WIDTH=32 -c $< -o $@
$(BUILD)/f64/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DDSV4Q_WIDTH=64 -c $< -o $@
$(BUILD)/common/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(LIB): $(OBJS)
	@rm -f $@
	ar rcs $@ $^

# The git commit receipts record (receipts/version.h), baked into the library
# at build time: a library loaded by Python or installed elsewhere must not
# ask git about the directory of whatever executable loaded it. The stamp is
# rewritten only when the commit changes (so version.o is rebuilt only
# then); "unknown" when this tree is not the top of a git checkout.
STAMP := $(BUILD)/gitcommit.h
$(STAMP): FORCE
	@mkdir -p $(dir $@); c=unknown; \
	if [ "$$(git -C '$(CURDIR)' rev-parse --show-toplevel 2>/dev/null)" = "$$(cd '$(CURDIR)' && pwd -P)" ]; then \
	  c=$$(git -C '$(CURDIR)' rev-parse --short HEAD 2>/dev/null) || c=unknown; fi; \
	printf '#define DSV4Q_BUILD_COMMIT "%s"\n' "$${c:-unknown}" > $@.tmp; \
	if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi
FORCE:
.PHONY: FORCE
$(BUILD)/common/receipts/version.o: $(STAMP)
$(BUILD)/common/receipts/version.o: CFLAGS += -include $(STAMP)

$(SOLIB): $(OBJS)
	$(CC) -shared -Wl,-soname,libdsv4q.so.1 -o $@ $^ $(LDLIBS)
	@ln -sf libdsv4q.so $(BUILD)/libdsv4q.so.1

$(BIN): cli/main.c $(LIB)
	$(CC) $(CFLAGS) $< $(LIB) $(LDLIBS) -o $@

$(BUILD)/tests/%: tests/%.c tests/testutil.h tests/tinyfix.h $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DDSV4Q_TEST_BUILD='"$(BUILD)"' $< $(LIB) $(LDLIBS) -lcmocka -o $@

$(BUILD)/bench/%: bench/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -O3 $< $(LIB) $(LDLIBS) -lopenblas -o $@

# The MPI driver (mpi/, docs/mpi.md): its own binary, built with mpicc when
# Open MPI is installed (libopenmpi-dev); the library and build/dsv4q never
# link MPI, so a build without it works. tests/mpi_check.sh runs it (and
# skips, or fails under CI=true, without it).
MPICC   := $(shell command -v mpicc 2>/dev/null)
MPI_BIN := $(BUILD)/dsv4q-mpi
MPI_SRCS := $(wildcard mpi/*.c)
.PHONY: mpi
ifneq ($(MPICC),)
mpi: $(MPI_BIN)
$(MPI_BIN): $(MPI_SRCS) $(wildcard mpi/*.h) $(LIB)
	OMPI_CC=$(CC) $(MPICC) $(filter-out -MMD -MP,$(CFLAGS)) $(MPI_SRCS) $(LIB) $(LDLIBS) -o $@
else
MPI_BIN :=
mpi:
	@echo "make mpi: mpicc not found: install libopenmpi-dev and openmpi-bin (sh scripts/deps.sh)" >&2; exit 1
endif
# The install and Python checks load the plain shared library into pkg-config
# consumers and CPython, and the recipe check (scripts/recipe-check.sh) adds
# an operator to a scratch copy of the tree and builds it: not in the
# sanitizer or fuzz builds. tests/llamacpp_tools_check.sh checks the llama.cpp
# scripts' Python choice and argument checks (no llama.cpp needed).
ifeq ($(SAN)$(FUZZ),)
PY_TESTS := tests/install_check.sh tests/pytest_check.sh scripts/recipe-check.sh tests/llamacpp_tools_check.sh \
            tests/mpi_check.sh
endif
# Runs every test binary; each prints cmocka's summary. The last line is the
# plain "N passed, N failed" total that CI reads.
test: $(BIN) $(TESTS) $(PLUGINS) $(SOLIB) $(MPI_BIN)
	@sh scripts/check-layers.sh
	@sh scripts/gen-ops.sh --check
	@sh scripts/check-refs.sh
	@DSV4Q_TEST_BUILD=$(BUILD) ./tests/run_all.sh $(TESTS) $(PY_TESTS)

demo: $(BIN)
	./$(BIN) sensitivity

# bench_memory measures one run per process (its peak only grows), so it
# runs once per row of BENCH_MEMORY (CONFIG WIDTH PROMPT DECODE [MAX_POS
# [CHUNK]]): one call and chunks of 512, each width (docs/model.md).
BENCH_MEMORY := "tiny 64 4000 4" "tiny 64 4000 4 4004 512" "tiny 32 4000 4" "tiny 32 4000 4 4004 512"
bench: $(BENCHES)
	@for b in $(filter-out %/bench_memory,$(BENCHES)); do ./$$b || exit 1; done
	@for a in $(BENCH_MEMORY); do OMP_NUM_THREADS=1 ./$(BUILD)/bench/bench_memory $$a || exit 1; done

deps:
	@sh scripts/deps.sh

# Python test dependencies (tests/requirements.txt, from PyPI) in a venv
# under build/; tests/run_all.sh puts build/venv/bin first on PATH, so the
# tests' `python3` is this one. Re-run when the requirements file changes.
VENV := $(BUILD)/venv
pydeps: $(VENV)/.stamp
$(VENV)/.stamp: tests/requirements.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --disable-pip-version-check -r tests/requirements.txt
	@touch $@

# Regenerate the generated parts of docs/ from the binary.
docs: $(BIN)
	@{ sed -n '1,/^<!-- generated -->$$/p' docs/boundaries.md; ./$(BIN) boundaries --markdown; } > docs/boundaries.md.tmp
	@mv docs/boundaries.md.tmp docs/boundaries.md
	@{ sed -n '1,/^<!-- generated -->$$/p' docs/backends.md; ./$(BIN) qualify --list-ops --markdown; } > docs/backends.md.tmp
	@mv docs/backends.md.tmp docs/backends.md
	@{ sed -n '1,/^ \* <!-- generated: dsv4q qualify --list-ops --header/p' abi/dsv4q_backend.h; \
	   ./$(BIN) qualify --list-ops --header; sed -n '/^ \* <!-- end generated -->$$/,$$p' abi/dsv4q_backend.h; } > abi/dsv4q_backend.h.tmp
	@mv abi/dsv4q_backend.h.tmp abi/dsv4q_backend.h
	@{ sed -n '1,/^<!-- generated: dsv4q stages --markdown -->$$/p' docs/captures.md; ./$(BIN) stages --markdown; } > docs/captures.md.tmp
	@mv docs/captures.md.tmp docs/captures.md
	@{ sed -n '1,/^<!-- generated: dsv4q help --markdown/p' README.md; ./$(BIN) help --markdown; \
	   sed -n '/^<!-- end generated -->$$/,$$p' README.md; } > README.md.tmp
	@mv README.md.tmp README.md

clean:
	rm -rf $(BUILD)

# make install PREFIX=/usr/local (DESTDIR honoured): the static and shared
# library, the public headers under include/dsv4q/ (the ABI header, the C API,
# the oracle, GGML-decode, GGUF-reader and metrics headers, keeping their
# oracle/ io/ harness/ paths) and
# lib/pkgconfig/dsv4q.pc (`pkg-config --cflags --libs dsv4q`).
PREFIX ?= /usr/local
PUB_HEADERS := abi/dsv4q_backend.h harness/dsv4q_backend.h cli/dsv4q_capi.h harness/measure/metrics.h oracle/ops.h oracle/ops.inc oracle/both.h oracle/width.h \
               oracle/weights.h oracle/formats.h oracle/boundary.h oracle/ggml_decode.h oracle/ggml_decode.inc io/gguf.h
install: $(LIB) $(SOLIB)
	@d=$(DESTDIR)$(PREFIX); mkdir -p $$d/lib/pkgconfig $$d/include/dsv4q/oracle $$d/include/dsv4q/harness && \
	install -m 644 $(LIB) $$d/lib/libdsv4q.a && install -m 755 $(SOLIB) $$d/lib/libdsv4q.so.1 && \
	ln -sf libdsv4q.so.1 $$d/lib/libdsv4q.so && mkdir -p $$d/share/dsv4q/gates && install -m 644 gates/default.json $$d/share/dsv4q/gates/ && \
	for h in $(PUB_HEADERS); do install -D -m 644 $$h $$d/include/dsv4q/$$h || exit 1; done && \
	sed -e 's|@PREFIX@|$(PREFIX)|' -e "s|@VERSION@|$$(sed -n 's/.*DSV4Q_VERSION *\"\([^\"]*\)\".*/\1/p' receipts/version.h | head -1)|" \
	    scripts/dsv4q.pc.in > $$d/lib/pkgconfig/dsv4q.pc && echo "installed dsv4q into $$d"

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

# Recompute every golden and compare bit-exactly with goldens/ (docs/goldens.md).
golden-check: $(BIN)
	./$(BIN) golden check

# Test backend plugins (tests/backends/*.c -> build/plugins/*.so): loaded by
# tests/test_qualify.c through dlopen, as a real engine's plugin would be.
# Never instrumented (foreign engine code: crash.so must die of a real
# SIGSEGV, not of UBSan's report, in the sanitizer build too).
$(BUILD)/plugins/%.so: tests/backends/%.c tests/backends/plugin_common.h abi/dsv4q_backend.h harness/dsv4q_backend.h
	@mkdir -p $(dir $@)
	$(CC) $(filter-out $(SANFLAGS),$(CFLAGS)) -shared -fPIC $< -o $@ -lm
# The same good.c built against the ABI v1 header as released (tests/backends/v1):
# a plugin built before ABI v2 must keep loading (tests/test_engines.c).
$(BUILD)/plugins/v1_good.so: tests/backends/good.c tests/backends/plugin_common.h tests/backends/v1/harness/dsv4q_backend.h
	@mkdir -p $(dir $@)
	$(CC) -Itests/backends/v1 $(filter-out $(SANFLAGS),$(CFLAGS)) -shared -fPIC $< -o $@ -lm
# The worked example engine of docs/engines.md (self-contained: the ABI header only).
$(BUILD)/plugins/engine_v2.so: examples/engine_v2.c abi/dsv4q_backend.h
	@mkdir -p $(dir $@)
	$(CC) $(filter-out $(SANFLAGS),$(CFLAGS)) -shared -fPIC $< -o $@ -lm
plugins: $(PLUGINS)

# --- CUDA backend (backends/cuda/, docs/cuda.md) ---------------------------
# `make cuda` builds build/plugins/libdsv4q_cuda.so with nvcc (found on PATH
# or in /usr/local/cuda/bin; override with NVCC=...), and skips it with a
# message when there is none. The CUDA runtime is linked statically, so the
# plugin loads on a machine without a GPU driver (init() then reports "no
# CUDA device"). `make cuda-emu` builds the same kernel sources for the CPU
# fiber emulator (backends/cuda/dqc_emu.h) with a C++ compiler: CI checks
# the kernels' logic with it. Both are prerequisites of
# tests/test_cuda_plugin.c when their compiler exists. `make cuda-bench`
# builds the per-operator GPU timings (scripts/gpu-check.sh runs them).
ifndef NVCC
NVCC := $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
endif
EMU_CXX := $(shell command -v g++ 2>/dev/null || command -v c++ 2>/dev/null)
# The sanitizer and fuzz builds check the C tree; the CUDA plugin and its
# C++ emulation are not built there (not instrumented: the emulator's fiber
# stacks, freed by process exit, read as leaks).
ifneq ($(SAN)$(FUZZ),)
NVCC :=
EMU_CXX :=
endif

CUDA_SRCS   := $(filter-out backends/cuda/bench_cuda.cu,$(wildcard backends/cuda/*.cu))
CUDA_OBJS   := $(CUDA_SRCS:backends/cuda/%.cu=$(BUILD)/cuda/%.o)
CUDA_PLUGIN := $(BUILD)/plugins/libdsv4q_cuda.so
CUDA_BENCH  := $(BUILD)/cuda/bench_cuda
# sm_90 machine code for Hopper (H100/H200) + compute_80 PTX the driver can
# compile for any later GPU.
CUDA_ARCH   ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=compute_80
# --fmad=false: no implicit FMA contraction (a*b+c rounds twice, as in the
# oracle's -ffp-contract=off); the GEMM block dots use explicit fma().
NVCCFLAGS   ?= -O3
NVCC_ALL    := $(NVCCFLAGS) -std=c++17 --fmad=false $(CUDA_ARCH) -Xcompiler -fPIC,-fvisibility=hidden,-ffp-contract=off \
               -I. -MMD -MP
# The emulation build is C++ (g++ is not pinned by scripts/deps.sh): warnings
# are shown, not fatal.
CUDA_EMU_PLUGIN := $(BUILD)/plugins/libdsv4q_cuda_emu.so
CUDA_EMU_OBJS   := $(CUDA_SRCS:backends/cuda/%.cu=$(BUILD)/cuda-emu/%.o) $(BUILD)/cuda-emu/dqc_emu.o
EMU_CXXFLAGS    := -std=c++17 -O2 -g -fPIC -fvisibility=hidden -ffp-contract=off -fno-fast-math -DDQC_EMU \
                   -Wall -Wextra -I. -MMD -MP

.PHONY: cuda cuda-emu cuda-bench
$(BUILD)/cuda/%.o: backends/cuda/%.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_ALL) -c $< -o $@
$(CUDA_PLUGIN): $(CUDA_OBJS) backends/cuda/exports.map
	@mkdir -p $(dir $@)
	$(NVCC) -shared -cudart static -o $@ $(CUDA_OBJS) -Xlinker --version-script=backends/cuda/exports.map \
	    -Xlinker --exclude-libs,ALL -lpthread -ldl -lrt
CUDA_BENCH_OBJS := $(filter-out $(BUILD)/cuda/plugin.o,$(CUDA_OBJS))
$(CUDA_BENCH): backends/cuda/bench_cuda.cu $(CUDA_BENCH_OBJS)
	$(NVCC) $(NVCC_ALL) -o $@ backends/cuda/bench_cuda.cu $(CUDA_BENCH_OBJS) -cudart static -lpthread -ldl -lrt
$(BUILD)/cuda-emu/%.o: backends/cuda/%.cu
	@mkdir -p $(dir $@)
	$(EMU_CXX) -x c++ $(EMU_CXXFLAGS) -c $< -o $@
$(BUILD)/cuda-emu/dqc_emu.o: backends/cuda/dqc_emu.cpp
	@mkdir -p $(dir $@)
	$(EMU_CXX) $(EMU_CXXFLAGS) -c $< -o $@
$(CUDA_EMU_PLUGIN): $(CUDA_EMU_OBJS) backends/cuda/exports.map
	@mkdir -p $(dir $@)
	$(EMU_CXX) -shared -o $@ $(CUDA_EMU_OBJS) -Wl,--version-script=backends/cuda/exports.map

ifneq ($(NVCC),)
cuda: $(CUDA_PLUGIN)
cuda-bench: $(CUDA_BENCH)
$(BUILD)/tests/test_cuda_plugin: $(CUDA_PLUGIN)
else
cuda:
	@echo "cuda: nvcc not found (PATH, /usr/local/cuda/bin): skipping the CUDA plugin (backends/cuda/); set NVCC=/path/to/nvcc to build it"
cuda-bench:
	@echo "cuda-bench: nvcc not found: skipping the CUDA benchmark"
endif
ifneq ($(EMU_CXX),)
cuda-emu: $(CUDA_EMU_PLUGIN)
$(BUILD)/tests/test_cuda_plugin: $(CUDA_EMU_PLUGIN)
else
cuda-emu:
	@echo "cuda-emu: no C++ compiler (g++/c++): skipping the CPU emulation build of backends/cuda/"
endif
$(BUILD)/tests/test_cuda_plugin: backends/cuda/dsv4q_cuda_debug.h backends/cuda/dqc_bits.h
test: cuda cuda-emu
