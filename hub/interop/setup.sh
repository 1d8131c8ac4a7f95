#!/bin/sh
# Installs the pinned @huggingface/hub (package-lock.json) into hub/interop/node_modules: the Go
# tests of this folder run it before driving the JavaScript client, and CI runs it ahead of
# `go test` so that the tests themselves need no network. A node_modules already holding the
# pinned version is left alone (no network); anything else is replaced by `npm ci`.
set -eu
cd "$(dirname "$0")"
if ! command -v node >/dev/null 2>&1; then
	echo "hub/interop/setup.sh: node is not installed" >&2
	exit 1
fi
want=$(node -p 'require("./package.json").dependencies["@huggingface/hub"]')
have=$(node -p 'require("./node_modules/@huggingface/hub/package.json").version' 2>/dev/null || true)
if [ "$want" = "$have" ]; then
	exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
	echo "hub/interop/setup.sh: npm is not installed (needed to install @huggingface/hub $want)" >&2
	exit 1
fi
npm ci --no-audit --no-fund --loglevel=error >&2
