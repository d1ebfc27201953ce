# 1b — GNU make only (see INSTALL).
#
#   make              lib/lib1b.a and bin/1b-* for every cmd/1b-*.c
#   make check        build, then run every test (tests/run); ends with "N passed, N failed"
#   make install      PREFIX=/usr/local DESTDIR= : binaries, man pages, completions
#   make fuzz         build the libFuzzer harnesses (clang) into bin/fuzz/
#   make bench        build the benchmarks into bin/bench/
#   make clean
#
# Knobs for routes that are not built yet fail loudly instead of being ignored:
#   HIP=1 CUDA=1 XRT=1

PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
MANDIR  ?= $(PREFIX)/share/man
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR  ?= $(PREFIX)/share/zsh/vendor-completions

CC      ?= cc
OPT     ?= -O2
# -ffp-contract=off: no silent a*b+c -> fma; every fma in the numeric path is written as fmaf().
# -fno-math-errno only drops errno writes; it never changes a result bit. No -ffast-math, ever.
CFLAGS  ?= $(OPT) -g
CFLAGS  += -std=gnu11 -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -pthread \
           -ffp-contract=off -fno-math-errno -fno-strict-aliasing
CPPFLAGS += -Ilib -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64
PKGS    := libcjson libcurl libmicrohttpd libarchive libpcre2-8 libcrypto openblas
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CPPFLAGS += $(PKG_CFLAGS)
LDLIBS  += $(PKG_LIBS) -lm -lpthread
# only link the libraries a program uses (1b-load needs no OpenBLAS, whose threads start at load)
LDFLAGS += -Wl,--as-needed

ifeq ($(strip $(PKG_LIBS)),)
$(warning pkg-config found none of: $(PKGS) -- run scripts/setup first)
endif

ifeq ($(HIP),1)
$(error HIP=1: the hrx route (HIP kernels) is not part of this tree yet)
endif
ifeq ($(CUDA),1)
$(error CUDA=1: the nvcc build of the hrx kernels is not part of this tree yet)
endif
ifeq ($(XRT),1)
$(error XRT=1: the npu route (XRT dispatch) is not part of this tree yet)
endif

