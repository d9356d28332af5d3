# dsv4q - GNU make build. One library (libdsv4q.a), one CLI (build/dsv4q),
# one cmocka binary per tests/test_*.c.
#
# The oracle is compiled twice from the same sources: every oracle/*.c that
# is not width-independent is built with -DDSV4Q_WIDTH=32 and =64 into
# build/f32 and build/f64; symbols carry the _f32/_f64 suffix (oracle/real.h).

CC      ?= cc
BUILD   := build
# -ffp-contract=off everywhere: no FMA contraction, so a*b+c rounds twice on
# every machine. Never -ffast-math (the oracle relies on IEEE semantics).
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -ffp-contract=off -Wno-format-truncation \
           -fno-fast-math -fopenmp -MMD -MP -I.
LDLIBS  := -lmpfr -lgmp -lsqlite3 -lsodium -ljansson -lz -lm -fopenmp -ldl

ORACLE_COMMON := oracle/formats.c oracle/boundary.c oracle/dmath.c oracle/weights.c oracle/run.c
ORACLE_WIDTH  := $(filter-out $(ORACLE_COMMON),$(wildcard oracle/*.c))
COMMON_SRCS   := $(ORACLE_COMMON) $(wildcard io/*.c receipts/*.c harness/*.c gates/*.c goldens/*.c) \
                 $(filter-out cli/main.c,$(wildcard cli/*.c))

OBJS := $(ORACLE_WIDTH:%.c=$(BUILD)/f32/%.o) $(ORACLE_WIDTH:%.c=$(BUILD)/f64/%.o) \
        $(COMMON_SRCS:%.c=$(BUILD)/common/%.o)
LIB  := $(BUILD)/libdsv4q.a
BIN  := $(BUILD)/dsv4q
TEST_SRCS := $(wildcard tests/test_*.c)
TESTS     := $(TEST_SRCS:tests/%.c=$(BUILD)/tests/%)
BENCH_SRCS := $(wildcard bench/bench_*.c)
BENCHES    := $(BENCH_SRCS:bench/%.c=$(BUILD)/bench/%)
PLUGIN_SRCS := $(wildcard tests/backends/*.c)
PLUGINS     := $(PLUGIN_SRCS:tests/backends/%.c=$(BUILD)/plugins/%.so)

.PHONY: all test demo bench deps clean check-deps golden-check docs
all: $(BIN)

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

$(BIN): cli/main.c $(LIB)
	$(CC) $(CFLAGS) $< $(LIB) $(LDLIBS) -o $@

$(BUILD)/tests/%: tests/%.c tests/testutil.h $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(LIB) $(LDLIBS) -lcmocka -o $@

$(BUILD)/bench/%: bench/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -O3 $< $(LIB) $(LDLIBS) -lopenblas -o $@

# Runs every test binary; each prints cmocka's summary. The last line is the
# plain "N passed, N failed" total that CI reads.
test: $(BIN) $(TESTS) $(PLUGINS)
	@./tests/run_all.sh $(TESTS)

demo: $(BIN)
	./$(BIN) sensitivity

bench: $(BENCHES)
	@for b in $(BENCHES); do ./$$b || exit 1; done

deps:
	@sh scripts/deps.sh

# Regenerate the generated parts of docs/ from the binary.
docs: $(BIN)
	@{ sed -n '1,/^<!-- generated -->$$/p' docs/boundaries.md; ./$(BIN) boundaries --markdown; } > docs/boundaries.md.tmp
	@mv docs/boundaries.md.tmp docs/boundaries.md

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

# Recompute every golden and compare bit-exactly with goldens/ (docs/goldens.md).
golden-check: $(BIN)
	./$(BIN) golden check

# Test backend plugins (tests/backends/*.c -> build/plugins/*.so): loaded by
# tests/test_qualify.c through dlopen, as a real engine's plugin would be.
$(BUILD)/plugins/%.so: tests/backends/%.c tests/backends/plugin_common.h harness/dsv4q_backend.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -shared -fPIC $< -o $@ -lm
plugins: $(PLUGINS)
