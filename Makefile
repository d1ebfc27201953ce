# 1b — GNU make only (see INSTALL).
#
#   make              lib/lib1b.a and bin/1b-* for every cmd/1b-*.c
#   make check        build, then run every test (tests/run); ends with "N passed, N failed"
#   make install      PREFIX=/usr/local DESTDIR= : binaries, man pages, completions, the
#                     default prompt set of 1b-report (share/1b/prompts.jsonl)
#   make fuzz         build the libFuzzer harnesses (clang) into bin/fuzz/
#   make bench        build the benchmarks into bin/bench/
#   make lint         clang's static analyzer over lib/ and cmd/, shellcheck over the scripts
#   make clean
#
# Route knobs:
#   CUDA=1            the hrx route's GPU kernels through nvcc (NVCC, CUDA_PATH)
#   HIP=1             the same kernel sources through hipcc (HIPCC)
#   XRT=1             the npu route's device side through XRT (libxrt-dev; XRT_INC)
# hrx-sim and npu-sim (the hrx kernels and the Q4NX arithmetic on the host) are in every build.

PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
MANDIR  ?= $(PREFIX)/share/man
DATADIR ?= $(PREFIX)/share
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR  ?= $(PREFIX)/share/zsh/vendor-completions

CC      ?= cc
CXX     ?= g++
NVCC    ?= nvcc
HIPCC   ?= hipcc
CUDA_PATH ?= /usr/local/cuda
# CFLAGS, CPPFLAGS, LDFLAGS and LDLIBS are the user's (optimisation, debugging, warnings, -march,
# extra include and library paths): `make CFLAGS=...` replaces them and nothing else. What the
# build needs is kept in override variables that the command line cannot change, and is placed
# around the user's flags (git's BASIC_CFLAGS/ALL_CFLAGS pattern): warnings before them, so a
# user's -Wno-... or -Werror works; the flags the arithmetic needs after them, so they win.
OPT     ?= -O2
CFLAGS  ?= $(OPT) -g
FUZZ_CC ?= clang
FUZZ_CXX ?= clang++
FUZZ_CFLAGS ?= -g -O1
# the C++ of lib/hrx/ (hrx-sim's executor and kernels), nvcc's and hipcc's: the user's, like CFLAGS
CXXFLAGS ?= $(OPT) -g
NVCCFLAGS ?= -O2
HIPCCFLAGS ?= -O2
override OB_WARN := -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers
# The bits: -ffp-contract=off, no silent a*b+c -> fma (every fma in the numeric path is written as
# fmaf()); the -fno-/-f flags undo each part of -ffast-math a user may have given (reassociation,
# reciprocals, finite-only math, unsigned zeros); -fno-math-errno only drops errno writes and
# never changes a result bit. -Ofast and -mdaz-ftz are refused below: they also link
# crtfastmath.o, which flushes subnormals to zero at start-up whatever follows them.
override OB_EXACT := -std=gnu11 -pthread -fno-strict-aliasing -ffp-contract=off -fno-fast-math \
           -fno-unsafe-math-optimizations -fno-associative-math -fno-reciprocal-math \
           -fno-finite-math-only -fsigned-zeros -fno-math-errno
# The same for C++ (lib/hrx/: the kernels compiled for hrx-sim, its executor), and what the
# project's C++ may not use: exceptions, RTTI, thread-safe statics (so it links with cc and
# needs no libstdc++).
override OB_EXACT_CXX := -std=gnu++17 -pthread -fno-strict-aliasing -ffp-contract=off \
           -fno-fast-math -fno-unsafe-math-optimizations -fno-associative-math \
           -fno-reciprocal-math -fno-finite-math-only -fsigned-zeros -fno-math-errno \
           -fno-exceptions -fno-rtti -fno-threadsafe-statics
# nvcc (CUDA=1): no contraction, no flush to zero, correctly rounded division and square root,
# the host side as above; device code for each of CUDA_ARCH (compute capabilities without the
# dot: 80 A100, 90 H100/H200; one fatbin), so a build for one GPU compiles its code only.
CUDA_ARCH ?= 80 90
HIP_ARCH  ?= gfx90a gfx1030
override OB_EXACT_NVCC := -std=c++17 -x cu --fmad=false --ftz=false --prec-div=true \
           --prec-sqrt=true -Xcompiler -ffp-contract=off,-fno-fast-math,-fno-math-errno \
           $(foreach a,$(CUDA_ARCH),-gencode arch=compute_$a,code=sm_$a)
