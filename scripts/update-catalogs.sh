#!/usr/bin/env bash
# Regenerate the message template from the code and merge it into every catalog.
# New or changed messages then appear untranslated (never fuzzy) in locales/*/LC_MESSAGES/*.po;
# translate them, and reinstall (pip install -e .) to recompile the .mo files.
set -euo pipefail
cd "$(dirname "$0")/.."
# --ignore-dirs: Babel skips folders starting with "_" by default, and the package's rooms do
pybabel extract -F pyproject.toml --no-location --sort-by-file --omit-header \
    --ignore-dirs ".* __* build dist .venv*" \
    -o locales/langchain_loop_guard.pot .
pybabel update -i locales/langchain_loop_guard.pot -d locales -D langchain_loop_guard \
    --no-fuzzy-matching --ignore-obsolete
