# Sourced by .ci/typecheck and .ci/import-contracts: lay tbtriage out as it installs, in a scratch folder.
# The repository keeps analysis/, tui/ and themes/ at the top but installs them as tbtriage.analysis,
# tbtriage.tui and tbtriage.themes (setuptools package-dir). Static tools (mypy, import-linter) cannot follow
# that mapping: they would see `analysis.*` while the code imports `tbtriage.analysis.*`. So link the
# installed shape into "$view", cd there, and put it first on PYTHONPATH. `to_repo_paths` maps output back.
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
view="$(mktemp -d)"
trap 'rm -rf "$view"' EXIT
mkdir "$view/tbtriage"
for f in "$repo"/tbtriage/*; do ln -s "$f" "$view/tbtriage/"; done
for p in analysis tui themes; do ln -s "$repo/$p" "$view/tbtriage/$p"; done
cd "$view"
export PYTHONPATH="$view${PYTHONPATH:+:$PYTHONPATH}"
to_repo_paths() { sed -E -e 's#(^|[^[:alnum:]_/])tbtriage/(analysis|tui|themes)/#\1\2/#g'; }
