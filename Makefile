# inferplane — build, test and run.
#
#   make deps        install the Debian packages the build and tests need (idempotent, quiet)
#   make             build every binary into $(BUILD)/ (inferplane-<service>, inferplanectl)
#   make test        unit tests (cmocka) + integration tests; ends with "N passed, N failed"
#   make run         deps + build + start the local stack with simulated vLLM workers
#                    (REPLICAS="decider=3 gateway=2": that many of those services)
#   make image       the Docker images, built from the repository (docs/compose.md)
#   make compose-up  the same stack on docker-compose (REPLICAS too); make compose-down
#   make bench       benchmarks (see docs/benchmarks.md)
#   make soak        the fault suite's long form, ~12 minutes (docs/faults.md)
#   make bench-quick the end-to-end benchmark's short version (about 25 s)
#   make SANITIZE=1  the same with -fsanitize=address,undefined, into build-san/
#
# Everything is found with pkg-config; new .c files are picked up by wildcard, so adding a
# class never means editing this file.

CC      ?= cc
BUILD   ?= build
PKGS    := libczmq libzmq msgpack libmicrohttpd libcurl yaml-0.1 libxxhash libcjson
VERSION := $(shell git describe --always --dirty 2>/dev/null || echo 0.1.0-dev)

OPT     ?= -O2
# Every library folder is on the include path; tools/check-layers (run by `make test`) proves
# that each file includes only what its layer may.
LIB_DIRS := common proto libs/engine libs/decision libs/policy libs/decider libs/tenants libs/api libs/labels libs/fairq libs/limits
CFLAGS  := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wno-missing-field-initializers \
           -g $(OPT) -fno-strict-aliasing -MMD -MP $(LIB_DIRS:%=-I%) \
           -DIPL_VERSION=\"$(VERSION)\" $(EXTRA_CFLAGS)
LDLIBS  := -lpthread -lm
LDFLAGS :=

ifeq ($(SANITIZE),1)
BUILD   := build-san
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
endif

# pkg-config is evaluated lazily so `make deps` works before the packages exist.
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null)

# The libraries, bottom up (docs/architecture.md, "Layers"). One folder, one archive; a
# library may include and use only the libraries its _USES line names (tools/check-layers
# reads these lines). Every program links them all, top first; the linker takes only what
# it needs.
ipl_DIR       := common
proto_DIR     := proto
engine_DIR    := libs/engine
decision_DIR  := libs/decision
policy_DIR    := libs/policy
decider_DIR   := libs/decider
tenants_DIR   := libs/tenants
api_DIR       := libs/api
labels_DIR    := libs/labels
fairq_DIR     := libs/fairq
limits_DIR    := libs/limits
ipl_USES      :=
proto_USES    := ipl
engine_USES   := ipl
decision_USES := proto ipl
policy_USES   := labels proto ipl
decider_USES  := policy decision proto ipl
tenants_USES  := ipl
api_USES      := ipl
labels_USES   := ipl
fairq_USES    := ipl
limits_USES   := proto ipl
LIB_NAMES     := decider tenants policy decision engine api labels fairq limits proto ipl
lib_archive    = $(BUILD)/lib$(if $(filter ipl,$(1)),ipl,ipl-$(1)).a
LIB_ARCHIVES  := $(foreach l,$(LIB_NAMES),$(call lib_archive,$(l)))
LIB_SRC       := $(foreach l,$(LIB_NAMES),$(wildcard $($(l)_DIR)/*.c))
LIB           := $(call lib_archive,ipl)

# The programs: one per services/<name>/ (inferplane-<name>) and per tools/<name>/ with a
# main.c (<name>; the offline cluster simulator keeps its name inferplane-clustersim).
SERVICES  := $(notdir $(wildcard services/*))
TOOLS     := $(patsubst %/,%,$(dir $(wildcard tools/*/main.c)))
prog_name  = $(if $(filter services/%,$(1)),inferplane-$(notdir $(1)),$(if $(filter tools/clustersim,$(1)),inferplane-clustersim,$(notdir $(1))))
PROGRAMS  := $(SERVICES:%=services/%) $(TOOLS)
BINS      := $(foreach p,$(PROGRAMS),$(BUILD)/$(call prog_name,$(p)))

UNIT_SRC  := $(wildcard $(LIB_DIRS:%=%/tests/test_*.c) services/*/tests/test_*.c tools/*/tests/test_*.c)
UNIT_BINS := $(foreach s,$(UNIT_SRC),$(BUILD)/tests/$(basename $(notdir $(s))))
# (defined before `all`, whose prerequisites are expanded where the rule is read)
BENCH_SRC  := $(wildcard bench/bench_*.c)
BENCH_BINS := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

.PHONY: all deps test unit integration run bench bench-micro clean format proto-doc config-doc check-deps check-layers
all: $(BINS) $(UNIT_BINS) $(BENCH_BINS) $(BUILD)/bench/fakeclock.so

