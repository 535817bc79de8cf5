# inferplane — build, test and run.
#
#   make deps        install the Debian packages the build and tests need (idempotent, quiet)
#   make             build every binary into $(BUILD)/ (inferplane-<service>, inferplanectl)
#   make test        unit tests (cmocka) + integration tests; ends with "N passed, N failed"
#   make run         deps + build + start the local stack with simulated vLLM workers
#   make bench       benchmarks (see docs/benchmarks.md)
#   make SANITIZE=1  the same with -fsanitize=address,undefined, into build-san/
#
# Everything is found with pkg-config; new .c files are picked up by wildcard, so adding a
# class never means editing this file.

CC      ?= cc
BUILD   ?= build
PKGS    := libczmq libzmq msgpack libmicrohttpd libcurl yaml-0.1 libxxhash libcjson
VERSION := $(shell git describe --always --dirty 2>/dev/null || echo 0.1.0-dev)

OPT     ?= -O2
CFLAGS  := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wno-missing-field-initializers \
           -g $(OPT) -fno-strict-aliasing -MMD -MP -Icommon -Iproto -Iservices \
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

LIB_SRC   := $(wildcard common/*.c proto/*.c)
LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
LIB       := $(BUILD)/libipl.a

SERVICES  := $(notdir $(wildcard services/*))
TOOLS     := $(patsubst %/,%,$(dir $(wildcard tools/*/main.c)))
BINS      := $(SERVICES:%=$(BUILD)/inferplane-%) \
             $(foreach t,$(TOOLS),$(BUILD)/$(notdir $(t)))

UNIT_SRC  := $(wildcard common/tests/test_*.c proto/tests/test_*.c services/*/tests/test_*.c)
UNIT_BINS := $(foreach s,$(UNIT_SRC),$(BUILD)/tests/$(basename $(notdir $(s))))
# (defined before `all`, whose prerequisites are expanded where the rule is read)
BENCH_SRC  := $(wildcard bench/bench_*.c)
BENCH_BINS := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

.PHONY: all deps test unit integration run bench bench-micro clean format proto-doc config-doc check-deps
all: $(BINS) $(UNIT_BINS) $(BENCH_BINS) $(BUILD)/bench/fakeclock.so

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "CC $<"
	@$(CC) $(CFLAGS) $(PKG_CFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	@rm -f $@
	@ar rcs $@ $^

# A service that reuses another service's classes names it here (it links that archive too).
clustersim_USES := decider sim
gateway_USES    := decider

# One process per services/<name>/: main.c plus its classes; the classes (all but main.c)
# also form a per-service archive that the service's unit tests link against.
define SERVICE_RULES
$(1)_SRC := $$(filter-out services/$(1)/main.c,$$(wildcard services/$(1)/*.c))
$(1)_OBJ := $$($(1)_SRC:%.c=$(BUILD)/obj/%.o)
$(BUILD)/svc-$(1).a: $$($(1)_OBJ)
	@mkdir -p $$(dir $$@)
	@rm -f $$@
	@ar rcs $$@ $$^
$(BUILD)/inferplane-$(1): $(BUILD)/obj/services/$(1)/main.o $(BUILD)/svc-$(1).a \
  $$(foreach u,$$($(1)_USES),$(BUILD)/svc-$$(u).a) $(LIB)
	$(CC) $(LDFLAGS) $$^ $$(PKG_LIBS) $(LDLIBS) -o $$@
$$(patsubst services/$(1)/tests/%.c,$(BUILD)/tests/%,$$(wildcard services/$(1)/tests/test_*.c)): \
  $(BUILD)/tests/%: $(BUILD)/obj/services/$(1)/tests/%.o $(BUILD)/svc-$(1).a \
  $$(foreach u,$$($(1)_USES),$(BUILD)/svc-$$(u).a) $(LIB)
	$(CC) $(LDFLAGS) $$^ $$(PKG_LIBS) -lcmocka $(LDLIBS) -o $$@
endef
$(foreach s,$(SERVICES),$(eval $(call SERVICE_RULES,$(s))))

# Benchmarks: bench/bench_*.c, each linked with every service archive and libipl.a.
SVC_LIBS   := $(SERVICES:%=$(BUILD)/svc-%.a)
$(BUILD)/bench/%: $(BUILD)/obj/bench/%.o $(SVC_LIBS) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ $(PKG_LIBS) $(LDLIBS) -o $@

# The fixed-step clock for deterministic callgrind counts (bench/fakeclock.c); never
# sanitized: it is preloaded into other programs.
$(BUILD)/bench/fakeclock.so: bench/fakeclock.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O2 -shared -fPIC $< -o $@

define TOOL_RULES
$(BUILD)/$(notdir $(1)): $$(patsubst %.c,$(BUILD)/obj/%.o,$$(wildcard $(1)/*.c)) $(LIB)
	$(CC) $(LDFLAGS) $$^ $$(PKG_LIBS) $(LDLIBS) -o $$@
endef
$(foreach t,$(TOOLS),$(eval $(call TOOL_RULES,$(t))))

# Unit tests of common/ and proto/ classes link against libipl.a only.
define LIB_TEST_RULES
$(patsubst $(1)/tests/%.c,$(BUILD)/tests/%,$(wildcard $(1)/tests/test_*.c)): \
  $(BUILD)/tests/%: $(BUILD)/obj/$(1)/tests/%.o $(LIB)
	@mkdir -p $$(dir $$@)
	$(CC) $(LDFLAGS) $$^ $$(PKG_LIBS) -lcmocka $(LDLIBS) -o $$@
endef
$(eval $(call LIB_TEST_RULES,common))
$(eval $(call LIB_TEST_RULES,proto))

deps:
	@tools/deps.sh

check-deps:
	@pkg-config --exists $(PKGS) || { echo "missing build dependencies: run 'make deps'" >&2; exit 1; }

# make test: every unit test binary, then every integration test, one summary line at the end.
test: deps
	@$(MAKE) --no-print-directory all fuzz-build
	@BUILD=$(BUILD) FUZZ_SECONDS=$(TEST_FUZZ_SECONDS) tools/run-tests

unit: all
	@BUILD=$(BUILD) tools/run-tests --unit

integration: all
	@BUILD=$(BUILD) tools/run-tests --integration

run: deps
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) tools/run-stack

bench: deps
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) tools/run-bench

bench-micro: deps
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) tools/run-bench --micro

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
FUZZ_LIBSRC   = $(filter-out common/ipl_httpd.c common/ipl_admin.c common/ipl_service.c,$(LIB_SRC))
.PHONY: fuzz fuzz-build
fuzz-build: $(FUZZ_BINS)
build-fuzz/fuzz_%: fuzz/fuzz_%.c $(LIB_SRC) $(wildcard common/*.h proto/*.h)
	@mkdir -p build-fuzz
	@echo "FUZZ $@"
	@clang -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -Icommon -Iproto \
	  -DIPL_VERSION=\"fuzz\" $(PKG_CFLAGS) $< $(FUZZ_LIBSRC) $(PKG_LIBS) $(LDLIBS) -o $@
fuzz: deps fuzz-build
	@tools/run-fuzz $(FUZZ_SECONDS) $(FUZZ_BINS)