# hipcc (HIP=1): the same for clang's HIP; device code for each of HIP_ARCH (default gfx90a,
# MI200, and gfx1030, RDNA2): Debian 12's ROCm 5.2 has device libraries for gfx803..gfx940,
# gfx90a, gfx1010..gfx1036; gfx1150 / gfx1151 (Ryzen AI) need ROCm 6.3 or later (INSTALL).
# (not -fno-unsafe-math-optimizations: to clang it also means trapping math, which the GPU
# targets do not have and warn about; its other parts are given one by one)
override OB_EXACT_HIPCC := -std=c++17 -x hip -ffp-contract=off -fno-fast-math \
           -fno-associative-math -fno-reciprocal-math -fno-finite-math-only -fsigned-zeros \
           -fno-math-errno \
           -fno-gpu-flush-denormals-to-zero -fhip-fp32-correctly-rounded-divide-sqrt \
           $(foreach a,$(HIP_ARCH),--offload-arch=$a)
PKGS    := libcjson libcurl libmicrohttpd libarchive libpcre2-8 libcrypto openblas
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
override ALL_CPPFLAGS = -Ilib -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 $(OB_XRT_CPPFLAGS) $(CPPFLAGS) $(PKG_CFLAGS) -MMD -MP
# only link the libraries a program uses (1b-load needs no OpenBLAS, whose threads start at load)
override ALL_LDFLAGS = $(OB_WARN) $(CFLAGS) $(LDFLAGS) $(OB_EXACT) -Wl,--as-needed
override ALL_LDLIBS = $(PKG_LIBS) $(OB_XRT_LIBS) $(LDLIBS) -lm -lpthread

ifeq ($(strip $(PKG_LIBS)),)
$(warning pkg-config found none of: $(PKGS) -- run scripts/setup first)
endif

# SIMD kernels: one file per ISA level (lib/cpu/kernels/NAME-LEVEL.c, the host's row kernels
# lib/host/NAME-LEVEL.c, and the npu routes' host kernels lib/npu/NAME-LEVEL.c), compiled for
# that ISA only; the level is chosen at run time.
override OB_ISA_avx2   := -mavx2 -mfma -mf16c -mbmi2
override OB_ISA_avx512 := -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mfma -mf16c -mbmi2
ob_level = $(if $(filter lib/cpu/kernels/%-avx2.c lib/host/%-avx2.c lib/npu/%-avx2.c,$1),avx2,$(if \
    $(filter lib/cpu/kernels/%-avx512.c lib/host/%-avx512.c lib/npu/%-avx512.c,$1),avx512,base))

# GCC 12's loop vectorizer miscompiles the scalar reference's int8 dot products wherever VNNI is
# enabled (the AVX-512 set above, or a user's -march=native on a VNNI CPU): it narrows
# (nibble - 8) to unsigned char arithmetic, looks through the cast back to signed char and emits
# an unsigned x signed vpdpbusd (tests/portable/check.c hashes differently). So a GCC compile
# whose flags turn VNNI on gets -fno-tree-loop-vectorize; clang is not affected and has no such
# flag. $(call ob_vnni_guard,COMPILER,FLAGS)
ob_vnni_guard = $(shell $1 $2 -dM -E -x c /dev/null 2>/dev/null | \
    awk '/define __clang__ /{c=1} /define __AVX(512)?VNNI/{v=1} END{if (v && !c) print "-fno-tree-loop-vectorize"}')
# $(call ob_guard,TAG,COMPILER,FLAGS,LEVEL): the guard for one compiler and level, computed once
ob_guard = $(if $(filter override,$(origin OB_GUARD_$1_$4)),,$(eval override OB_GUARD_$1_$4 := \
    $(call ob_vnni_guard,$2,$3 $(OB_ISA_$4))))$(OB_GUARD_$1_$4)

# $(call ob_cflags,SOURCE): every flag a C file is compiled with
ob_cflags = $(OB_WARN) $(CFLAGS) $(OB_EXACT) $(OB_ISA_$(call ob_level,$1)) \
    $(call ob_guard,cc,$(CC),$(CPPFLAGS) $(CFLAGS) $(OB_EXACT),$(call ob_level,$1))