# A test (<folder>/tests/test_*.c) also sees the headers of the folder it tests.
$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "CC $<"
	@$(CC) $(CFLAGS) $(if $(findstring /tests/,$<),-I$(dir $<)..) $(PKG_CFLAGS) -c $< -o $@

define LIB_RULES
$(call lib_archive,$(1)): $$(patsubst %.c,$(BUILD)/obj/%.o,$$(wildcard $($(1)_DIR)/*.c))
	@mkdir -p $$(dir $$@)
	@rm -f $$@
	@ar rcs $$@ $$^
$$(patsubst $($(1)_DIR)/tests/%.c,$(BUILD)/tests/%,$$(wildcard $($(1)_DIR)/tests/test_*.c)): \
  $(BUILD)/tests/%: $(BUILD)/obj/$($(1)_DIR)/tests/%.o $(LIB_ARCHIVES)
	@mkdir -p $$(dir $$@)
	$(CC) $(LDFLAGS) $$^ $$(PKG_LIBS) -lcmocka $(LDLIBS) -o $$@
endef
$(foreach l,$(LIB_NAMES),$(eval $(call LIB_RULES,$(l))))

# One program per folder: main.c plus its classes; the classes (all but main.c) also form an
# archive that the program's unit tests (<folder>/tests/test_*.c) link against.
define PROGRAM_RULES
$(1)_CLS := $$(patsubst %.c,$(BUILD)/obj/%.o,$$(filter-out $(1)/main.c,$$(wildcard $(1)/*.c)))
$(BUILD)/prog-$(call prog_name,$(1)).a: $$($(1)_CLS)
	@mkdir -p $$(dir $$@)
	@rm -f $$@
	@ar rcs $$@ $$^
$(BUILD)/$(call prog_name,$(1)): $(BUILD)/obj/$(1)/main.o $(BUILD)/prog-$(call prog_name,$(1)).a $(LIB_ARCHIVES)
	$(CC) $(LDFLAGS) $$^ $$(PKG_LIBS) $(LDLIBS) -o $$@
$$(patsubst $(1)/tests/%.c,$(BUILD)/tests/%,$$(wildcard $(1)/tests/test_*.c)): \
  $(BUILD)/tests/%: $(BUILD)/obj/$(1)/tests/%.o $(BUILD)/prog-$(call prog_name,$(1)).a $(LIB_ARCHIVES)
	@mkdir -p $$(dir $$@)
	$(CC) $(LDFLAGS) $$^ $$(PKG_LIBS) -lcmocka $(LDLIBS) -o $$@
endef
$(foreach p,$(PROGRAMS),$(eval $(call PROGRAM_RULES,$(p))))

# Benchmarks: bench/bench_*.c measure services' classes too (they include them by
# <service>/<class>.h), so each links every service archive and every library.
SVC_ARCHIVES := $(SERVICES:%=$(BUILD)/prog-inferplane-%.a)
$(BUILD)/obj/bench/%.o: CFLAGS += -Iservices
$(BUILD)/bench/%: $(BUILD)/obj/bench/%.o $(SVC_ARCHIVES) $(LIB_ARCHIVES)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ $(PKG_LIBS) $(LDLIBS) -o $@

# The fixed-step clock for deterministic callgrind counts (bench/fakeclock.c); never
# sanitized: it is preloaded into other programs.
$(BUILD)/bench/fakeclock.so: bench/fakeclock.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O2 -shared -fPIC $< -o $@

deps:
	@tools/deps.sh

# Fails when a file includes a header its layer may not (a service another service's, a library
# one above it, common/ proto/): see tools/check-layers.
check-layers:
	@tools/check-layers

check-deps:
	@pkg-config --exists $(PKGS) || { echo "missing build dependencies: run 'make deps'" >&2; exit 1; }

# make test: every unit test binary, then every integration test, one summary line at the end.
test: deps check-layers
	@$(MAKE) --no-print-directory all fuzz-build
	@BUILD=$(BUILD) FUZZ_SECONDS=$(TEST_FUZZ_SECONDS) tools/run-tests

unit: all
	@BUILD=$(BUILD) tools/run-tests --unit

integration: all
	@BUILD=$(BUILD) tools/run-tests --integration

# make soak: the fault suite's long form (integration/faults/soak.py, docs/faults.md): every
# fault of the short form in `make test` repeated SOAK_ROUNDS times under more load, about six
# minutes a round; the figures go to $(BUILD)/faults-soak.json.
SOAK_ROUNDS ?= 2
.PHONY: soak
soak: all
	@cd integration && BUILD=$(abspath $(BUILD)) IPL_SOAK_ROUNDS=$(SOAK_ROUNDS) \
	  IPL_FAULTS_FIGURES=$(abspath $(BUILD))/faults-soak.json python3 -m unittest -v faults.soak

run: deps
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) tools/run-stack

# Docker (docs/compose.md): compose/stack runs tools/deps-docker.sh first (Docker from Debian,
# a private dockerd where none runs, the base images). REPLICAS (also read by tools/run-stack
# for `make run`) is "NAME=N ...", e.g. REPLICAS="decider=3 gateway=2".
IMAGE     ?= inferplane:dev
OPS_IMAGE ?= inferplane-ops:dev
.PHONY: image compose-up compose-down
image:
	@IMAGE=$(IMAGE) OPS_IMAGE=$(OPS_IMAGE) VERSION=$(VERSION) compose/stack image

compose-up: image
	@IMAGE=$(IMAGE) OPS_IMAGE=$(OPS_IMAGE) compose/stack up $(REPLICAS)

compose-down:
	@IMAGE=$(IMAGE) OPS_IMAGE=$(OPS_IMAGE) compose/stack down

bench: deps
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) tools/run-bench

bench-micro: deps
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) tools/run-bench --micro

# The end-to-end benchmark's short version (bench/bench_e2e.py --quick: 2 workers, 3
# strategies, a few seconds per cell); integration/test_bench_quick.py runs it in make test.
.PHONY: bench-quick
bench-quick: deps
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) bench/bench_e2e.py --quick

proto-doc: $(BUILD)/inferplanectl
	$(BUILD)/inferplanectl proto-doc > docs/protocol.md

# docs/configuration.md's flag tables, regenerated from every service's --help.
config-doc: $(BINS)
	@BUILD=$(BUILD) tools/gen-config-doc

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf build build-san

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

# libFuzzer targets (fuzz/fuzz_*.c), built with clang into build-fuzz/.
#   make fuzz                 build them and run each for FUZZ_SECONDS (default 60)
#   make fuzz FUZZ_SECONDS=5  the short run `make test` uses
FUZZ_SECONDS ?= 60
TEST_FUZZ_SECONDS ?= 5
FUZZ_SRC     := $(wildcard fuzz/fuzz_*.c)
FUZZ_BINS    := $(FUZZ_SRC:fuzz/%.c=build-fuzz/%)
FUZZ_LIBSRC   = $(filter-out common/ipl_httpd.c common/ipl_admin.c common/ipl_service.c,$(wildcard common/*.c proto/*.c))
# A target that fuzzes a library above common/ and proto/ names its sources here:
# FUZZ_EXTRA_<target> := $(wildcard libs/<name>/*.c)
FUZZ_EXTRA_fuzz_tenants := $(wildcard libs/tenants/*.c)
FUZZ_EXTRA_fuzz_labels  := $(wildcard libs/labels/*.c)
FUZZ_EXTRA_fuzz_api_anthropic := $(wildcard libs/api/*.c)
FUZZ_EXTRA_fuzz_limits := $(wildcard libs/limits/*.c)
FUZZ_EXTRA_fuzz_bench_trace := $(addprefix tools/inferplane-bench/,bench_trace.c bench_rng.c bench_stream.c)
FUZZ_EXTRA_fuzz_sse := services/gateway/gateway_sse.c
FUZZ_EXTRA_fuzz_rewrite := services/gateway/gateway_rewrite.c services/gateway/gateway_sse.c
FUZZ_EXTRA_fuzz_gateway_request := services/gateway/gateway_api.c $(wildcard libs/api/*.c)
FUZZ_EXTRA_fuzz_route := libs/decider/decider_http.c common/ipl_httpd.c \
  $(wildcard libs/decision/*.c libs/policy/*.c libs/labels/*.c)
FUZZ_EXTRA_fuzz_policy := common/ipl_httpd.c $(wildcard libs/policy/*.c libs/labels/*.c)
FUZZ_EXTRA_fuzz_collector_checkpoint := services/collector/collector_checkpoint.c
.PHONY: fuzz fuzz-build
fuzz-build: $(FUZZ_BINS)
# Every source is compiled once for all targets (build-fuzz/obj/, instrumented for coverage
# with -fsanitize=fuzzer-no-link); a target links its own file, common/ and proto/, and its
# FUZZ_EXTRA_ sources.
FUZZ_CFLAGS := -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer-no-link,address,undefined \
               -MMD -MP $(LIB_DIRS:%=-I%) -DIPL_VERSION=\"fuzz\"
fuzz_obj     = $(patsubst %.c,build-fuzz/obj/%.o,$(1))
build-fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "FUZZ-CC $<"
	@clang $(FUZZ_CFLAGS) $(PKG_CFLAGS) -c $< -o $@
.PRECIOUS: build-fuzz/obj/%.o
.SECONDEXPANSION:
build-fuzz/fuzz_%: $$(call fuzz_obj,fuzz/fuzz_$$*.c $(FUZZ_LIBSRC) $$(FUZZ_EXTRA_fuzz_$$*))
	@echo "FUZZ $@"
	@clang -fsanitize=fuzzer,address,undefined $^ $(PKG_LIBS) $(LDLIBS) -o $@
-include $(shell find build-fuzz/obj -name '*.d' 2>/dev/null)
fuzz: deps fuzz-build
	@tools/run-fuzz $(FUZZ_SECONDS) $(FUZZ_BINS)
