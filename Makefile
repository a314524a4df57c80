# The two commands of the README. Both install what is missing first (Debian 12, as root).
PY ?= python3
DEFAULT_RUN = --backend redlock --nemesis clock-skew --time-limit 30 --concurrency 5 --seed 7

.PHONY: install compose compose-harness swarm swarm-down chaos test unit clean

install:
	@bash scripts/install.sh

# What `--cluster compose` needs: Debian's Docker engine (started, inside 198.18.0.0/15), a
# Compose v2 CLI and the server images (scripts/compose/). compose-harness adds the harness image.
compose: install
	@bash scripts/compose/engine.sh
	@bash scripts/compose/images.sh

compose-harness: compose
	@bash scripts/compose/images.sh harness

# A real 3-engine Docker Swarm on this machine (scripts/swarm/swarm.sh): three dockerd, each in
# its own network namespace inside 198.19.249.0/24, one swarm, the images loaded engine to engine.
swarm: compose-harness
	@bash scripts/swarm/swarm.sh up 3

swarm-down:
	@bash scripts/swarm/swarm.sh down

# The default chaos test. Exit 1 means "violations found", which is this test's expected
# finding (Redlock under clock jumps), so only 2 and above fail make.
chaos: install
	@$(PY) -m harness run $(DEFAULT_RUN); rc=$$?; [ $$rc -le 1 ] || exit $$rc

# The server-free unit tests run on both cores (pytest-xdist); the integration tests, whose
# runs are timing-sensitive, one at a time.
test: install compose-harness
	$(PY) -m pytest -q -p no:cacheprovider -n 2 tests/unit
	$(PY) -m pytest -q -p no:cacheprovider --durations=30 tests/integration

unit:
	$(PY) -m pytest -q -p no:cacheprovider tests/unit

clean:
	$(PY) -m harness cluster down --all