# every flag a C++ file of lib/hrx/ is compiled with (hrx-sim: no ISA flags, any x86-64)
ob_cxxflags = $(OB_WARN) $(CXXFLAGS) $(OB_EXACT_CXX) \
    $(call ob_guard,cxx,$(CXX),$(CPPFLAGS) $(CXXFLAGS) $(OB_EXACT_CXX),base)

# Refuse what the flags above cannot undo: a compile that still defines a fast-math macro or
# evaluates float in a wider type (-mfpmath=387; 16 is AVX512-FP16 evaluating _Float16 as itself,
# floats unchanged), and -Ofast / -mdaz-ftz.
ifneq ($(filter -Ofast -mdaz-ftz,$(CFLAGS) $(CPPFLAGS) $(LDFLAGS) $(FUZZ_CFLAGS)),)
$(error $(filter -Ofast -mdaz-ftz,$(CFLAGS) $(CPPFLAGS) $(LDFLAGS) $(FUZZ_CFLAGS)): refused: it links crtfastmath.o, which flushes subnormals and changes result bits; use -O3 (see INSTALL))
endif
ifneq ($(filter-out clean,$(or $(MAKECMDGOALS),all)),)
OB_FPCHECK := $(shell $(CC) $(CPPFLAGS) $(OB_WARN) $(CFLAGS) $(OB_EXACT) -dM -E -x c /dev/null 2>/dev/null | \
    awk '/define (__FAST_MATH__|__ASSOCIATIVE_MATH__|__RECIPROCAL_MATH__|__NO_SIGNED_ZEROS__) / || \
         /define __FINITE_MATH_ONLY__ 1/ || (/define __FLT_EVAL_METHOD__ / && $$3 != 0 && $$3 != 16) {print $$2}')