# ---- library ---------------------------------------------------------------
LIB_SRC   := $(sort $(wildcard lib/*.c) $(wildcard lib/kernels/*.c))
LIB_OBJ   := $(LIB_SRC:.c=.o)
LIB       := lib/lib1b.a

# SIMD kernels: one file per ISA level, compiled for that ISA only; chosen at run time.
lib/kernels/%-avx2.o: CFLAGS += -mavx2 -mfma -mf16c -mbmi2
lib/kernels/%-avx512.o: CFLAGS += -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mfma -mf16c -mbmi2

$(LIB): $(LIB_OBJ)
	rm -f $@
	$(AR) rcs $@ $^

# ---- commands --------------------------------------------------------------
CMD_SRC := $(sort $(wildcard cmd/1b-*.c))
CMDS    := $(patsubst cmd/%.c,bin/%,$(CMD_SRC))

bin/%: cmd/%.o $(LIB)
	@mkdir -p bin
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

# ---- unit tests (C) --------------------------------------------------------
UNIT_SRC := $(sort $(wildcard tests/unit/*.c))
UNITS    := $(patsubst tests/unit/%.c,bin/unit/%,$(UNIT_SRC))

bin/unit/%: tests/unit/%.o $(LIB)
	@mkdir -p bin/unit
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

# ---- sanitizer build of the library (for corpus replays and tests/unit under ASan) ----------
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
SAN_OBJ   := $(patsubst %.c,build/san/%.o,$(LIB_SRC))
SAN_LIB   := build/san/lib1b.a

build/san/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(SAN_FLAGS) -c -o $@ $<
build/san/lib/kernels/%-avx2.o: CFLAGS += -mavx2 -mfma -mf16c -mbmi2
build/san/lib/kernels/%-avx512.o: CFLAGS += -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mfma -mf16c -mbmi2

$(SAN_LIB): $(SAN_OBJ)
	rm -f $@
	$(AR) rcs $@ $^

# every command and the engine's unit tests under ASan/UBSan: tests/t5020-sanitize.sh runs
# the engine and serve tests against them (make check builds them)
SAN_CMDS  := $(patsubst cmd/%.c,bin/san/%,$(CMD_SRC))
SAN_UNITS := bin/san/unit/engine bin/san/unit/engine-fail

bin/san/unit/%: tests/unit/%.c $(SAN_LIB)
	@mkdir -p bin/san/unit
	$(CC) $(CPPFLAGS) $(CFLAGS) $(SAN_FLAGS) $(LDFLAGS) -o $@ $< $(SAN_LIB) $(LDLIBS)
bin/san/%: cmd/%.c $(SAN_LIB)
	@mkdir -p bin/san
	$(CC) $(CPPFLAGS) $(CFLAGS) $(SAN_FLAGS) $(LDFLAGS) -o $@ $< $(SAN_LIB) $(LDLIBS)

check: $(SAN_CMDS) $(SAN_UNITS)
-include $(wildcard bin/san/*.d bin/san/unit/*.d)

# ---- fuzz harnesses: libFuzzer under clang; the same files replay a corpus under ASan -------
FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz-*.c))
REPLAYS  := $(patsubst tests/fuzz/%.c,bin/replay/%,$(FUZZ_SRC))
FUZZERS  := $(patsubst tests/fuzz/%.c,bin/fuzz/%,$(FUZZ_SRC))

bin/replay/%: tests/fuzz/%.c tests/fuzz/replay-main.c $(SAN_LIB)
	@mkdir -p bin/replay
	$(CC) $(CPPFLAGS) $(CFLAGS) $(SAN_FLAGS) $(LDFLAGS) -o $@ $< tests/fuzz/replay-main.c \
	    $(SAN_LIB) $(LDLIBS)

FUZZ_CC   ?= clang
FUZZ_OBJ  := $(patsubst %.c,build/fuzz/%.o,$(LIB_SRC))
FUZZ_LIB  := build/fuzz/lib1b.a
FUZZ_SAN  := -fsanitize=address,undefined -fno-sanitize-recover=undefined

build/fuzz/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CPPFLAGS) -std=gnu11 -g -O1 -pthread -ffp-contract=off $(ISA) \
	    -fsanitize=fuzzer-no-link $(FUZZ_SAN) -c -o $@ $<
build/fuzz/lib/kernels/%-avx2.o: ISA = -mavx2 -mfma -mf16c -mbmi2
build/fuzz/lib/kernels/%-avx512.o: ISA = -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mfma -mf16c -mbmi2

$(FUZZ_LIB): $(FUZZ_OBJ)
	rm -f $@
	$(AR) rcs $@ $^

bin/fuzz/%: tests/fuzz/%.c $(FUZZ_LIB)
	@mkdir -p bin/fuzz
	$(FUZZ_CC) $(CPPFLAGS) -std=gnu11 -g -O1 -pthread -fsanitize=fuzzer $(FUZZ_SAN) \
	    -o $@ $< $(FUZZ_LIB) $(LDLIBS)

# ---- benchmarks ------------------------------------------------------------
BENCH_SRC := $(sort $(wildcard bench/*.c))
BENCHES   := $(patsubst bench/%.c,bin/bench/%,$(BENCH_SRC))

bin/bench/%: bench/%.o $(LIB)
	@mkdir -p bin/bench
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

# ---- top-level targets -----------------------------------------------------
all: $(LIB) $(CMDS)

check: all $(UNITS) $(REPLAYS)
	tests/run

fuzz: $(FUZZERS)

bench: all $(BENCHES)

MAN1 := $(sort $(wildcard man/*.1))
MAN7 := $(sort $(wildcard man/*.7))

install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man7 \
	    $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR)
	install -m 755 $(CMDS) $(DESTDIR)$(BINDIR)/
	install -m 644 $(MAN1) $(DESTDIR)$(MANDIR)/man1/
	install -m 644 $(MAN7) $(DESTDIR)$(MANDIR)/man7/
	install -m 644 completions/1b.bash $(DESTDIR)$(BASHCOMPDIR)/1b
	for c in $(notdir $(CMDS)); do ln -sf 1b $(DESTDIR)$(BASHCOMPDIR)/$$c; done
	install -m 644 completions/_1b $(DESTDIR)$(ZSHCOMPDIR)/_1b

clean:
	rm -rf bin build tests/tmp
	rm -f lib/*.o lib/kernels/*.o cmd/*.o tests/unit/*.o bench/*.o $(LIB) \
	      lib/*.d lib/kernels/*.d cmd/*.d tests/unit/*.d bench/*.d

# header dependencies
CPPFLAGS += -MMD -MP
-include $(wildcard lib/*.d lib/kernels/*.d cmd/*.d tests/unit/*.d bench/*.d) \
         $(wildcard build/san/lib/*.d build/san/lib/kernels/*.d build/fuzz/lib/*.d build/fuzz/lib/kernels/*.d)

.PHONY: all check fuzz bench install clean
.DEFAULT_GOAL := all
.SECONDARY:
