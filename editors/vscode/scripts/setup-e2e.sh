#!/bin/sh
# Set-up for the VS Code end-to-end test (tests/e2e/test_vscode.py) and the packaged extension.
# Idempotent; everything downloaded is cached under $REPO/.cache (gitignored):
#   1. Debian packages chromium, ripgrep, libkrb5-dev, build-essential, pkg-config (only when missing, and
#      only as root with apt-get; otherwise it stops, naming them)
#   2. code-server 4.100.3 (= VS Code 1.100.3) from the npm registry -> $REPO/.cache/code-server
#   3. the extension's npm deps (npm ci) and the .vsix (npm run package) -> editors/vscode/soma-lsp.vsix
#   4. the e2e driver's npm deps (playwright-core) in tests/e2e/vscode
# Usage: editors/vscode/scripts/setup-e2e.sh [--no-apt] [--no-code-server]
# Prints "setup-e2e: ok" at the end; exits non-zero with the reason when something is missing.
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
EXT=$(cd "$HERE/.." && pwd)
REPO=$(cd "$EXT/../.." && pwd)
CACHE=${SOMA_E2E_CACHE:-$REPO/.cache}
CS_VERSION=4.100.3
CS_HOME=$CACHE/code-server
DRIVER=$REPO/tests/e2e/vscode
DO_APT=1
DO_CS=1
for a in "$@"; do
  case "$a" in
    --no-apt) DO_APT=0 ;;
    --no-code-server) DO_CS=0 ;;
    *) echo "setup-e2e: unknown argument $a" >&2; exit 2 ;;
  esac
done
say() { echo "setup-e2e: $*"; }
die() { echo "setup-e2e: ERROR: $*" >&2; exit 1; }

command -v node >/dev/null || die "node is not installed (node 20 is needed)"
command -v npm >/dev/null || die "npm is not installed"
NODE_MAJOR=$(node -p 'process.versions.node.split(".")[0]')
[ "$NODE_MAJOR" -ge 20 ] || die "node >= 20 is needed, found $(node -v)"

# ---- 1. Debian packages ---------------------------------------------------------------------------
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
missing=""
command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
command -v rg >/dev/null 2>&1 || missing="$missing ripgrep"
if command -v dpkg-query >/dev/null 2>&1; then
  have_pkg libkrb5-dev || missing="$missing libkrb5-dev"
  for p in build-essential pkg-config; do have_pkg "$p" || missing="$missing $p"; done
fi
if [ -n "$missing" ]; then
  if [ "$DO_APT" = 1 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing Debian packages:$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq $missing >/dev/null
  else
    die "missing packages:$missing (install them with: apt-get install -y$missing)"
  fi
fi
command -v chromium >/dev/null 2>&1 || die "chromium is still missing"

# ---- 2. code-server 4.100.3 -----------------------------------------------------------------------
cs_ok() {
  [ -f "$CS_HOME/.installed-$CS_VERSION" ] && [ -x "$CS_HOME/node_modules/.bin/code-server" ]
}
if [ "$DO_CS" = 1 ] && ! cs_ok; then
  say "installing code-server $CS_VERSION into $CS_HOME (about 2 minutes)"
  rm -rf "$CS_HOME"
  mkdir -p "$CS_HOME"
  (
    cd "$CS_HOME"
    printf '{"name":"soma-e2e-code-server","private":true}\n' > package.json
    # The package's postinstall refuses to run as root on npm >= 9 and would download ripgrep:
    # install without scripts, then do the postinstall's steps by hand.
    npm install --ignore-scripts --no-audit --no-fund --loglevel=error code-server@$CS_VERSION
    npm rebuild argon2 --loglevel=error
    cd node_modules/code-server/lib/vscode
    npm install --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error
    mkdir -p node_modules/@vscode/ripgrep/bin
    cp "$(command -v rg)" node_modules/@vscode/ripgrep/bin/rg
    npm_config_yes=true npm rebuild --loglevel=error   # node-pty's build runs `npx node-gyp`
    ln -sfn node_modules node_modules.asar
    (cd bin/remote-cli && ln -sfn code-linux.sh code-server)
    (cd bin/helpers && ln -sfn browser-linux.sh browser.sh)
    cd extensions && npm install --omit=dev --no-audit --no-fund --loglevel=error
  )
  tmpx=$(mktemp -d)   # --version writes a default config under $XDG_CONFIG_HOME: keep it out of ~
  v=$(XDG_CONFIG_HOME=$tmpx XDG_DATA_HOME=$tmpx "$CS_HOME/node_modules/.bin/code-server" --version | tail -1)
  rm -rf "$tmpx"
  case "$v" in "$CS_VERSION"*) ;; *) die "code-server reports version '$v', expected $CS_VERSION" ;; esac
  touch "$CS_HOME/.installed-$CS_VERSION"
  say "code-server $v installed"
elif [ "$DO_CS" = 1 ]; then
  say "code-server $CS_VERSION already installed in $CS_HOME"
fi

# ---- 3. the extension: npm ci + package -----------------------------------------------------------
npm_ci() {  # npm ci in $1 unless node_modules is newer than package-lock.json
  if [ ! -f "$1/node_modules/.package-lock.json" ] || [ "$1/package-lock.json" -nt "$1/node_modules/.package-lock.json" ]; then
    say "npm ci in $1"
    (cd "$1" && npm ci --no-audit --no-fund --loglevel=error)
  fi
}
npm_ci "$EXT"
say "packaging the extension"
(cd "$EXT" && npm run --silent package)
[ -f "$EXT/soma-lsp.vsix" ] || die "npm run package did not produce $EXT/soma-lsp.vsix"

# ---- 4. the e2e driver ----------------------------------------------------------------------------
npm_ci "$DRIVER"

say "ok (vsix: $EXT/soma-lsp.vsix, code-server: $CS_HOME)"