ifneq ($(OB_FPCHECK),)
$(error CFLAGS=$(CFLAGS): refused: the compiler still defines $(OB_FPCHECK) after 1b's flags; these change result bits (see INSTALL))
endif
OB_FPCHECK_CXX := $(shell $(CXX) $(CPPFLAGS) $(OB_WARN) $(CXXFLAGS) $(OB_EXACT_CXX) -dM -E -x c++ /dev/null 2>/dev/null | \
    awk '/define (__FAST_MATH__|__ASSOCIATIVE_MATH__|__RECIPROCAL_MATH__|__NO_SIGNED_ZEROS__) / || \
         /define __FINITE_MATH_ONLY__ 1/ || (/define __FLT_EVAL_METHOD__ / && $$3 != 0 && $$3 != 16) {print $$2}')
ifneq ($(OB_FPCHECK_CXX),)
$(error CXXFLAGS=$(CXXFLAGS): refused: the compiler still defines $(OB_FPCHECK_CXX) after 1b's flags; these change result bits (see INSTALL))
endif
endif
ifneq ($(filter -Ofast -mdaz-ftz,$(CXXFLAGS)),)
$(error $(filter -Ofast -mdaz-ftz,$(CXXFLAGS)): refused: it links crtfastmath.o, which flushes subnormals and changes result bits; use -O3 (see INSTALL))
endif

# XRT=1: the npu route's device side through XRT (lib/npu/xrt.c): libxrt-dev from Debian, whose
# pkg-config file names wrong paths (prefix=/usr//usr), so the headers' place is a knob of its
# own. Without it the npu row says how to build it; npu-sim is in every build.
XRT_INC ?= /usr/include/xrt
ifeq ($(XRT),1)
ifeq ($(wildcard $(XRT_INC)/xrt.h),)
$(error XRT=1: $(XRT_INC)/xrt.h not found: install libxrt-dev (apt-get install libxrt-dev) or set XRT_INC)
endif
override OB_XRT_CPPFLAGS := -DOB_HAVE_XRT -I$(XRT_INC)
override OB_XRT_LIBS := -lxrt_coreutil -lxrt_core
endif
# the objects that differ with a route knob are rebuilt when it changes (build/knobs holds the
# knobs of the last build)
override OB_KNOBS := XRT=$(XRT)
ifneq ($(filter-out clean,$(or $(MAKECMDGOALS),all)),)
$(shell mkdir -p build && { [ "$$(cat build/knobs 2>/dev/null)" = '$(OB_KNOBS)' ] || echo '$(OB_KNOBS)' > build/knobs; })
endif
OB_KNOB_OBJ := $(foreach f,lib/route lib/npu/backend-npu lib/npu/xrt,$f.o build/san/$f.o build/fuzz/$f.o)
$(OB_KNOB_OBJ): build/knobs

# every object of lib/, cmd/, tests/unit/ and bench/
%.o: %.c
	$(CC) $(ALL_CPPFLAGS) $(call ob_cflags,$<) -c -o $@ $<

# ---- the hrx routes (lib/hrx/) -------------------------------------------------
# One kernel source (*.hip, C++ through lib/hrx/shim.h) for three targets: hrx-sim (g++, in
# the library of every build), CUDA (nvcc, CUDA=1) and HIP (hipcc, HIP=1). gpu.hip is the GPU
# runtime (device memory, streams) and has no hrx-sim object; sim.cc is hrx-sim's executor.
# The GPU objects are linked into every program (not put in the library: nothing in it names
# them but weakly).
HRX_HIP     := $(filter-out lib/hrx/gpu.hip,$(sort $(wildcard lib/hrx/*.hip)))
HRX_SIM_OBJ := $(patsubst lib/hrx/%.hip,lib/hrx/sim-%.o,$(HRX_HIP)) lib/hrx/sim.o
HRX_GPU_OBJ :=
HRX_GPU_LIBS :=
ifeq ($(CUDA),1)
HRX_GPU_OBJ += $(patsubst lib/hrx/%.hip,lib/hrx/cuda-%.o,$(HRX_HIP) lib/hrx/gpu.hip)
HRX_GPU_LIBS += -L$(CUDA_PATH)/lib64 -lcudart_static -ldl -lrt
endif
ifeq ($(HIP),1)
HRX_GPU_OBJ += $(patsubst lib/hrx/%.hip,lib/hrx/hip-%.o,$(HRX_HIP) lib/hrx/gpu.hip)
HRX_GPU_LIBS += -lamdhip64
endif
HRX_GPU_LIBS += $(if $(HRX_GPU_OBJ),-lstdc++)
override OB_HRX_KNOBS := CUDA=$(CUDA) HIP=$(HIP)
# the GPU objects are compiled again when the architectures change
build/arch-knobs: FORCE
	@mkdir -p build; k='$(CUDA_ARCH) / $(HIP_ARCH)'; [ "$$(cat $@ 2>/dev/null)" = "$$k" ] || echo "$$k" > $@

lib/hrx/sim-%.o: lib/hrx/%.hip
	$(CXX) $(ALL_CPPFLAGS) $(call ob_cxxflags,$<) -x c++ -c -o $@ $<
lib/hrx/%.o: lib/hrx/%.cc
	$(CXX) $(ALL_CPPFLAGS) $(call ob_cxxflags,$<) -c -o $@ $<
lib/hrx/cuda-%.o: lib/hrx/%.hip build/arch-knobs
	$(NVCC) $(ALL_CPPFLAGS) $(NVCCFLAGS) $(OB_EXACT_NVCC) -c -o $@ $<
lib/hrx/hip-%.o: lib/hrx/%.hip build/arch-knobs
	$(HIPCC) $(ALL_CPPFLAGS) $(HIPCCFLAGS) $(OB_EXACT_HIPCC) -c -o $@ $<

# programs are linked again when CUDA= or HIP= changes (the file changes only then)
build/hrx-knobs: FORCE
	@mkdir -p build; k='$(OB_HRX_KNOBS)'; [ "$$(cat $@ 2>/dev/null)" = "$$k" ] || echo "$$k" > $@
FORCE:

# ---- library ---------------------------------------------------------------
# lib/*.c: model files, text, records, engine; lib/ROUTE/: one folder per route (cpu with its
# kernels, ref); lib/net/: HTTP client and server. lib/arith/ holds headers only.
LIB_DIRS  := lib lib/host lib/cpu lib/cpu/kernels lib/ref lib/net lib/hrx lib/npu
LIB_SRC   := $(sort $(foreach d,$(LIB_DIRS),$(wildcard $d/*.c)))
LIB_OBJ   := $(LIB_SRC:.c=.o) $(HRX_SIM_OBJ)
LIB       := lib/lib1b.a

$(LIB): $(LIB_OBJ)
	rm -f $@
	$(AR) rcs $@ $^

# ---- commands --------------------------------------------------------------
CMD_SRC := $(sort $(wildcard cmd/1b-*.c))
CMDS    := $(patsubst cmd/%.c,bin/%,$(CMD_SRC))

bin/%: cmd/%.o $(HRX_GPU_OBJ) $(LIB) build/hrx-knobs
	@mkdir -p bin
	$(CC) $(ALL_LDFLAGS) -o $@ $< $(HRX_GPU_OBJ) $(LIB) $(ALL_LDLIBS) $(HRX_GPU_LIBS)

# commands written in Python (cmd/1b-*.py: standard library only), installed like the others
# with the version of lib/1b.h; they run the C commands from their own directory
OB_VERSION := $(shell sed -n 's/^\#define OB_VERSION "\(.*\)"/\1/p' lib/1b.h)
PY_SRC  := $(sort $(wildcard cmd/1b-*.py))
PY_CMDS := $(patsubst cmd/%.py,bin/%,$(PY_SRC))

$(PY_CMDS): bin/%: cmd/%.py lib/1b.h
	@mkdir -p bin
	sed 's/@OB_VERSION@/$(OB_VERSION)/' $< > $@.tmp && chmod 755 $@.tmp && mv $@.tmp $@

# ---- unit tests (C) --------------------------------------------------------
UNIT_SRC := $(sort $(wildcard tests/unit/*.c))
UNITS    := $(patsubst tests/unit/%.c,bin/unit/%,$(UNIT_SRC))

bin/unit/%: tests/unit/%.o $(HRX_GPU_OBJ) $(LIB) build/hrx-knobs
	@mkdir -p bin/unit
	$(CC) $(ALL_LDFLAGS) -o $@ $< $(HRX_GPU_OBJ) $(LIB) $(ALL_LDLIBS) $(HRX_GPU_LIBS)

# C++ unit tests of lib/hrx/ (kernels of their own through shim.h, run by hrx-sim)
UNIT_CXX := $(sort $(wildcard tests/unit/*.cc))
UNITS    += $(patsubst tests/unit/%.cc,bin/unit/%,$(UNIT_CXX))

tests/unit/%.o: tests/unit/%.cc
	$(CXX) $(ALL_CPPFLAGS) $(call ob_cxxflags,$<) -c -o $@ $<

# ---- sanitizer build of the library (for corpus replays and tests/unit under ASan) ----------
# -O1 after CFLAGS (the last -O wins), the sanitizers' usual level: GCC 12 took 3 to 6 minutes
# a file at -O2 for the SIMD kernels and hrx-sim's mm under ASan (its dataflow over the
# instrumented code), about one at -O1; the build of make check was most of CI's time
SAN_FLAGS := -O1 -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
# a library file's flags in this build. The kernels (the SIMD files, hrx-sim's *.hip) go without
# UBSan's pointer-overflow check (as in the fuzz build) and with line tables alone for debug
# information (-g1: an ASan report still names file, line and function), which took GCC 12 most
# of their compile: the four largest SIMD files, kq and a8 at both levels, took 226 s, all ten
# now 120 s; sim-mm 39 s, now 23 s (a Zen 4). ASan still checks every access they make
SAN_KERNEL := -fno-sanitize=pointer-overflow -g1
ob_san_cflags = $(call ob_cflags,$1) $(SAN_FLAGS) \
    $(if $(filter base,$(call ob_level,$1)),,$(SAN_KERNEL))
SAN_OBJ   := $(patsubst %.c,build/san/%.o,$(LIB_SRC)) $(addprefix build/san/,$(HRX_SIM_OBJ))
SAN_LIB   := build/san/lib1b.a

build/san/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CPPFLAGS) $(call ob_san_cflags,$<) -c -o $@ $<

build/san/lib/hrx/sim-%.o: lib/hrx/%.hip
	@mkdir -p $(dir $@)
	$(CXX) $(ALL_CPPFLAGS) $(call ob_cxxflags,$<) $(SAN_FLAGS) $(SAN_KERNEL) -x c++ -c -o $@ $<
build/san/lib/hrx/%.o: lib/hrx/%.cc
	@mkdir -p $(dir $@)
	$(CXX) $(ALL_CPPFLAGS) $(call ob_cxxflags,$<) $(SAN_FLAGS) -c -o $@ $<

$(SAN_LIB): $(SAN_OBJ)
	rm -f $@
	$(AR) rcs $@ $^

# every command and the engine's unit tests under ASan/UBSan: tests/t5020-sanitize.sh runs
# the engine and serve tests against them, tests/t5040-hrx-kernels.sh the hrx kernels on
# hrx-sim (make check builds them)
SAN_CMDS  := $(patsubst cmd/%.c,bin/san/%,$(CMD_SRC))
SAN_UNITS := bin/san/unit/engine bin/san/unit/engine-fail bin/san/unit/hrx bin/san/unit/client

bin/san/unit/%: tests/unit/%.c $(SAN_LIB)
	@mkdir -p bin/san/unit
	$(CC) $(ALL_CPPFLAGS) $(ALL_LDFLAGS) $(call ob_cflags,$<) $(SAN_FLAGS) -o $@ $< \
	    $(SAN_LIB) $(ALL_LDLIBS)
bin/san/%: cmd/%.c $(SAN_LIB)
	@mkdir -p bin/san
	$(CC) $(ALL_CPPFLAGS) $(ALL_LDFLAGS) $(call ob_cflags,$<) $(SAN_FLAGS) -o $@ $< \
	    $(SAN_LIB) $(ALL_LDLIBS)

check: $(SAN_CMDS) $(SAN_UNITS)
-include $(wildcard bin/san/*.d bin/san/unit/*.d)

# ---- fuzz harnesses: libFuzzer under clang; the same files replay a corpus under ASan -------
FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz-*.c))
REPLAYS  := $(patsubst tests/fuzz/%.c,bin/replay/%,$(FUZZ_SRC))
FUZZERS  := $(patsubst tests/fuzz/%.c,bin/fuzz/%,$(FUZZ_SRC))

bin/replay/%: tests/fuzz/%.c tests/fuzz/replay-main.c $(SAN_LIB)
	@mkdir -p bin/replay
	$(CC) $(ALL_CPPFLAGS) $(ALL_LDFLAGS) $(call ob_cflags,$<) $(SAN_FLAGS) -o $@ $< \
	    tests/fuzz/replay-main.c $(SAN_LIB) $(ALL_LDLIBS)

FUZZ_OBJ  := $(patsubst %.c,build/fuzz/%.o,$(LIB_SRC)) $(addprefix build/fuzz/,$(HRX_SIM_OBJ))
FUZZ_LIB  := build/fuzz/lib1b.a
FUZZ_SAN  := -fsanitize=address,undefined -fno-sanitize-recover=undefined
# the flags of one library file in the fuzz build: the same arithmetic flags, ISA sets and guard.
# The SIMD files go without UBSan's pointer-overflow check: with it, clang 14 had spent 29
# minutes on kq-avx2.c alone when stopped (its unrolled address arithmetic), without it 36 s.
# ASan still checks those files' accesses, and the parsers keep the check
ob_fuzz_cflags = $(FUZZ_CFLAGS) $(OB_EXACT) $(OB_ISA_$(call ob_level,$1)) \
    $(call ob_guard,fuzz,$(FUZZ_CC),$(CPPFLAGS) $(FUZZ_CFLAGS) $(OB_EXACT),$(call ob_level,$1)) \
    -fsanitize=fuzzer-no-link $(FUZZ_SAN) \
    $(if $(filter base,$(call ob_level,$1)),,-fno-sanitize=pointer-overflow)

build/fuzz/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(ALL_CPPFLAGS) $(call ob_fuzz_cflags,$<) -c -o $@ $<

# the C++ of lib/hrx/ in the fuzz build: the same arithmetic flags, clang++
ob_fuzz_cxxflags = $(FUZZ_CFLAGS) $(OB_EXACT_CXX) -fsanitize=fuzzer-no-link $(FUZZ_SAN)

build/fuzz/lib/hrx/sim-%.o: lib/hrx/%.hip
	@mkdir -p $(dir $@)
	$(FUZZ_CXX) $(ALL_CPPFLAGS) $(ob_fuzz_cxxflags) -x c++ -c -o $@ $<
build/fuzz/lib/hrx/%.o: lib/hrx/%.cc
	@mkdir -p $(dir $@)
	$(FUZZ_CXX) $(ALL_CPPFLAGS) $(ob_fuzz_cxxflags) -c -o $@ $<

$(FUZZ_LIB): $(FUZZ_OBJ)
	rm -f $@
	$(AR) rcs $@ $^

# linked with UBSan's C++ runtime: the hrx-sim objects (C++) call its handlers
bin/fuzz/%: tests/fuzz/%.c $(FUZZ_LIB)
	@mkdir -p bin/fuzz
	$(FUZZ_CC) $(ALL_CPPFLAGS) $(call ob_fuzz_cflags,$<) -fsanitize=fuzzer \
	    -fsanitize-link-c++-runtime -o $@ $< $(FUZZ_LIB) $(ALL_LDLIBS)

# ---- benchmarks ------------------------------------------------------------
BENCH_SRC := $(sort $(wildcard bench/*.c))
BENCHES   := $(patsubst bench/%.c,bin/bench/%,$(BENCH_SRC))

bin/bench/%: bench/%.o $(HRX_GPU_OBJ) $(LIB) build/hrx-knobs
	@mkdir -p bin/bench
	$(CC) $(ALL_LDFLAGS) -o $@ $< $(HRX_GPU_OBJ) $(LIB) $(ALL_LDLIBS) $(HRX_GPU_LIBS)

# ---- lint: clang's static analyzer over lib/ and cmd/, shellcheck over the scripts ----------
# make lint prints one line per finding ("FILE:LINE:COL: SEVERITY: TEXT [CHECKER]", both
# tools) and fails when there is any; tests/t0015-lint.sh runs it in make check. Every C file
# the default build compiles (not the CUDA/HIP sources, not the C++ of lib/hrx/) is analysed
# on its own with the build's defines, include paths, C dialect and ISA flags, by LINT_CC
# (clang, whatever CC is: the analyzer is clang's; CFLAGS are not given, they may be gcc's),
# and every script on its own by SHELLCHECK, its project-wide choices in .shellcheckrc; so make
# -j runs them side by side, and a second run looks only at what changed since (build/lint/
# keeps each file's findings, with the headers and sourced scripts it depends on). A finding
# the tools get wrong is answered where it is: an annotation the analyzer understands (see
# lib/README) or a "# shellcheck disable=SCnnnn  # reason" on the line, each with its reason.
LINT_CC    ?= clang
SHELLCHECK ?= shellcheck
LINT_C     := $(LIB_SRC) $(CMD_SRC)
# the scripts the tests source (.shellcheckrc: shellcheck follows them from each, as -x does);
# every shell script (bench/serve-load is Python)
LINT_SH_SOURCED := tests/lib.sh tests/py/serve_env.sh tests/py/fixture_env.sh
LINT_SH    := tests/run $(LINT_SH_SOURCED) $(sort $(wildcard tests/t[0-9]*.sh scripts/*)) \
              bench/pack-vs-gguf bench/requant-quality .ci/run
LINT_C_OUT  = $(patsubst %.c,build/lint/%.txt,$(LINT_C))
LINT_SH_OUT = $(patsubst %,build/lint/sh/%.txt,$(LINT_SH))
# the flags of one C file for the analyzer: the build's, less the user's CFLAGS and the gcc guard
ob_lint_cflags = $(OB_WARN) $(OB_EXACT) $(OB_ISA_$(call ob_level,$1))

# the analyzer's findings for one file; a file it cannot compile fails the rule
build/lint/%.txt: %.c
	@mkdir -p $(dir $@)
	@$(LINT_CC) --analyze -o /dev/null -fno-caret-diagnostics \
	    $(filter-out -MMD -MP,$(ALL_CPPFLAGS)) -MMD -MP -MF build/lint/$*.d -MT $@ \
	    $(call ob_lint_cflags,$<) $< 2> $@.log || { cat $@.log >&2; rm -f $@.log; exit 1; }
	@sed -n '/: warning: /p' $@.log > $@ && rm -f $@.log

# shellcheck's findings for one script (exit 1: findings; above 1: it could not check it)
build/lint/sh/%.txt: % .shellcheckrc $(LINT_SH_SOURCED)
	@mkdir -p $(dir $@)
	@$(SHELLCHECK) -f gcc $< > $@.log; rc=$$?; \
	    if [ $$rc -gt 1 ]; then cat $@.log >&2; rm -f $@.log; exit 1; fi; mv $@.log $@

# every finding once (one in a header is found from each file that includes it); /dev/null: an
# empty list (LINT_C= or LINT_SH=, as tests/t0015-lint.sh runs one tool alone) reads nothing
lint: $(LINT_C_OUT) $(LINT_SH_OUT)
	@c=$$(cat /dev/null $(LINT_C_OUT) | awk '!seen[$$0]++'); s=$$(cat /dev/null $(LINT_SH_OUT)); \
	    nc=$$(printf '%s' "$$c" | grep -c .); ns=$$(printf '%s' "$$s" | grep -c .); \
	    [ -z "$$c" ] || printf '%s\n' "$$c"; [ -z "$$s" ] || printf '%s\n' "$$s"; \
	    echo "lint: $$nc findings of $(LINT_CC) --analyze in $(words $(LINT_C)) C files," \
	        "$$ns of $(SHELLCHECK) in $(words $(LINT_SH)) scripts" >&2; \
	    [ $$((nc + ns)) -eq 0 ]

-include $(wildcard $(patsubst %.c,build/lint/%.d,$(LINT_C)))

# ---- top-level targets -----------------------------------------------------
all: $(LIB) $(CMDS) $(PY_CMDS)

check: all $(UNITS) $(REPLAYS) $(BENCHES)
	tests/run

fuzz: $(FUZZERS)

bench: all $(BENCHES)

# make -s print-cflags [CC=... CFLAGS=...]: "OBJECT: COMPILER FLAGS" for every object the rules
# above build (tests/t1330-portable.sh compiles the portable check with each distinct set; with
# CUDA=1 or HIP=1 the GPU objects too: tests/t5044-hrx-gpu-build.sh)
print-cflags:
	@$(foreach f,$(LIB_SRC) $(CMD_SRC) $(UNIT_SRC) $(BENCH_SRC),echo '$(f:.c=.o): $(strip $(CC) $(call ob_cflags,$f))';)
	@$(foreach f,$(HRX_SIM_OBJ) $(UNIT_CXX:.cc=.o),echo '$f: $(strip $(CXX) $(call ob_cxxflags,$f))';)
	@$(foreach f,$(HRX_SIM_OBJ),echo 'build/san/$f: $(strip $(CXX) $(call ob_cxxflags,$f) $(SAN_FLAGS) $(if $(filter %/sim.o,$f),,$(SAN_KERNEL)))';)
	@$(foreach f,$(HRX_SIM_OBJ),echo 'build/fuzz/$f: $(strip $(FUZZ_CXX) $(ob_fuzz_cxxflags))';)
	@$(foreach f,$(filter lib/hrx/cuda-%,$(HRX_GPU_OBJ)),echo '$f: $(strip $(NVCC) $(NVCCFLAGS) $(OB_EXACT_NVCC))';)
	@$(foreach f,$(filter lib/hrx/hip-%,$(HRX_GPU_OBJ)),echo '$f: $(strip $(HIPCC) $(HIPCCFLAGS) $(OB_EXACT_HIPCC))';)
	@$(foreach f,$(LIB_SRC),echo 'build/san/$(f:.c=.o): $(strip $(CC) $(call ob_san_cflags,$f))';)
	@$(foreach f,$(LIB_SRC),echo 'build/fuzz/$(f:.c=.o): $(strip $(FUZZ_CC) $(call ob_fuzz_cflags,$f))';)

MAN1 := $(sort $(wildcard man/*.1))
MAN7 := $(sort $(wildcard man/*.7))

install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man7 \
	    $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR)
	install -m 755 $(CMDS) $(PY_CMDS) $(DESTDIR)$(BINDIR)/
	install -d $(DESTDIR)$(DATADIR)/1b
	install -m 644 contrib/prompts.jsonl $(DESTDIR)$(DATADIR)/1b/
	install -m 644 $(MAN1) $(DESTDIR)$(MANDIR)/man1/
	install -m 644 $(MAN7) $(DESTDIR)$(MANDIR)/man7/
	install -m 644 completions/1b.bash $(DESTDIR)$(BASHCOMPDIR)/1b
	for c in $(notdir $(CMDS) $(PY_CMDS)); do ln -sf 1b $(DESTDIR)$(BASHCOMPDIR)/$$c; done
	install -m 644 completions/_1b $(DESTDIR)$(ZSHCOMPDIR)/_1b

clean:
	rm -rf bin build tests/tmp
	rm -f $(LIB) $(foreach d,$(LIB_DIRS) cmd tests/unit bench,$d/*.o $d/*.d)

# header dependencies (ALL_CPPFLAGS has -MMD -MP)
-include $(wildcard $(foreach d,$(LIB_DIRS) cmd tests/unit bench,$d/*.d) \
         $(foreach d,$(LIB_DIRS),build/san/$d/*.d build/fuzz/$d/*.d))

.PHONY: all check fuzz bench install clean print-cflags lint FORCE
.DEFAULT_GOAL := all
.SECONDARY:
