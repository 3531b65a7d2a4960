#!/usr/bin/env bash
# Set up everything the tests need on a fresh Debian machine, then run the whole suite.
# Installs: kcat, Go, Chromium and chromium-driver if missing (Debian), the project and its test extras (PyPI, into .venv), and the Java
# client scenarios + Apache Kafka reference jars (Maven Central, cached in ~/.m2 and ~/.cache).
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
need=()
command -v kcat >/dev/null || need+=(kcat)
command -v java >/dev/null || need+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null || need+=(maven)
# Go, for franz-go's own test suite (tests/e2e/test_franz_go.py): the machine's toolchain if it has one,
# else Debian's (Go >= 1.21 fetches the toolchain tests/go/go.mod asks for from the module proxy).
[[ -x /usr/local/go/bin/go ]] && export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || need+=(golang-go)
# Chromium headless and its WebDriver, for the inspector page's browser tests (tests/e2e/test_inspector_browser.py)
command -v chromium >/dev/null || need+=(chromium)
command -v chromedriver >/dev/null || need+=(chromium-driver)
if ((${#need[@]})); then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
if [[ ! -x .venv/bin/python ]]; then
  python3 -m venv .venv
  .venv/bin/pip install -q --upgrade pip
fi
.venv/bin/pip install -q -e '.[test]'
.venv/bin/python -m compileall -q broker protocol storage coordinator >/dev/null  # as scripts/run.sh
.venv/bin/ruff check broker protocol storage coordinator tests bench pipelines
.venv/bin/mypy  # protocol/ storage/ coordinator/ broker/ ([tool.mypy] in pyproject.toml)
# The broker as users install it: every broker the tests start runs from .venv-runtime, the wheel of
# this tree with only its runtime dependencies (tests/support/runtime_env.py; rebuilt when sources change).
.venv/bin/python -c "from tests.support.runtime_env import ensure_runtime_venv; ensure_runtime_venv()"
# Container checks (scripts/oci-smoke.sh: the Dockerfile and docker-compose.yml built and run with
# podman, smoke-tested through 127.0.0.1:9092; about 1-2 min, 3-5 min on a fresh machine).
# OCI_CHECK=1 runs them, OCI_CHECK=0 skips them; auto (default) runs them under CI as root when
# ../shared/tools/oci-check is there.
case ${OCI_CHECK:-auto} in
  1|true|yes) oci=1 ;;
  auto) oci=0; [[ ${CI:-} == true && $(id -u) -eq 0 && -x ../shared/tools/oci-check ]] && oci=1 ;;
  *) oci=0 ;;
esac
if ((oci)); then PYTHON=.venv/bin/python bash scripts/oci-smoke.sh; fi
exec .venv/bin/python -m pytest -q -p no:cacheprovider --durations=25 "$@"
